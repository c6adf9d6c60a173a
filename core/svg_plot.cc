#include "core/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/labels.h"

namespace ringmaster {
namespace {

constexpr double kWidth = 780, kHeight = 400;
constexpr double kLeft = 72, kRight = 210, kTop = 34, kBottom = 52;
constexpr double kPlotW = kWidth - kLeft - kRight;
constexpr double kPlotH = kHeight - kTop - kBottom;

// A colour-blind-friendly qualitative palette (Okabe & Ito), then greys.
const char* Colour(size_t i) {
  static const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                   "#E69F00", "#56B4E9", "#F0E442", "#000000",
                                   "#7f7f7f", "#a65628"};
  return kColours[i % (sizeof kColours / sizeof kColours[0])];
}

std::string G(double v) { return PlainNumber(v); }
std::string Px(double v) { return absl::StrFormat("%.1f", v); }

// One axis: maps values to [0, 1] and lists its ticks.
struct Axis {
  bool log = false;
  double base = 10;
  double lo = 0, hi = 1;      // in axis units (log_base(value) when log)
  std::vector<double> ticks;  // values

  double Frac(double v) const {
    double a = log ? std::log(v) / std::log(base) : v;
    return hi > lo ? (a - lo) / (hi - lo) : 0.5;
  }
};

Axis MakeAxis(const std::vector<double>& values, bool log, double base,
              bool from_zero) {
  Axis a;
  a.log = log;
  a.base = base;
  double mn = std::numeric_limits<double>::infinity(), mx = -mn;
  for (double v : values) {
    if (!std::isfinite(v) || (log && v <= 0)) continue;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  if (!std::isfinite(mn)) {
    mn = log ? 1 : 0;
    mx = log ? base : 1;
  }
  if (log) {
    a.lo = std::floor(std::log(mn) / std::log(base) + 1e-9);
    a.hi = std::ceil(std::log(mx) / std::log(base) - 1e-9);
    if (a.hi <= a.lo) a.hi = a.lo + 1;
    const int span = static_cast<int>(a.hi - a.lo);
    const int step = std::max(1, (span + 9) / 10);
    for (int k = static_cast<int>(a.lo); k <= a.hi; k += step)
      a.ticks.push_back(std::pow(base, k));
    return a;
  }
  if (from_zero) mn = std::min(mn, 0.0);
  if (mx <= mn) mx = mn + 1;
  const double raw = (mx - mn) / 6;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  a.lo = std::floor(mn / step) * step;
  a.hi = std::ceil(mx / step) * step;
  if (a.hi <= a.lo) a.hi = a.lo + step;
  for (double t = a.lo; t <= a.hi + step / 2; t += step) a.ticks.push_back(t);
  return a;
}

std::string Open(const std::string& title, const std::string& kind,
                 double height = kHeight) {
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot %s\" "
      "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
      "aria-label=\"%s\">\n<text class=\"title\" x=\"%s\" y=\"20\" "
      "text-anchor=\"middle\">%s</text>\n",
      kind, static_cast<int>(kWidth), static_cast<int>(height),
      static_cast<int>(kWidth), static_cast<int>(height), XmlEscape(title),
      Px(kLeft + kPlotW / 2), XmlEscape(title));
}

std::string Frame(const Axis& x, const Axis& y, const std::string& x_label,
                  const std::string& y_label,
                  const std::function<std::string(double)>& x_format,
                  bool x_ticks = true) {
  std::string s = absl::StrFormat(
      "<rect class=\"frame\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
      "fill=\"none\" stroke=\"#444\"/>\n",
      Px(kLeft), Px(kTop), Px(kPlotW), Px(kPlotH));
  for (double t : y.ticks) {
    const double py = kTop + kPlotH * (1 - y.Frac(t));
    s += absl::StrFormat(
        "<line class=\"grid\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\" "
        "stroke=\"#ddd\"/><text class=\"tick\" x=\"%s\" y=\"%s\" "
        "text-anchor=\"end\">%s</text>\n",
        Px(kLeft), Px(kLeft + kPlotW), Px(py), Px(py), Px(kLeft - 6),
        Px(py + 4), XmlEscape(G(t)));
  }
  if (x_ticks) {
    for (double t : x.ticks) {
      const double px = kLeft + kPlotW * x.Frac(t);
      s += absl::StrFormat(
          "<line class=\"grid\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\" "
          "stroke=\"#eee\"/><text class=\"tick\" x=\"%s\" y=\"%s\" "
          "text-anchor=\"middle\">%s</text>\n",
          Px(px), Px(px), Px(kTop), Px(kTop + kPlotH), Px(px),
          Px(kTop + kPlotH + 16), XmlEscape(x_format ? x_format(t) : G(t)));
    }
  }
  s += absl::StrFormat(
      "<text class=\"axis-label\" x=\"%s\" y=\"%s\" "
      "text-anchor=\"middle\">%s</text>\n",
      Px(kLeft + kPlotW / 2), Px(kHeight - 10), XmlEscape(x_label));
  s += absl::StrFormat(
      "<text class=\"axis-label\" transform=\"translate(16 %s) rotate(-90)\" "
      "text-anchor=\"middle\">%s</text>\n",
      Px(kTop + kPlotH / 2), XmlEscape(y_label));
  return s;
}

std::string LegendItem(size_t slot, const std::string& name, const char* colour,
                       bool dashed, bool box) {
  const double ly = kTop + 8 + 18 * static_cast<double>(slot);
  const double lx = kLeft + kPlotW + 14;
  std::string mark =
      box ? absl::StrFormat(
                "<rect x=\"%s\" y=\"%s\" width=\"18\" height=\"10\" "
                "fill=\"%s\"/>",
                Px(lx), Px(ly - 9), colour)
          : absl::StrFormat(
                "<line x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\" stroke=\"%s\" "
                "stroke-width=\"2\"%s/>",
                Px(lx), Px(lx + 18), Px(ly - 4), Px(ly - 4), colour,
                dashed ? " stroke-dasharray=\"5 3\"" : "");
  // Long names keep both ends: series often differ only at the end
  // ("... overlap" vs "... no overlap").
  std::string label = name.size() > 40 ? name.substr(0, 18) + "…" +
                                             name.substr(name.size() - 21)
                                       : name;
  return absl::StrFormat(
      "<g class=\"legend-item\" data-series=\"%s\">%s<text x=\"%s\" "
      "y=\"%s\">%s<title>%s</title></text></g>\n",
      XmlEscape(name), mark, Px(lx + 24), Px(ly), XmlEscape(label),
      XmlEscape(name));
}

bool HasPoint(const LineSeries& s, bool log_x, bool log_y) {
  for (const auto& [x, y] : s.points) {
    if (std::isfinite(x) && std::isfinite(y) && (!log_x || x > 0) &&
        (!log_y || y > 0))
      return true;
  }
  return false;
}

// Heatmap colour: a light-to-dark blue ramp (low values light).
std::string Ramp(double f) {
  f = std::clamp(f, 0.0, 1.0);
  const double r0 = 0xde, g0 = 0xeb, b0 = 0xf7, r1 = 0x08, g1 = 0x30, b1 = 0x6b;
  return absl::StrFormat("#%02x%02x%02x", static_cast<int>(r0 + (r1 - r0) * f),
                         static_cast<int>(g0 + (g1 - g0) * f),
                         static_cast<int>(b0 + (b1 - b0) * f));
}

}  // namespace

std::string PlainNumber(double v, int digits) {
  if (std::isfinite(v) && std::abs(v) >= 1e4 && std::abs(v) < 1e12)
    return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.*g", digits, v);
}

std::string XmlEscape(std::string_view raw) {
  // Control characters first (shown as \xHH): no raw control byte reaches
  // a page.
  const std::string s = Printable(raw);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

int SeriesDrawn(const LinePlot& plot) {
  int n = 0;
  for (const auto& s : plot.series) n += HasPoint(s, plot.log_x, plot.log_y);
  return n;
}

std::string RenderLinePlot(const LinePlot& plot) {
  std::vector<double> xs, ys;
  for (const auto& s : plot.series) {
    for (const auto& [x, y] : s.points) {
      xs.push_back(x);
      ys.push_back(y);
    }
  }
  const Axis x = MakeAxis(xs, plot.log_x, plot.x_log_base, false);
  const Axis y = MakeAxis(ys, plot.log_y, 10, true);
  std::string svg = Open(plot.title, "line");
  svg += Frame(x, y, plot.x_label, plot.y_label, plot.x_format);
  size_t slot = 0;
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const LineSeries& s = plot.series[i];
    if (!HasPoint(s, plot.log_x, plot.log_y)) continue;
    const char* colour = Colour(i);
    std::string path, marks;
    for (const auto& [vx, vy] : s.points) {
      if (!std::isfinite(vx) || !std::isfinite(vy) || (plot.log_x && vx <= 0) ||
          (plot.log_y && vy <= 0))
        continue;
      const double px = kLeft + kPlotW * x.Frac(vx);
      const double py = kTop + kPlotH * (1 - y.Frac(vy));
      path +=
          absl::StrFormat("%s%s %s ", path.empty() ? "M" : "L", Px(px), Px(py));
      marks += absl::StrFormat(
          "<circle cx=\"%s\" cy=\"%s\" r=\"3\" fill=\"%s\"><title>%s: %s = "
          "%s, %s = %s</title></circle>",
          Px(px), Px(py), colour, XmlEscape(s.name), XmlEscape(plot.x_label),
          XmlEscape(plot.x_format ? plot.x_format(vx) : G(vx)),
          XmlEscape(plot.y_label), G(vy));
    }
    svg += absl::StrFormat(
        "<g class=\"series\" data-series=\"%s\"><path d=\"%s\" fill=\"none\" "
        "stroke=\"%s\" stroke-width=\"2\"%s/>%s</g>\n",
        XmlEscape(s.name), path, colour,
        s.dashed ? " stroke-dasharray=\"6 4\"" : "", marks);
    svg += LegendItem(slot++, s.name, colour, s.dashed, false);
  }
  svg += "</svg>\n";
  return svg;
}

int SeriesDrawn(const BarPlot& plot) {
  int n = 0;
  for (const auto& s : plot.series) {
    bool any = false;
    for (double v : s.values) any = any || (std::isfinite(v) && v != 0);
    n += any;
  }
  return n;
}

std::string RenderBarPlot(const BarPlot& plot) {
  std::vector<double> ys;
  const size_t nc = plot.categories.size();
  if (plot.stacked) {
    for (size_t c = 0; c < nc; ++c) {
      double sum = 0;
      for (const auto& s : plot.series)
        if (c < s.values.size() && std::isfinite(s.values[c]))
          sum += std::max(0.0, s.values[c]);
      ys.push_back(sum);
    }
  } else {
    for (const auto& s : plot.series)
      for (double v : s.values) ys.push_back(v);
  }
  ys.push_back(0);
  const Axis y = MakeAxis(ys, false, 10, true);
  Axis x;
  std::string svg = Open(plot.title, "bar");
  svg += Frame(x, y, "", plot.y_label, nullptr, false);
  const double slot_w = nc > 0 ? kPlotW / static_cast<double>(nc) : kPlotW;
  for (size_t c = 0; c < nc; ++c) {
    svg += absl::StrFormat(
        "<text class=\"tick\" x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s"
        "</text>\n",
        Px(kLeft + slot_w * (c + 0.5)), Px(kTop + kPlotH + 16),
        XmlEscape(plot.categories[c]));
  }
  const size_t ns = plot.series.size();
  std::vector<double> base(nc, 0);
  size_t slot = 0;
  for (size_t i = 0; i < ns; ++i) {
    const BarSeries& s = plot.series[i];
    bool any = false;
    for (double v : s.values) any = any || (std::isfinite(v) && v != 0);
    if (!any) continue;
    const char* colour = Colour(i);
    std::string bars;
    for (size_t c = 0; c < nc && c < s.values.size(); ++c) {
      const double v = s.values[c];
      if (!std::isfinite(v) || v == 0) continue;
      double bx, bw, y0, y1;
      if (plot.stacked) {
        bw = slot_w * 0.6;
        bx = kLeft + slot_w * c + slot_w * 0.2;
        y0 = base[c];
        y1 = base[c] + std::max(0.0, v);
        base[c] = y1;
      } else {
        bw = slot_w * 0.8 / static_cast<double>(ns);
        bx = kLeft + slot_w * c + slot_w * 0.1 + bw * static_cast<double>(i);
        y0 = 0;
        y1 = v;
      }
      const double top = kTop + kPlotH * (1 - y.Frac(std::max(y0, y1)));
      const double bottom = kTop + kPlotH * (1 - y.Frac(std::min(y0, y1)));
      bars += absl::StrFormat(
          "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\">"
          "<title>%s, %s: %s %s</title></rect>",
          Px(bx), Px(top), Px(bw), Px(std::max(0.5, bottom - top)), colour,
          XmlEscape(plot.categories[c]), XmlEscape(s.name), G(v),
          XmlEscape(plot.y_label));
    }
    svg += absl::StrFormat("<g class=\"series\" data-series=\"%s\">%s</g>\n",
                           XmlEscape(s.name), bars);
    svg += LegendItem(slot++, s.name, colour, false, true);
  }
  svg += "</svg>\n";
  return svg;
}

int SeriesDrawn(const Heatmap& map) {
  int n = 0;
  for (const auto& row : map.cells) {
    bool any = false;
    for (double v : row) any = any || std::isfinite(v);
    n += any;
  }
  return n;
}

std::string RenderHeatmap(const Heatmap& map) {
  double mn = std::numeric_limits<double>::infinity(), mx = -mn;
  for (const auto& row : map.cells) {
    for (double v : row) {
      if (!std::isfinite(v)) continue;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
  }
  const double lo = std::min(0.0, mn), hi = mx;
  const size_t rows = map.cells.size();
  size_t cols = 0;
  for (const auto& row : map.cells) cols = std::max(cols, row.size());
  const double cell =
      std::min(40.0, std::min(kPlotW / std::max<size_t>(cols, 1),
                              kPlotH / std::max<size_t>(rows, 1)));
  // As tall as the matrix (and the colour scale) need.
  const double height =
      std::max(kTop + 10 + cell * static_cast<double>(rows), kTop + 140) + 16;
  std::string svg = Open(map.title, "heatmap", height);
  const double x0 = kLeft, y0 = kTop + 10;
  for (size_t c = 0; c < cols; ++c) {
    svg += absl::StrFormat(
        "<text class=\"tick\" x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s"
        "</text>\n",
        Px(x0 + cell * (c + 0.5)), Px(y0 - 3),
        XmlEscape(c < map.col_names.size() ? map.col_names[c]
                                           : std::to_string(c)));
  }
  for (size_t r = 0; r < rows; ++r) {
    const auto& row = map.cells[r];
    bool any = false;
    for (double v : row) any = any || std::isfinite(v);
    const std::string rname =
        r < map.row_names.size() ? map.row_names[r] : std::to_string(r);
    svg += absl::StrFormat(
        "<text class=\"tick\" x=\"%s\" y=\"%s\" text-anchor=\"end\">%s"
        "</text>\n",
        Px(x0 - 6), Px(y0 + cell * (r + 0.5) + 4), XmlEscape(rname));
    std::string rects;
    for (size_t c = 0; c < row.size(); ++c) {
      const double v = row[c];
      const bool ok = std::isfinite(v);
      // From 0 (or the lowest value, when below 0) to the highest: close
      // values look alike; a scale from min to max would paint a 2%
      // difference as white against the darkest colour. Darker is better:
      // higher values, or lower ones where lower is better.
      double f = ok && hi > lo ? (v - lo) / (hi - lo) : 0.5;
      if (map.lower_is_better && ok) f = 1 - f;
      rects += absl::StrFormat(
          "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\" "
          "stroke=\"#fff\"><title>%s %s -> %s %s: %s</title></rect>",
          Px(x0 + cell * c), Px(y0 + cell * r), Px(cell), Px(cell),
          ok ? Ramp(f) : "#f2f2f2", XmlEscape(map.row_label), XmlEscape(rname),
          XmlEscape(map.col_label),
          XmlEscape(c < map.col_names.size() ? map.col_names[c]
                                             : std::to_string(c)),
          ok ? G(v) + " " + XmlEscape(map.unit) : "no value");
      if (ok && cell >= 28) {
        rects += absl::StrFormat(
            "<text class=\"cell\" x=\"%s\" y=\"%s\" text-anchor=\"middle\" "
            "fill=\"%s\">%s</text>",
            Px(x0 + cell * (c + 0.5)), Px(y0 + cell * (r + 0.5) + 4),
            f > 0.5 ? "#fff" : "#000", G(v));
      }
    }
    if (any) {
      svg += absl::StrFormat("<g class=\"series\" data-series=\"%s\">%s</g>\n",
                             XmlEscape(map.row_label + " " + rname), rects);
    } else {
      svg += "<g class=\"empty-row\">" + rects + "</g>\n";
    }
  }
  // Colour scale.
  if (std::isfinite(mn)) {
    const double lx = kLeft + kPlotW + 14;
    for (int i = 0; i < 10; ++i) {
      svg += absl::StrFormat(
          "<rect x=\"%s\" y=\"%s\" width=\"16\" height=\"12\" fill=\"%s\"/>",
          Px(lx), Px(kTop + 12 * (9 - i) + 10), Ramp(i / 9.0));
    }
    svg += absl::StrFormat(
        "<text x=\"%s\" y=\"%s\">%s %s</text><text x=\"%s\" y=\"%s\">%s"
        "%s</text>\n",
        Px(lx + 22), Px(kTop + 20),
        G(map.lower_is_better ? lo : hi) + " " + XmlEscape(map.unit),
        map.lower_is_better ? "(better)" : "", Px(lx + 22), Px(kTop + 128),
        G(map.lower_is_better ? hi : lo) + " " + XmlEscape(map.unit), "");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace ringmaster
