#include "core/svg_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <string>

namespace ringmaster {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    ++n;
  return n;
}

TEST(XmlEscape, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(XmlEscape("plain"), "plain");
}

TEST(RenderLinePlot, OneGroupPerDrawnSeriesAndATitlePerPoint) {
  LinePlot p;
  p.title = "busbw <all_reduce>";
  p.x_label = "size";
  p.y_label = "GB/s";
  p.log_x = true;
  p.x_log_base = 2;
  p.series.push_back({"out", {{8, 0.1}, {1024, 2.0}, {1 << 20, 8.0}}});
  p.series.push_back({"in", {{8, 0.2}, {1024, 2.5}}, /*dashed=*/true});
  // Nothing drawable on a log x axis: skipped, and not counted.
  p.series.push_back({"empty", {{0, 1.0}, {-4, kNaN}}});
  EXPECT_EQ(SeriesDrawn(p), 2);
  const std::string svg = RenderLinePlot(p);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 40);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"series\""), 2);
  EXPECT_NE(svg.find("data-series=\"out\""), std::string::npos);
  EXPECT_NE(svg.find("data-series=\"in\""), std::string::npos);
  EXPECT_EQ(svg.find("data-series=\"empty\""), std::string::npos);
  // The title is escaped; every point has its tooltip.
  EXPECT_NE(svg.find("busbw &lt;all_reduce&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<all_reduce>"), std::string::npos);
  EXPECT_GE(Count(svg, "<title>"), 5);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the dashed one
}

TEST(RenderLinePlot, SameInputSameOutput) {
  LinePlot p;
  p.title = "t";
  p.series.push_back({"s", {{1, 1}, {2, 4}, {3, 9}}});
  EXPECT_EQ(RenderLinePlot(p), RenderLinePlot(p));
  // Non-finite values never reach the drawing as coordinates.
  p.series.push_back(
      {"bad", {{4, kNaN}, {5, std::numeric_limits<double>::infinity()}}});
  const std::string svg = RenderLinePlot(p);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(SeriesDrawn(p), 1);
}

TEST(RenderBarPlot, BarsForValuesAndNoneForMissingOnes) {
  BarPlot p;
  p.title = "gemm";
  p.y_label = "TFLOP/s";
  p.categories = {"fp32", "bf16", "fp8"};
  p.series.push_back({"rank 0", {50, 700, kNaN}});
  p.series.push_back({"rank 1", {kNaN, kNaN, kNaN}});  // nothing: skipped
  EXPECT_EQ(SeriesDrawn(p), 1);
  const std::string svg = RenderBarPlot(p);
  EXPECT_EQ(Count(svg, "class=\"series\""), 1);
  const std::regex bar("<rect[^>]*>\\s*<title>[^<]*(700|50)[^<]*</title>");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), bar),
                          std::sregex_iterator()),
            2);
  for (const char* c : {"fp32", "bf16", "fp8"})
    EXPECT_NE(svg.find(c), std::string::npos) << c;
}

TEST(RenderHeatmap, EveryCellWithAValueIsDrawnWithItsValue) {
  Heatmap m;
  m.title = "p2p";
  m.unit = "GB/s";
  m.row_label = m.col_label = "rank";
  m.row_names = m.col_names = {"0", "1", "2"};
  m.cells = {{kNaN, 396.1, 395.0}, {396.0, kNaN, 12.5}, {394.8, 12.4, kNaN}};
  EXPECT_EQ(SeriesDrawn(m), 3);
  const std::string svg = RenderHeatmap(m);
  for (const char* v : {"396.1", "395", "396", "12.5", "394.8", "12.4"})
    EXPECT_NE(svg.find(v), std::string::npos) << v;
  // A slow link and a fast one get different colours.
  const std::regex fill("fill=\"(#[0-9a-fA-F]{6}|rgb\\([^)]*\\))\"");
  std::set<std::string> colours;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), fill);
       it != std::sregex_iterator(); ++it)
    colours.insert((*it)[1]);
  EXPECT_GE(colours.size(), 2u);
}

// The fill of the cell whose tooltip names `value`.
std::string CellFill(const std::string& svg, const std::string& value) {
  const std::regex cell(
      "fill=\"(#[0-9a-f]{6})\" stroke=\"#fff\"><title>[^<]*: " + value + " ");
  std::smatch m;
  return std::regex_search(svg, m, cell) ? m[1].str() : "";
}

// Close values look alike (the scale starts at 0, not at the lowest
// value); where lower is better, the lower value is the darker one.
TEST(RenderHeatmap, ScaleFromZeroAndDarkerIsBetter) {
  Heatmap m;
  m.title = "p2p";
  m.unit = "GB/s";
  m.row_names = m.col_names = {"0", "1"};
  m.cells = {{kNaN, 100}, {102.6, kNaN}};
  std::string svg = RenderHeatmap(m);
  const std::string low = CellFill(svg, "100"), high = CellFill(svg, "102.6");
  ASSERT_FALSE(low.empty()) << svg;
  ASSERT_FALSE(high.empty()) << svg;
  // Both near the dark end: 100/102.6 of the way, not white against dark.
  EXPECT_NE(low, "#deebf7");
  auto red = [](const std::string& c) {
    return std::stoi(c.substr(1, 2), nullptr, 16);
  };
  EXPECT_LT(std::abs(red(low) - red(high)), 12) << low << " " << high;
  m.unit = "ns";
  m.lower_is_better = true;
  m.cells = {{kNaN, 500}, {1000, kNaN}};
  svg = RenderHeatmap(m);
  // Darker means less red in this ramp: 500 ns is darker than 1000 ns.
  EXPECT_LT(red(CellFill(svg, "500")), red(CellFill(svg, "1000"))) << svg;
  EXPECT_NE(svg.find("(better)"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster
