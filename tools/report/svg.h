// A small SVG writer for the report's figures: line plots with several series (linear or log axes, markers,
// error bars or shaded bands, gaps where a value is missing) and bar charts (grouped, optionally stacked,
// with error bars), one or more panels side by side, each with its legend.
//
// The output is plain SVG 1.1 that browsers and GitHub render. Its elements carry classes and data
// attributes (plot-area, tick, point, errorbar, bar, ...) so that the tests can find them and check that
// each lands where its value puts it (tests/cpu/test_report_svg.cpp).
#pragma once
#include <limits>
#include <string>
#include <vector>

namespace report::svg {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Axis {
  std::string label;
  bool log = false;
  double lo = kNaN, hi = kNaN;  // a fixed range; NaN: from the data (widened to the ticks)
  bool zero = false;            // linear: the range includes 0
};

// A mapping from data values to pixels; on a log axis by log10. Values outside the range map outside.
struct Scale {
  double d0 = 0, d1 = 1, p0 = 0, p1 = 1;
  bool log = false;
  double operator()(double v) const;
};

// The axis range for data values `vals` (non-finite values and, on a log axis, values <= 0 ignored):
// linear ranges widen to multiples of the tick step, log ranges to powers of ten.
void auto_range(const Axis& axis, const std::vector<double>& vals, double* lo, double* hi);
// Tick values within [lo, hi]: linear, 1-2-5 steps, about 4-8 ticks; log, powers of ten (with 2 and 5
// between them when the range spans at most two decades).
std::vector<double> ticks(double lo, double hi, bool log);
// A tick label: 0.5, 10, 2,500, 10k, 1M, 1e-05.
std::string tick_label(double v, double step, bool log);
// v can be drawn on the axis: finite, and > 0 on a log axis.
bool usable(double v, bool log);

enum class Marker { None, Circle, Square, Cross };

struct Point {
  double x = kNaN, y = kNaN;
  double lo = kNaN, hi = kNaN;  // the error bar's (or band's) extent in y; NaN: none
};

struct Series {
  std::string name;
  std::vector<Point> points;  // a point with a non-finite y breaks the line
  std::string color;          // "" = the palette's colour for the series' index
  double width = 1.8;
  bool line = true;
  Marker marker = Marker::Circle;
  bool dashed = false;
  bool band = false;   // lo/hi drawn as a shaded band instead of error bars
  bool legend = true;  // listed in the legend
};

struct LinePlot {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  bool legend_inside = false;  // the legend in the plot area's top-right corner (on a white box), not beside it
};

struct BarSeries {
  std::string name, color;
  // values[group][segment]: one segment = a plain bar, several = a stacked bar; an empty or non-finite
  // entry = no bar in that group.
  std::vector<std::vector<double>> values;
  std::vector<double> lo, hi;  // per group: the error bar of the bar's total; NaN or absent = none
};

struct BarChart {
  std::string title;
  Axis y;
  std::vector<std::string> groups;    // the categories along x
  std::vector<std::string> segments;  // names of the stacked parts (shades of the series colour)
  std::vector<BarSeries> series;      // one bar per series in each group
};

struct Panel {
  bool bars = false;
  LinePlot line;
  BarChart bar;
};

struct Figure {
  std::string title;
  std::vector<Panel> panels;
  double panel_width = 640, panel_height = 400;
  std::string caption;  // a line of small text under the panels
};

// The palette's colour for series i (ten distinct colours, then repeating).
std::string palette(size_t i);
// `color` (#rrggbb) mixed with white: t = 0 gives the colour, 1 white.
std::string tint(const std::string& color, double t);
// Text for SVG content and attributes (& < > " ' escaped).
std::string escape(const std::string& s);

std::string render(const Figure& f);
// Writes render(f) to `path` (UserError when the file cannot be written).
void write(const Figure& f, const std::string& path);

}  // namespace report::svg
