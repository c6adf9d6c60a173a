// Plots as inline SVG, generated here (docs/report.md says why: no script
// library to vendor, nothing to fetch, deterministic output that tests can
// read). Every series is one <g class="series" data-series="name"> so a
// browser check can count what was drawn; every point carries a <title>
// (the browser's tooltip) with its exact values.
#ifndef RINGMASTER_CORE_SVG_PLOT_H_
#define RINGMASTER_CORE_SVG_PLOT_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ringmaster {

// Escapes &, <, >, " and ' for XML/HTML text and attributes.
std::string XmlEscape(std::string_view s);

// A figure for a plot or a report table: `digits` significant digits, but
// never an exponent for values a terminal table prints plainly (18396.0,
// not 1.84e+04).
std::string PlainNumber(double v, int digits = 4);

struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  bool dashed = false;                            // e.g. a prediction
};

struct LinePlot {
  std::string title;
  std::string x_label, y_label;
  bool log_x = false, log_y = false;
  // Tick labels; default "%g". Log axes place ticks at powers of
  // `x_log_base` (2 for bytes) / 10.
  std::function<std::string(double)> x_format;
  double x_log_base = 10;
  std::vector<LineSeries> series;
};

// Category bars: one value per (series, category); stacked or grouped.
struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category; NaN = none
};
struct BarPlot {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
  bool stacked = false;
};

// A matrix of values (rows x cols; NaN = no value), coloured by value; each
// row is one series.
struct Heatmap {
  std::string title;
  std::string unit;
  std::string row_label, col_label;
  std::vector<std::string> row_names, col_names;
  std::vector<std::vector<double>> cells;
  bool lower_is_better = false;  // latency: the darkest cell is the lowest
};

// Each returns one <svg> element. Series with no finite point are skipped
// (and so not counted: SeriesDrawn says how many will be).
std::string RenderLinePlot(const LinePlot& plot);
std::string RenderBarPlot(const BarPlot& plot);
std::string RenderHeatmap(const Heatmap& map);
int SeriesDrawn(const LinePlot& plot);
int SeriesDrawn(const BarPlot& plot);
int SeriesDrawn(const Heatmap& map);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_SVG_PLOT_H_
