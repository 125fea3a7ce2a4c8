// `report pylo`: the PyLO paper's tables and figures beside ours, from the experiment files that
// scripts/reproduce_pylo.sh writes (one JSON-lines file per experiment, DIR/exp/) and the paper's figures
// (tools/report/pylo_paper.jsonl): OUT/report.md, one section per table or figure (our figure, the paper's
// with its GPU, the same-run peer where there is one, the ratio, the command that produced it and how long it
// ran), and one SVG per figure beside it.
#pragma once
#include <string>

namespace report {

// Writes OUT/report.md and the SVGs; returns the page.
std::string write_pylo_report(const std::string& dir, const std::string& out, const std::string& paper_path);
int cmd_pylo(int argc, char** argv);

}  // namespace report
