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
      return "<circle " + data + " cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"3.2\" fill=\"" + color + "\"/>";
    case Marker::Square:
      return "<rect " + data + " x=\"" + num(x - 3) + "\" y=\"" + num(y - 3) + "\" width=\"6\" height=\"6\" fill=\"" +
             color + "\"/>";
    case Marker::Cross:
      return "<path " + data + " d=\"M" + num(x - 4) + " " + num(y - 4) + " L" + num(x + 4) + " " + num(y + 4) + " M" +
             num(x - 4) + " " + num(y + 4) + " L" + num(x + 4) + " " + num(y - 4) + "\" stroke=\"" + color +
             "\" stroke-width=\"2\" fill=\"none\"/>";
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

std::vector<LegendItem> line_legend(const LinePlot& p) {
  std::vector<LegendItem> items;
  for (size_t i = 0; i < p.series.size(); i++) {
    const Series& s = p.series[i];
    if (!s.legend) continue;
    items.push_back({s.name, s.color.empty() ? palette(i) : s.color, s.line, false, s.dashed, s.marker, s.width});
  }
  return items;
}

// The plot area beside a legend `lw` wide (or with it inside), its ranges from every drawable value.
Frame line_frame(const LinePlot& p, double ox, double oy, double w, double h, double lw) {
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
  return f;
}

// Runs of consecutive drawable points: a missing value breaks the line (and the band).
std::vector<std::vector<const Point*>> drawable_runs(const Series& s, const LinePlot& p) {
  std::vector<std::vector<const Point*>> runs(1);
  for (const auto& pt : s.points) {
    if (usable(pt.x, p.x.log) && usable(pt.y, p.y.log)) {
      runs.back().push_back(&pt);
    } else if (!runs.back().empty()) {
      runs.emplace_back();
    }
  }
  return runs;
}

// The band of one run: its points' hi edge forward, lo edge back.
void draw_band(Out& o, const Frame& f, const LinePlot& p, const std::vector<const Point*>& run, const std::string& sid,
               const std::string& color) {
  std::string pts;
  std::vector<const Point*> edge;
  for (const Point* pt : run)
    if (usable(pt->lo, p.y.log) && usable(pt->hi, p.y.log)) edge.push_back(pt);
  if (edge.size() < 2) return;
  for (const Point* pt : edge) pts += num(f.sx(pt->x)) + "," + num(f.sy(pt->hi)) + " ";
  for (auto it = edge.rbegin(); it != edge.rend(); ++it) pts += num(f.sx((*it)->x)) + "," + num(f.sy((*it)->lo)) + " ";
  o.add("<polygon class=\"band\"" + sid + " points=\"" + pts + "\" fill=\"" + color +
        "\" fill-opacity=\"0.16\" stroke=\"none\"/>");
}

void draw_polyline(Out& o, const Frame& f, const Series& s, const std::vector<const Point*>& run,
                   const std::string& sid, const std::string& color) {
  if (run.size() < 2) return;
  std::string pts;
  for (const Point* pt : run) pts += num(f.sx(pt->x)) + "," + num(f.sy(pt->y)) + " ";
  o.add("<polyline class=\"series\"" + sid + " points=\"" + pts + "\" fill=\"none\" stroke=\"" + color +
        "\" stroke-width=\"" + num(s.width) + "\" stroke-linejoin=\"round\"" +
        (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>");
}

// A point's error bar (where the series has no band) and its marker.
void draw_point(Out& o, const Frame& f, const LinePlot& p, const Series& s, size_t i, const Point* pt,
                const std::string& color) {
  const double x = f.sx(pt->x);
  if (!s.band && usable(pt->lo, p.y.log) && usable(pt->hi, p.y.log)) {
    const double a = f.sy(pt->lo), b = f.sy(pt->hi);
    o.add(line_el(x, a, x, b, "errorbar",
                  "data-series=\"" + std::to_string(i) + "\" stroke=\"" + color + "\" stroke-width=\"1.3\""));
    o.add(line_el(x - 4, a, x + 4, a, "errorcap", "stroke=\"" + color + "\" stroke-width=\"1.3\""));
    o.add(line_el(x - 4, b, x + 4, b, "errorcap", "stroke=\"" + color + "\" stroke-width=\"1.3\""));
  }
  if (s.marker != Marker::None)
    o.add(marker_el(s.marker, x, f.sy(pt->y), color,
                    "class=\"point\" data-series=\"" + std::to_string(i) + "\" data-x=\"" +
                        escape(significant(pt->x, 6)) + "\" data-y=\"" + escape(significant(pt->y, 6)) + "\""));
}

// Series i: its bands under its lines under its points.
void draw_series(Out& o, const Frame& f, const LinePlot& p, size_t i) {
  const Series& s = p.series[i];
  const std::string color = s.color.empty() ? palette(i) : s.color;
  const std::string sid = " data-series=\"" + std::to_string(i) + "\"";
  const std::vector<std::vector<const Point*>> runs = drawable_runs(s, p);
  if (s.band)
    for (const auto& run : runs) draw_band(o, f, p, run, sid, color);
  if (s.line)
    for (const auto& run : runs) draw_polyline(o, f, s, run, sid, color);
  for (const auto& run : runs)
    for (const Point* pt : run) draw_point(o, f, p, s, i, pt, color);
}

void render_line(Out& o, const LinePlot& p, double ox, double oy, double w, double h) {
  const std::vector<LegendItem> items = line_legend(p);
  const double lw = legend_width(items, w);
  const Frame f = line_frame(p, ox, oy, w, h, lw);
  if (!p.title.empty())
    o.add(text(0.5 * (f.x0 + f.x1), oy + 20, p.title, "panel-title", " text-anchor=\"middle\" font-weight=\"bold\""));
  draw_axes(o, f, p.x, p.y, true);
  const std::string clip = open_clip(o, f);
  o.add("<g clip-path=\"url(#" + clip + ")\">");
  for (size_t i = 0; i < p.series.size(); i++) draw_series(o, f, p, i);
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
    for (size_t k = 0; k < nseg; k++)
      items.push_back({c.segments[k], tint("#505050", 0.75 * double(k) / double(nseg)), false, true});
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
  if (!c.title.empty())
    o.add(text(0.5 * (f.x0 + f.x1), oy + 20, c.title, "panel-title", " text-anchor=\"middle\" font-weight=\"bold\""));
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
        o.add(line_el(cx, a, cx, b, "errorbar",
                      "data-series=\"" + std::to_string(i) + "\" stroke=\"#222\" stroke-width=\"1.3\""));
        o.add(line_el(cx - 4, a, cx + 4, a, "errorcap", "stroke=\"#222\" stroke-width=\"1.3\""));
        o.add(line_el(cx - 4, b, cx + 4, b, "errorcap", "stroke=\"#222\" stroke-width=\"1.3\""));
      }
    }
  }
  o.add("</g>");
  draw_legend(o, items, f.x1 + 14, f.y0 + 10, lw);
}

}  // namespace

std::string render(const Figure& f) {
  const size_t n = std::max<size_t>(1, f.panels.size());
  const double W = f.panel_width * double(n);
  const std::vector<std::string> caption =
      f.caption.empty() ? std::vector<std::string>{} : wrap(f.caption, size_t((W - 20) / 6.0));
  const double top = f.title.empty() ? 0 : 30, bottom = caption.empty() ? 0 : 8 + 14.0 * double(caption.size());
  const double H = f.panel_height + top + bottom;
  Out o;
  o.add("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
  o.add("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(W) + "\" height=\"" + num(H) +
        "\" viewBox=\"0 0 " + num(W) + " " + num(H) +
        "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">");
  o.add("<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + num(W) + "\" height=\"" + num(H) +
        "\" fill=\"#ffffff\"/>");
  if (!f.title.empty())
    o.add(text(W / 2, 21, f.title, "figure-title", " text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\""));
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
    o.add(text(10, f.panel_height + top + 16 + 14.0 * double(i), caption[i], "caption",
               " font-size=\"11\" fill=\"#555\""));
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
