// The report tool's SVG writer (tools/report/svg): every figure is well-formed XML, and points, ticks,
// error bars and bars land where their values put them, on linear and log axes. Positions are checked
// against the plot area the SVG itself declares (<rect class="plot-area">), not against the writer's
// layout constants, so a layout change does not break the tests but a wrong mapping does.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/cpu/xml_check.h"
#include "tools/report/svg.h"

namespace {
using namespace report::svg;
using xml_check::Element;
using xml_check::Reader;

struct Area {
  double x, y, w, h;
};
Area plot_area(const Reader& r, size_t panel = 0) {
  const auto areas = r.with_class("plot-area");
  EXPECT_GT(areas.size(), panel);
  const Element& a = *areas.at(panel);
  return {a.num("x"), a.num("y"), a.num("width"), a.num("height")};
}

Series series(const std::vector<Point>& pts) {
  Series s;
  s.name = "s";
  s.points = pts;
  return s;
}
BarSeries bars_of(const std::string& name, const std::vector<std::vector<double>>& values,
                  const std::vector<double>& lo = {}, const std::vector<double>& hi = {}) {
  BarSeries b;
  b.name = name;
  b.values = values;
  b.lo = lo;
  b.hi = hi;
  return b;
}

Figure one_line(const LinePlot& p) {
  Figure f;
  f.panels.push_back(Panel{});
  f.panels[0].line = p;
  return f;
}

LinePlot fixed_axes(bool xlog, double xlo, double xhi, bool ylog, double ylo, double yhi) {
  LinePlot p;
  p.x = Axis{"x", xlog, xlo, xhi};
  p.y = Axis{"y", ylog, ylo, yhi};
  return p;
}

const Element* point_at(const Reader& r, double x, double y) {
  for (const Element* e : r.with_class("point"))
    if (std::stod(e->attr.at("data-x")) == x && std::stod(e->attr.at("data-y")) == y) return e;
  return nullptr;
}

TEST(ReportSvg, CheckerRejectsBrokenXml) {
  // The checker must be able to fail, or "well-formed" below proves nothing.
  EXPECT_NO_THROW(Reader("<?xml version=\"1.0\"?><svg a=\"1\"><g><text>a &amp; b</text></g></svg>"));
  EXPECT_THROW(Reader("<svg><g></svg>"), std::runtime_error);                 // crossed tags
  EXPECT_THROW(Reader("<svg a=1></svg>"), std::runtime_error);                // unquoted attribute
  EXPECT_THROW(Reader("<svg><text>a & b</text></svg>"), std::runtime_error);  // bare ampersand
  EXPECT_THROW(Reader("<svg a=\"1\" a=\"2\"/>"), std::runtime_error);         // duplicate attribute
  EXPECT_THROW(Reader("<svg/><svg/>"), std::runtime_error);                   // two roots
  EXPECT_THROW(Reader("<svg><text a=\"x<y\"/></svg>"), std::runtime_error);   // '<' in an attribute
  EXPECT_THROW(Reader("<svg>"), std::runtime_error);                          // never closed
}

TEST(ReportSvg, WellFormedWithAwkwardText) {
  LinePlot p;
  p.title = "a < b & \"quoted\" 'title'";
  p.x.label = "x & <y>";
  Series s;
  s.name = "<series> & \"name\"";
  s.points = {{1, 2}, {2, 3, 2.5, 3.5}, {3, NAN}, {4, 1}};
  p.series = {s};
  Figure f = one_line(p);
  f.title = "R&D <report>";
  f.caption = "caption with & and <";
  BarChart c;
  c.title = "bars & <stacks>";
  c.groups = {"g<1>", "g&2"};
  c.segments = {"fwd", "bwd"};
  c.series = {bars_of("a\"b", {{1, 2}, {3, 4}}, {2, 6}, {4, 8})};
  Panel bars;
  bars.bars = true;
  bars.bar = c;
  f.panels.push_back(bars);
  const std::string doc = render(f);
  Reader r(doc);  // throws if not well-formed
  EXPECT_EQ(r.elements().front().name, "svg");
  EXPECT_EQ(r.elements().front().attr.at("xmlns"), "http://www.w3.org/2000/svg");
  bool found = false;
  for (const auto& e : r.elements()) found |= e.text == "a < b & \"quoted\" 'title'";
  EXPECT_TRUE(found) << "the title's text, escaped and read back";
  EXPECT_EQ(r.with_class("plot-area").size(), 2u);
}

TEST(ReportSvg, LinearPointsLandWhereTheirValuesPutThem) {
  LinePlot p = fixed_axes(false, 0, 10, false, 0, 100);
  Series s;
  s.points = {{0, 0}, {5, 50}, {10, 100}, {2.5, 75}};
  p.series = {s};
  const Reader r(render(one_line(p)));
  const Area a = plot_area(r);
  auto check = [&](double x, double y, double fx, double fy) {
    const Element* e = point_at(r, x, y);
    ASSERT_NE(e, nullptr) << x << "," << y;
    EXPECT_NEAR(e->num("cx"), a.x + fx * a.w, 0.02);
    EXPECT_NEAR(e->num("cy"), a.y + (1 - fy) * a.h, 0.02);  // y grows downwards in SVG
  };
  check(0, 0, 0, 0);
  check(5, 50, 0.5, 0.5);
  check(10, 100, 1, 1);
  check(2.5, 75, 0.25, 0.75);
  // The line through them: one polyline with four vertices.
  const auto lines = r.with_class("series");
  ASSERT_EQ(lines.size(), 1u);
  const std::string pts = lines[0]->attr.at("points");
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 4);
}

TEST(ReportSvg, LogAxesPlacePowersOfTenEvenly) {
  LinePlot p = fixed_axes(true, 1, 1000, true, 0.1, 10);
  Series s;
  s.points = {{10, 1}, {100, 10}, {1, 0.1}, {1000, 0.5}, {50, 0}, {-3, 2}};  // 0 and -3 have no place on a log axis
  p.series = {s};
  const Reader r(render(one_line(p)));
  const Area a = plot_area(r);
  const Element* e = point_at(r, 10, 1);
  ASSERT_NE(e, nullptr);
  EXPECT_NEAR(e->num("cx"), a.x + a.w / 3, 0.02);
  EXPECT_NEAR(e->num("cy"), a.y + a.h / 2, 0.02);
  e = point_at(r, 100, 10);
  ASSERT_NE(e, nullptr);
  EXPECT_NEAR(e->num("cx"), a.x + 2 * a.w / 3, 0.02);
  EXPECT_NEAR(e->num("cy"), a.y, 0.02);
  e = point_at(r, 1000, 0.5);
  ASSERT_NE(e, nullptr);
  EXPECT_NEAR(e->num("cx"), a.x + a.w, 0.02);
  EXPECT_NEAR(e->num("cy"), a.y + a.h * (1 - (std::log10(0.5) + 1) / 2), 0.02);
  EXPECT_EQ(r.with_class("point").size(), 4u) << "the values <= 0 are left out";
  // x ticks at 1, 10, 100, 1000, evenly spaced, labelled as numbers.
  std::vector<double> xt;
  std::vector<std::string> labels;
  for (const Element* t : r.with_class("tick")) {
    if (!t->has_class("x")) continue;
    const double v = std::stod(t->attr.at("data-value"));
    EXPECT_NEAR(t->num("x1"), a.x + a.w * std::log10(v) / 3, 0.02) << v;
    xt.push_back(v);
  }
  for (const Element* t : r.with_class("tick-label"))
    if (t->has_class("x")) labels.push_back(t->text);
  EXPECT_EQ(xt, (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(labels, (std::vector<std::string>{"1", "10", "100", "1,000"}));
}

TEST(ReportSvg, TicksAndAutoRanges) {
  double lo, hi;
  auto_range(Axis{}, {3, 97}, &lo, &hi);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 100);
  EXPECT_EQ(ticks(0, 100, false), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  Axis lg;
  lg.log = true;
  auto_range(lg, {3, 700, -1, 0}, &lo, &hi);
  EXPECT_DOUBLE_EQ(lo, 1);
  EXPECT_DOUBLE_EQ(hi, 1000);
  // Up to two decades: 2 and 5 between the powers of ten.
  const std::vector<double> t = ticks(1, 100, true);
  ASSERT_EQ(t.size(), 7u);
  EXPECT_DOUBLE_EQ(t[1], 2);
  EXPECT_DOUBLE_EQ(t[2], 5);
  EXPECT_DOUBLE_EQ(t[6], 100);
  Axis z;
  z.zero = true;
  auto_range(z, {12, 18}, &lo, &hi);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 20);
  EXPECT_EQ(tick_label(2500, 500, false), "2,500");
  EXPECT_EQ(tick_label(0.25, 0.05, false), "0.25");
  EXPECT_EQ(tick_label(1e5, 0, true), "100k");
  EXPECT_EQ(tick_label(2e6, 0, true), "2M");
  EXPECT_EQ(tick_label(0.01, 0, true), "0.01");
  // Linear ticks land on their values.
  LinePlot p = fixed_axes(false, 0, 10, false, -1, 1);
  p.series = {series({{1, 0}})};
  const Reader r(render(one_line(p)));
  const Area a = plot_area(r);
  int n = 0;
  for (const Element* e : r.with_class("tick"))
    if (e->has_class("y")) {
      const double v = std::stod(e->attr.at("data-value"));
      EXPECT_NEAR(e->num("y1"), a.y + a.h * (1 - (v + 1) / 2), 0.02) << v;
      n++;
    }
  EXPECT_GE(n, 4);
}

TEST(ReportSvg, ErrorBarsSpanLowToHigh) {
  LinePlot p = fixed_axes(false, 0, 4, false, 0, 100);
  Series s;
  s.points = {{1, 50, 40, 70}, {3, 20, 20, 20}};
  p.series = {s};
  const Reader r(render(one_line(p)));
  const Area a = plot_area(r);
  const auto bars = r.with_class("errorbar");
  ASSERT_EQ(bars.size(), 2u);
  const Element& b = *bars[0];
  EXPECT_NEAR(b.num("x1"), a.x + a.w / 4, 0.02);
  EXPECT_NEAR(b.num("x2"), b.num("x1"), 1e-9);
  EXPECT_NEAR(b.num("y1"), a.y + a.h * 0.6, 0.02);  // lo = 40
  EXPECT_NEAR(b.num("y2"), a.y + a.h * 0.3, 0.02);  // hi = 70
  EXPECT_NEAR(std::fabs(b.num("y1") - b.num("y2")), 0.3 * a.h, 0.03);
  EXPECT_EQ(r.with_class("errorcap").size(), 4u);
  // As a band instead: one polygon through hi then lo, no error bars.
  p.series[0].band = true;
  const Reader rb(render(one_line(p)));
  EXPECT_EQ(rb.with_class("errorbar").size(), 0u);
  ASSERT_EQ(rb.with_class("band").size(), 1u);
}

TEST(ReportSvg, MissingValuesBreakTheLine) {
  LinePlot p = fixed_axes(false, 0, 10, false, 0, 10);
  Series s;
  s.points = {{1, 1}, {2, 2}, {3, NAN}, {4, 4}, {5, 5}, {6, 6}};
  p.series = {s};
  const Reader r(render(one_line(p)));
  EXPECT_EQ(r.with_class("series").size(), 2u);
  EXPECT_EQ(r.with_class("point").size(), 5u);
}

TEST(ReportSvg, OutOfRangePointsAreClipped) {
  LinePlot p = fixed_axes(false, 0, 10, false, 0, 10);
  p.series = {series({{1, 1}, {5, 50}})};
  const std::string doc = render(one_line(p));
  const Reader r(doc);
  // Every point is inside a group clipped to the plot area.
  bool clipped = false;
  for (const auto& e : r.elements()) clipped |= e.name == "g" && e.attr.count("clip-path");
  EXPECT_TRUE(clipped);
  EXPECT_NE(doc.find("<clipPath"), std::string::npos);
}

TEST(ReportSvg, BarsGroupedStackedAndWithErrors) {
  BarChart c;
  c.y = Axis{"ms", false, 0, 100};
  c.groups = {"B=8", "B=32"};
  c.segments = {"fwd", "bwd", "opt"};
  c.series = {bars_of("adamw", {{10, 20, 20}, {25, 25, 0}}, {40, NAN}, {60, NAN}), bars_of("velo", {{10, 20, 30}, {}})};
  Figure f;
  Panel panel;
  panel.bars = true;
  panel.bar = c;
  f.panels = {panel};
  const Reader r(render(f));
  const Area a = plot_area(r);
  auto bar = [&](int g, int s, int k) -> const Element* {
    for (const Element* e : r.with_class("bar"))
      if (e->attr.at("data-group") == std::to_string(g) && e->attr.at("data-series") == std::to_string(s) &&
          e->attr.at("data-segment") == std::to_string(k))
        return e;
    return nullptr;
  };
  const Element* fwd = bar(0, 0, 0);
  const Element* bwd = bar(0, 0, 1);
  const Element* opt = bar(0, 0, 2);
  ASSERT_TRUE(fwd && bwd && opt);
  // fwd from 0 to 10, bwd from 10 to 30, opt from 30 to 50 of 100.
  EXPECT_NEAR(fwd->num("y") + fwd->num("height"), a.y + a.h, 0.02);
  EXPECT_NEAR(fwd->num("height"), 0.1 * a.h, 0.02);
  EXPECT_NEAR(bwd->num("y") + bwd->num("height"), fwd->num("y"), 0.02);
  EXPECT_NEAR(bwd->num("height"), 0.2 * a.h, 0.02);
  EXPECT_NEAR(opt->num("y"), a.y + 0.5 * a.h, 0.02);
  // Group 0's bars lie in the left half, group 1's in the right; the series side by side.
  EXPECT_LT(fwd->num("x") + fwd->num("width"), a.x + a.w / 2);
  const Element* velo = bar(0, 1, 0);
  ASSERT_NE(velo, nullptr);
  EXPECT_GT(velo->num("x"), fwd->num("x") + fwd->num("width") - 0.01);
  const Element* g1 = bar(1, 0, 0);
  ASSERT_NE(g1, nullptr);
  EXPECT_GT(g1->num("x"), a.x + a.w / 2);
  EXPECT_EQ(bar(1, 1, 0), nullptr) << "an empty entry is no bar";
  // The error bar of group 0, series 0: from 40 to 60.
  const auto eb = r.with_class("errorbar");
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_NEAR(eb[0]->num("y1"), a.y + 0.6 * a.h, 0.02);
  EXPECT_NEAR(eb[0]->num("y2"), a.y + 0.4 * a.h, 0.02);
  EXPECT_GT(eb[0]->num("x1"), fwd->num("x"));
  EXPECT_LT(eb[0]->num("x1"), fwd->num("x") + fwd->num("width"));
  // Group labels under the groups.
  const auto labels = r.with_class("group-label");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[1]->text, "B=32");
  EXPECT_NEAR(labels[1]->num("x"), a.x + 0.75 * a.w, 0.02);
}

TEST(ReportSvg, LogBarsStartAtTheAxisBottom) {
  BarChart c;
  c.y = Axis{"ms", true, 1, 1000};
  c.groups = {"8192 x 8192"};
  c.series = {bars_of("ours", {{10}}), bars_of("pylo", {{1000}})};
  Figure f;
  Panel panel;
  panel.bars = true;
  panel.bar = c;
  f.panels = {panel};
  const Reader r(render(f));
  const Area a = plot_area(r);
  const auto bars = r.with_class("bar");
  ASSERT_EQ(bars.size(), 2u);
  EXPECT_NEAR(bars[0]->num("y"), a.y + a.h * 2 / 3, 0.02);  // 10 on 1..1000: a third of the way up
  EXPECT_NEAR(bars[0]->num("y") + bars[0]->num("height"), a.y + a.h, 0.02);
  EXPECT_NEAR(bars[1]->num("y"), a.y, 0.02);
}

TEST(ReportSvg, LongLabelsAndCaptionsWrap) {
  BarChart c;
  c.groups = {"GPT-2 124M small_fc_lopt (fast)", "GPT-2 124M VeLO", "ViT-B/16 small_fc_lopt (fast)"};
  c.series = {bars_of("ours", {{1}, {2}, {3}})};
  Figure f;
  f.panel_width = 420;
  Panel panel;
  panel.bars = true;
  panel.bar = c;
  f.panels = {panel};
  f.caption = std::string(300, 'x') + " and more words after a very long one";
  const Reader r(render(f));
  int tspans = 0;
  for (const auto& e : r.elements()) {
    if (e.name != "tspan") continue;
    tspans++;
    EXPECT_LE(e.text.size() * 6.4, 0.95 * 420 / 3 + 30) << e.text;  // each line fits (about) its group
  }
  EXPECT_GE(tspans, 4) << "the long labels are broken into lines";
  EXPECT_GE(r.with_class("caption").size(), 2u) << "the caption too";
}

TEST(ReportSvg, ScaleAndColours) {
  Scale s{1, 100, 0, 200, true};
  EXPECT_NEAR(s(10), 100, 1e-9);
  EXPECT_TRUE(std::isnan(s(0)));
  Scale l{0, 10, 100, 0, false};
  EXPECT_NEAR(l(2.5), 75, 1e-9);
  EXPECT_EQ(tint("#000000", 0.5), "#808080");
  EXPECT_EQ(tint("#102030", 0), "#102030");
  EXPECT_NE(palette(0), palette(1));
  EXPECT_EQ(palette(0), palette(10));
  EXPECT_EQ(escape("a<b&\"c\"'"), "a&lt;b&amp;&quot;c&quot;&apos;");
}

}  // namespace
