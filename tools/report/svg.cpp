#include "tools/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "common/error.h"
#include "tools/report/markdown.h"

namespace report::svg {
namespace {

const double kCharW = 6.4;  // average width of a character at the 11-12 px font sizes used (layout estimate)

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// The plot area of a panel and its two scales.
struct Frame {
  double x0, x1, y0, y1;  // left, right, top, bottom in pixels
  Scale sx, sy;
};

struct Out {
  std::string s;
  int clip_id = 0;
  void add(const std::string& t) { s += t + "\n"; }
};

std::string text(double x, double y, const std::string& body, const std::string& cls, const std::string& extra = "") {
  return "<text class=\"" + cls + "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + extra + ">" + escape(body) +
         "</text>";
}

// `s` in lines of at most `chars` characters, broken at spaces (a longer word stays whole).
std::vector<std::string> wrap(const std::string& s, size_t chars) {
  std::vector<std::string> lines;
  std::string cur;
  size_t i = 0;
  while (i < s.size()) {
    const size_t sp = s.find(' ', i);
    const std::string word = s.substr(i, sp == std::string::npos ? std::string::npos : sp - i);
    if (!cur.empty() && cur.size() + 1 + word.size() > chars) {
      lines.push_back(cur);
      cur.clear();
    }
    cur += (cur.empty() ? "" : " ") + word;
    if (sp == std::string::npos) break;
    i = sp + 1;
  }
  if (!cur.empty() || lines.empty()) lines.push_back(cur);
  return lines;
}

// Text in several lines (one <tspan> each, 13 px apart) where it is wider than `width` pixels.
std::string text_block(double x, double y, const std::string& body, double width, const std::string& cls,
                       const std::string& extra) {
  const std::vector<std::string> lines = wrap(body, size_t(std::max(4.0, width / kCharW)));
  if (lines.size() == 1) return text(x, y, body, cls, extra);
  std::string o = "<text class=\"" + cls + "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + extra + ">";
  for (size_t i = 0; i < lines.size(); i++)
    o += "<tspan x=\"" + num(x) + "\" dy=\"" + (i ? "13" : "0") + "\">" + escape(lines[i]) + "</tspan>";
  return o + "</text>";
}

std::string line_el(double x1, double y1, double x2, double y2, const std::string& cls, const std::string& style) {
  return "<line class=\"" + cls + "\" x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\" " + style + "/>";
}

// Axes: the frame, grid lines, ticks and their labels, the axis labels. `xticks` false for bar charts
// (their groups label the x axis).
void draw_axes(Out& o, const Frame& f, const Axis& ax, const Axis& ay, bool xticks) {
  o.add("<rect class=\"plot-area\" x=\"" + num(f.x0) + "\" y=\"" + num(f.y0) + "\" width=\"" + num(f.x1 - f.x0) +
        "\" height=\"" + num(f.y1 - f.y0) + "\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>");
  auto axis_ticks = [&](const Scale& s, bool is_x) {
    const double lo = std::min(s.d0, s.d1), hi = std::max(s.d0, s.d1);
    const std::vector<double> t = ticks(lo, hi, s.log);
    const double step = t.size() > 1 ? t[1] - t[0] : 1;
    for (double v : t) {
      const double p = s(v);
      const std::string value = " data-value=\"" + escape(significant(v, 6)) + "\"";
      const std::string label = tick_label(v, step, s.log);
      if (is_x) {
        o.add(line_el(p, f.y0, p, f.y1, "grid x", "stroke=\"#e4e4e4\" stroke-width=\"1\""));
        o.add("<line class=\"tick x\"" + value + " x1=\"" + num(p) + "\" y1=\"" + num(f.y1) + "\" x2=\"" + num(p) +
              "\" y2=\"" + num(f.y1 + 5) + "\" stroke=\"#444\"/>");
        o.add(text(p, f.y1 + 18, label, "tick-label x", " text-anchor=\"middle\""));
      } else {
        o.add(line_el(f.x0, p, f.x1, p, "grid y", "stroke=\"#e4e4e4\" stroke-width=\"1\""));
        o.add("<line class=\"tick y\"" + value + " x1=\"" + num(f.x0 - 5) + "\" y1=\"" + num(p) + "\" x2=\"" +
              num(f.x0) + "\" y2=\"" + num(p) + "\" stroke=\"#444\"/>");
        o.add(text(f.x0 - 8, p + 4, label, "tick-label y", " text-anchor=\"end\""));
      }
    }
  };
  if (xticks) axis_ticks(f.sx, true);
  axis_ticks(f.sy, false);
  if (!ax.label.empty())
    o.add(text(0.5 * (f.x0 + f.x1), f.y1 + (xticks ? 38 : 44), ax.label + (ax.log ? " (log scale)" : ""),
               "axis-label x", " text-anchor=\"middle\""));
  if (!ay.label.empty()) {
    const double cx = f.x0 - 56, cy = 0.5 * (f.y0 + f.y1);
    o.add(text(cx, cy, ay.label + (ay.log ? " (log scale)" : ""), "axis-label y",
               " text-anchor=\"middle\" transform=\"rotate(-90 " + num(cx) + " " + num(cy) + ")\""));
  }
}

std::string open_clip(Out& o, const Frame& f) {
  const std::string id = "clip" + std::to_string(++o.clip_id);
  o.add("<clipPath id=\"" + id + "\"><rect x=\"" + num(f.x0) + "\" y=\"" + num(f.y0) + "\" width=\"" +
        num(f.x1 - f.x0) + "\" height=\"" + num(f.y1 - f.y0) + "\"/></clipPath>");
  return id;
}

// A marker at (x, y); `data` holds its attributes beyond position and colour (the class first).
std::string marker_el(Marker m, double x, double y, const std::string& color, const std::string& data) {
  switch (m) {
    case Marker::Circle:
      return "<circle " + data + " cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"3.2\" fill=\"" +
             color + "\"/>";
    case Marker::Square:
      return "<rect " + data + " x=\"" + num(x - 3) + "\" y=\"" + num(y - 3) +
             "\" width=\"6\" height=\"6\" fill=\"" + color + "\"/>";
    case Marker::Cross:
      return "<path " + data + " d=\"M" + num(x - 4) + " " + num(y - 4) + " L" + num(x + 4) + " " +
             num(y + 4) + " M" + num(x - 4) + " " + num(y + 4) + " L" + num(x + 4) + " " + num(y - 4) +
             "\" stroke=\"" + color + "\" stroke-width=\"2\" fill=\"none\"/>";
    case Marker::None:
      break;
  }
  return "";
}

// A legend entry per item at the right of the plot area; `swatch` draws the sample.
struct LegendItem {
  std::string name, color;
  bool line = true, box = false, dashed = false;
  Marker marker = Marker::None;
  double width = 2;
};
double legend_width(const std::vector<LegendItem>& items, double panel_w) {
  size_t longest = 0;
  for (const auto& it : items) longest = std::max(longest, it.name.size());
  if (items.empty()) return 16;
  return std::min(0.42 * panel_w, 40 + kCharW * double(longest));
}
void draw_legend(Out& o, const std::vector<LegendItem>& items, double x, double y, double width, bool boxed = false) {
  if (items.empty()) return;
  o.add("<g class=\"legend\">");
  if (boxed)
    o.add("<rect x=\"" + num(x - 6) + "\" y=\"" + num(y - 14) + "\" width=\"" + num(width) + "\" height=\"" +
          num(16.0 * double(items.size()) + 6) + "\" fill=\"#ffffff\" fill-opacity=\"0.88\" stroke=\"#bbb\"/>");
  const size_t max_chars = size_t(std::max(4.0, (width - 36) / kCharW));
  for (size_t i = 0; i < items.size(); i++) {
    const LegendItem& it = items[i];
    const double yy = y + 16.0 * double(i);
    if (it.box) {
      o.add("<rect x=\"" + num(x + 2) + "\" y=\"" + num(yy - 9) + "\" width=\"16\" height=\"10\" fill=\"" + it.color +
            "\"/>");
    } else {
      if (it.line)
        o.add(line_el(x, yy - 4, x + 20, yy - 4, "legend-line",
                      "stroke=\"" + it.color + "\" stroke-width=\"" + num(std::min(it.width, 3.5)) + "\"" +
                          (it.dashed ? std::string(" stroke-dasharray=\"5 3\"") : "")));
      if (it.marker != Marker::None) {
        o.add(marker_el(it.marker, x + 10, yy - 4, it.color, "class=\"legend-marker\""));
      }
    }
    std::string name = it.name;
    if (name.size() > max_chars) name = name.substr(0, max_chars - 1) + "…";
    o.add(text(x + 26, yy, name, "legend-label", " font-size=\"11\""));
  }
  o.add("</g>");
}

void render_line(Out& o, const LinePlot& p, double ox, double oy, double w, double h) {
  std::vector<LegendItem> items;
  for (size_t i = 0; i < p.series.size(); i++) {
    const Series& s = p.series[i];
    if (!s.legend) continue;
    items.push_back({s.name, s.color.empty() ? palette(i) : s.color, s.line, false, s.dashed, s.marker, s.width});
  }
  const double lw = legend_width(items, w);
  Frame f{ox + 72, ox + w - (p.legend_inside ? 0 : lw) - 14, oy + (p.title.empty() ? 14 : 34), oy + h - 50, {}, {}};
  std::vector<double> xs, ys;
  for (const auto& s : p.series)
    for (const auto& pt : s.points) {
      if (!usable(pt.y, p.y.log) || !usable(pt.x, p.x.log)) continue;
      xs.push_back(pt.x);
      ys.push_back(pt.y);
      if (usable(pt.lo, p.y.log)) ys.push_back(pt.lo);
      if (usable(pt.hi, p.y.log)) ys.push_back(pt.hi);
    }
  double xlo, xhi, ylo, yhi;
  auto_range(p.x, xs, &xlo, &xhi);
  auto_range(p.y, ys, &ylo, &yhi);
  f.sx = Scale{xlo, xhi, f.x0, f.x1, p.x.log};
  f.sy = Scale{ylo, yhi, f.y1, f.y0, p.y.log};
  if (!p.title.empty()) o.add(text(0.5 * (f.x0 + f.x1), oy + 20, p.title, "panel-title", " text-anchor=\"middle\" font-weight=\"bold\""));
  draw_axes(o, f, p.x, p.y, true);
  const std::string clip = open_clip(o, f);
  o.add("<g clip-path=\"url(#" + clip + ")\">");
  for (size_t i = 0; i < p.series.size(); i++) {
    const Series& s = p.series[i];
    const std::string color = s.color.empty() ? palette(i) : s.color;
    const std::string sid = " data-series=\"" + std::to_string(i) + "\"";
    // Runs of consecutive drawable points: a missing value breaks the line (and the band).
    std::vector<std::vector<const Point*>> runs(1);
    for (const auto& pt : s.points) {
      if (usable(pt.x, p.x.log) && usable(pt.y, p.y.log)) {
        runs.back().push_back(&pt);
      } else if (!runs.back().empty()) {
        runs.emplace_back();
      }
    }
    if (s.band)
      for (const auto& run : runs) {
        std::string pts;
        std::vector<const Point*> edge;
        for (const Point* pt : run)
          if (usable(pt->lo, p.y.log) && usable(pt->hi, p.y.log)) edge.push_back(pt);
        if (edge.size() < 2) continue;
        for (const Point* pt : edge) pts += num(f.sx(pt->x)) + "," + num(f.sy(pt->hi)) + " ";
        for (auto it = edge.rbegin(); it != edge.rend(); ++it) pts += num(f.sx((*it)->x)) + "," + num(f.sy((*it)->lo)) + " ";
        o.add("<polygon class=\"band\"" + sid + " points=\"" + pts + "\" fill=\"" + color +
              "\" fill-opacity=\"0.16\" stroke=\"none\"/>");
      }
    if (s.line)
      for (const auto& run : runs) {
        if (run.size() < 2) continue;
        std::string pts;
        for (const Point* pt : run) pts += num(f.sx(pt->x)) + "," + num(f.sy(pt->y)) + " ";
        o.add("<polyline class=\"series\"" + sid + " points=\"" + pts + "\" fill=\"none\" stroke=\"" + color +
              "\" stroke-width=\"" + num(s.width) + "\" stroke-linejoin=\"round\"" +
              (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>");
      }
    for (const auto& run : runs)
      for (const Point* pt : run) {
        const double x = f.sx(pt->x);
        if (!s.band && usable(pt->lo, p.y.log) && usable(pt->hi, p.y.log)) {
          const double a = f.sy(pt->lo), b = f.sy(pt->hi);
          o.add(line_el(x, a, x, b, "errorbar", "data-series=\"" + std::to_string(i) + "\" stroke=\"" + color +
                                                    "\" stroke-width=\"1.3\""));
          o.add(line_el(x - 4, a, x + 4, a, "errorcap", "stroke=\"" + color + "\" stroke-width=\"1.3\""));
          o.add(line_el(x - 4, b, x + 4, b, "errorcap", "stroke=\"" + color + "\" stroke-width=\"1.3\""));
        }
        if (s.marker != Marker::None)
          o.add(marker_el(s.marker, x, f.sy(pt->y), color,
                          "class=\"point\" data-series=\"" + std::to_string(i) + "\" data-x=\"" +
                              escape(significant(pt->x, 6)) + "\" data-y=\"" + escape(significant(pt->y, 6)) + "\""));
      }
  }
  o.add("</g>");
  if (p.legend_inside) {
    draw_legend(o, items, f.x1 - lw - 2, f.y0 + 20, lw, true);
  } else {
    draw_legend(o, items, f.x1 + 14, f.y0 + 10, lw);
  }
}

void render_bars(Out& o, const BarChart& c, double ox, double oy, double w, double h) {
  std::vector<LegendItem> items;
  for (size_t i = 0; i < c.series.size(); i++)
    items.push_back({c.series[i].name, c.series[i].color.empty() ? palette(i) : c.series[i].color, false, true});
  const size_t nseg = std::max<size_t>(1, c.segments.size());
  if (nseg > 1)
    for (size_t k = 0; k < nseg; k++) items.push_back({c.segments[k], tint("#505050", 0.75 * double(k) / double(nseg)), false, true});
  const double lw = legend_width(items, w);
  Frame f{ox + 72, ox + w - lw - 14, oy + (c.title.empty() ? 14 : 34), oy + h - 56, {}, {}};
  std::vector<double> ys;
  for (const auto& s : c.series)
    for (size_t g = 0; g < s.values.size(); g++) {
      double total = 0;
      bool any = false;
      for (double v : s.values[g])
        if (std::isfinite(v)) total += v, any = true;
      if (!any) continue;
      ys.push_back(total);
      if (!c.y.log) ys.push_back(0);
      if (g < s.lo.size() && usable(s.lo[g], c.y.log)) ys.push_back(s.lo[g]);
      if (g < s.hi.size() && usable(s.hi[g], c.y.log)) ys.push_back(s.hi[g]);
    }
  for (const auto& s : c.series)  // stacked parts on a log axis: the smallest visible bottom
    for (const auto& g : s.values)
      for (double v : g)
        if (c.y.log && usable(v, true)) ys.push_back(v);
  Axis ay = c.y;
  ay.zero = !c.y.log;
  double ylo, yhi;
  auto_range(ay, ys, &ylo, &yhi);
  f.sx = Scale{0, double(std::max<size_t>(1, c.groups.size())), f.x0, f.x1, false};
  f.sy = Scale{ylo, yhi, f.y1, f.y0, c.y.log};
  if (!c.title.empty()) o.add(text(0.5 * (f.x0 + f.x1), oy + 20, c.title, "panel-title", " text-anchor=\"middle\" font-weight=\"bold\""));
  draw_axes(o, f, Axis{}, c.y, false);
  const double gw = (f.x1 - f.x0) / double(std::max<size_t>(1, c.groups.size()));
  for (size_t g = 0; g < c.groups.size(); g++)
    o.add(text_block(f.x0 + gw * (double(g) + 0.5), f.y1 + 18, c.groups[g], 0.95 * gw, "group-label",
                     " text-anchor=\"middle\""));
  const std::string clip = open_clip(o, f);
  o.add("<g clip-path=\"url(#" + clip + ")\">");
  const double bw = gw * 0.76 / double(std::max<size_t>(1, c.series.size()));
  for (size_t i = 0; i < c.series.size(); i++) {
    const BarSeries& s = c.series[i];
    const std::string color = s.color.empty() ? palette(i) : s.color;
    for (size_t g = 0; g < s.values.size() && g < c.groups.size(); g++) {
      const double x = f.x0 + gw * double(g) + gw * 0.12 + bw * double(i);
      double cum = 0;
      bool any = false;
      for (size_t k = 0; k < s.values[g].size(); k++) {
        const double v = s.values[g][k];
        if (!std::isfinite(v)) continue;
        const double bottom = cum == 0 ? (c.y.log ? ylo : 0.0) : cum;
        const double top = cum + v;
        cum = top;
        any = true;
        const double pb = f.sy(bottom), pt = f.sy(top);
        const std::string fill = s.values[g].size() > 1 ? tint(color, 0.75 * double(k) / double(nseg)) : color;
        o.add("<rect class=\"bar\" data-group=\"" + std::to_string(g) + "\" data-series=\"" + std::to_string(i) +
              "\" data-segment=\"" + std::to_string(k) + "\" data-value=\"" + escape(significant(v, 6)) + "\" x=\"" +
              num(x) + "\" y=\"" + num(std::min(pb, pt)) + "\" width=\"" + num(bw * 0.92) + "\" height=\"" +
              num(std::fabs(pb - pt)) + "\" fill=\"" + fill + "\" stroke=\"#fff\" stroke-width=\"0.5\"/>");
      }
      if (any && g < s.lo.size() && g < s.hi.size() && usable(s.lo[g], c.y.log) && usable(s.hi[g], c.y.log)) {
        const double cx = x + 0.46 * bw, a = f.sy(s.lo[g]), b = f.sy(s.hi[g]);
        o.add(line_el(cx, a, cx, b, "errorbar", "data-series=\"" + std::to_string(i) + "\" stroke=\"#222\" stroke-width=\"1.3\""));
        o.add(line_el(cx - 4, a, cx + 4, a, "errorcap", "stroke=\"#222\" stroke-width=\"1.3\""));
        o.add(line_el(cx - 4, b, cx + 4, b, "errorcap", "stroke=\"#222\" stroke-width=\"1.3\""));
      }
    }
  }
  o.add("</g>");
  draw_legend(o, items, f.x1 + 14, f.y0 + 10, lw);
}

}  // namespace

double Scale::operator()(double v) const {
  double t;
  if (log) {
    if (!(v > 0) || !(d0 > 0) || !(d1 > 0)) return kNaN;
    const double a = std::log10(d0), b = std::log10(d1);
    t = b == a ? 0.5 : (std::log10(v) - a) / (b - a);
  } else {
    t = d1 == d0 ? 0.5 : (v - d0) / (d1 - d0);
  }
  return p0 + t * (p1 - p0);
}

void auto_range(const Axis& axis, const std::vector<double>& vals, double* lo, double* hi) {
  std::vector<double> v;
  for (double x : vals)
    if (usable(x, axis.log)) v.push_back(x);
  if (axis.zero && !axis.log) v.push_back(0);
  const bool fixed_lo = usable(axis.lo, axis.log), fixed_hi = usable(axis.hi, axis.log);
  double a = v.empty() ? (axis.log ? 1 : 0) : *std::min_element(v.begin(), v.end());
  double b = v.empty() ? (axis.log ? 10 : 1) : *std::max_element(v.begin(), v.end());
  if (fixed_lo) a = axis.lo;
  if (fixed_hi) b = axis.hi;
  if (axis.log) {
    if (!fixed_lo) a = std::pow(10.0, std::floor(std::log10(a) + 1e-9));
    if (!fixed_hi) b = std::pow(10.0, std::ceil(std::log10(b) - 1e-9));
    if (!(b > a)) b = a * 10;
  } else {
    if (!(b > a)) {
      const double d = a == 0 ? 1 : 0.1 * std::fabs(a);
      if (!fixed_lo) a -= d;
      if (!fixed_hi || !(b > a)) b = a + 2 * d;
    }
    const double step = nice_step((b - a) / 5);
    if (!fixed_lo) a = std::floor(a / step + 1e-9) * step;
    if (!fixed_hi) b = std::ceil(b / step - 1e-9) * step;
  }
  *lo = a;
  *hi = b;
}

std::vector<double> ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (!(hi > lo)) return t;
  if (log) {
    if (!(lo > 0)) return t;
    const int k0 = int(std::floor(std::log10(lo) + 1e-9)), k1 = int(std::ceil(std::log10(hi) - 1e-9));
    const bool fine = k1 - k0 <= 2;
    for (int k = k0; k <= k1; k++)
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1 && !fine) continue;
        const double v = m * std::pow(10.0, k);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
      }
    if (t.size() < 2) {  // less than a decade between lo and hi: linear steps inside it
      t = ticks(lo, hi, false);
    }
    return t;
  }
  const double step = nice_step((hi - lo) / 5);
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step)
    t.push_back(std::fabs(v) < 1e-12 * step ? 0.0 : v);
  return t;
}

std::string tick_label(double v, double step, bool log) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (log) {
    char b[32];
    if (a >= 1e6) {
      std::snprintf(b, sizeof b, "%gM", v / 1e6);
      return b;
    }
    if (a >= 1e4) {
      std::snprintf(b, sizeof b, "%gk", v / 1e3);
      return b;
    }
    if (a >= 1e-4) {
      std::snprintf(b, sizeof b, "%g", v);
      return a >= 1000 ? thousands(v) : b;
    }
    std::snprintf(b, sizeof b, "%g", v);
    return b;
  }
  const int decimals = std::max(0, int(-std::floor(std::log10(std::fabs(step)) + 1e-9)));
  if (decimals == 0 && a >= 1000) return thousands(v);
  return fixed(v, decimals);
}

std::string palette(size_t i) {
  static const char* const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                       "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  return colors[i % 10];
}

std::string tint(const std::string& color, double t) {
  if (color.size() != 7 || color[0] != '#') return color;
  std::string o = "#";
  for (int c = 0; c < 3; c++) {
    const int v = std::stoi(color.substr(1 + 2 * c, 2), nullptr, 16);
    const int m = int(std::lround(v + (255 - v) * std::clamp(t, 0.0, 1.0)));
    char b[3];
    std::snprintf(b, sizeof b, "%02x", m);
    o += b;
  }
  return o;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string render(const Figure& f) {
  const size_t n = std::max<size_t>(1, f.panels.size());
  const double W = f.panel_width * double(n);
  const std::vector<std::string> caption = f.caption.empty() ? std::vector<std::string>{} : wrap(f.caption, size_t((W - 20) / 6.0));
  const double top = f.title.empty() ? 0 : 30, bottom = caption.empty() ? 0 : 8 + 14.0 * double(caption.size());
  const double H = f.panel_height + top + bottom;
  Out o;
  o.add("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
  o.add("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(W) + "\" height=\"" + num(H) +
        "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">");
  o.add("<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" fill=\"#ffffff\"/>");
  if (!f.title.empty()) o.add(text(W / 2, 21, f.title, "figure-title", " text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\""));
  for (size_t i = 0; i < f.panels.size(); i++) {
    o.add("<g class=\"panel\" data-panel=\"" + std::to_string(i) + "\">");
    const double ox = f.panel_width * double(i);
    if (f.panels[i].bars) {
      render_bars(o, f.panels[i].bar, ox, top, f.panel_width, f.panel_height);
    } else {
      render_line(o, f.panels[i].line, ox, top, f.panel_width, f.panel_height);
    }
    o.add("</g>");
  }
  for (size_t i = 0; i < caption.size(); i++)
    o.add(text(10, f.panel_height + top + 16 + 14.0 * double(i), caption[i], "caption", " font-size=\"11\" fill=\"#555\""));
  o.add("</svg>");
  return o.s;
}

void write(const Figure& f, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) user_error("cannot write '", path, "' (does its folder exist?).");
  out << render(f);
  if (!out) user_error("writing '", path, "' failed (disk full?).");
}

}  // namespace report::svg
