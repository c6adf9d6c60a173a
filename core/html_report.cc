#include "core/html_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/curves.h"
#include "core/labels.h"
#include "core/metrics.h"
#include "core/names.h"
#include "core/report.h"
#include "core/stats.h"
#include "core/svg_plot.h"
#include "core/topology.h"
#include "core/training.h"
#include "core/transformer.h"
#include "core/units.h"

namespace ringmaster {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Hand-written, small: the page's only script. It checks that every plot
// drew the series it was meant to (the browser's own layout: a series
// counts when its bounding box is not empty), records errors, and lets a
// click on a legend entry hide or show its series.
constexpr char kScript[] = R"JS(
(function () {
  var errors = [];
  window.addEventListener('error', function (e) {
    errors.push(String(e.message));
    document.body.setAttribute('data-errors', errors.join(' | '));
  });
  function check() {
    var figures = document.querySelectorAll('figure.plot');
    var ok = 0;
    figures.forEach(function (f) {
      var drawn = 0;
      f.querySelectorAll('g.series').forEach(function (g) {
        var b = g.getBBox();
        if (b.width > 0 || b.height > 0) drawn++;
      });
      f.setAttribute('data-drawn-series', String(drawn));
      if (drawn === Number(f.getAttribute('data-expected-series'))) ok++;
    });
    document.body.setAttribute('data-plots', String(figures.length));
    document.body.setAttribute('data-plots-ok', String(ok));
  }
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', check);
  } else {
    check();
  }
  document.addEventListener('click', function (e) {
    var item = e.target.closest('.legend-item');
    if (!item) return;
    var name = item.getAttribute('data-series');
    item.closest('svg').querySelectorAll('g.series').forEach(function (g) {
      if (g.getAttribute('data-series') === name) g.classList.toggle('off');
    });
    item.classList.toggle('off');
  });
})();
)JS";

constexpr char kStyle[] = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 6px 0 18px; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
figure { margin: 12px 0 24px; } figcaption { font-size: 12px; color: #555; }
svg.plot { font: 11px system-ui, sans-serif; max-width: 100%; height: auto; }
svg .title { font-weight: 600; font-size: 13px; }
.legend-item { cursor: pointer; } .legend-item.off { opacity: 0.35; }
g.series.off { display: none; }
.bad { color: #b00; font-weight: 600; } .warn { color: #a60; }
details summary { cursor: pointer; color: #555; font-size: 12px; }
)CSS";

std::string Esc(std::string_view s) { return XmlEscape(s); }

// A figure: the plot, its caption and its table.
struct Figure {
  std::string svg;
  int expected = 0;
  std::string caption;
  std::string table;
};

// A figure of a plot: its SVG and how many series it will draw.
std::string Draw(const LinePlot& p) { return RenderLinePlot(p); }
std::string Draw(const BarPlot& p) { return RenderBarPlot(p); }
std::string Draw(const Heatmap& p) { return RenderHeatmap(p); }
template <typename Plot>
Figure FigureOf(const Plot& plot) {
  Figure f;
  f.svg = Draw(plot);
  f.expected = SeriesDrawn(plot);
  return f;
}

std::string RenderFigure(const Figure& f) {
  return absl::StrFormat(
      "<figure class=\"plot\" data-expected-series=\"%d\">\n%s<figcaption>%s"
      "</figcaption>\n<details open><summary>table</summary>\n%s</details>\n"
      "</figure>\n",
      f.expected, f.svg, Esc(f.caption), f.table);
}

std::string Num(double v, int digits = 4) {
  return std::isfinite(v) ? PlainNumber(v, digits) : "";
}

// A table from a header row and rows; the first column left-aligned.
std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows) {
  std::string t = "<table><tr>";
  for (size_t i = 0; i < header.size(); ++i)
    t += absl::StrFormat("<th%s>%s</th>", i == 0 ? " class=\"l\"" : "",
                         Esc(header[i]));
  t += "</tr>\n";
  for (const auto& row : rows) {
    t += "<tr>";
    for (size_t i = 0; i < row.size(); ++i)
      t += absl::StrFormat("<td%s>%s</td>", i == 0 ? " class=\"l\"" : "",
                           Esc(row[i]));
    t += "</tr>\n";
  }
  return t + "</table>\n";
}

// ------------------------------------------------------------ provenance

std::string Provenance(const std::vector<v1::Result>& results) {
  std::vector<std::string> order;
  std::map<std::string, const v1::Result*> first;
  std::map<std::string, int> counts;
  for (const auto& r : results) {
    if (!first.count(r.job_id())) order.push_back(r.job_id());
    first.try_emplace(r.job_id(), &r);
    ++counts[r.job_id()];
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& id : order) {
    const v1::Provenance& p = first[id]->provenance();
    std::map<std::string, int> hosts;
    for (const auto& h : p.hosts()) ++hosts[h];
    std::vector<std::string> host_list;
    for (const auto& [h, n] : hosts)
      host_list.push_back(absl::StrFormat("%s (%d)", h, n));
    std::set<std::string> gpus(p.gpu_models().begin(), p.gpu_models().end());
    gpus.erase("");
    std::string versions = absl::StrJoin(
        std::vector<std::string>{
            p.nccl_version().empty() ? "" : "NCCL " + p.nccl_version(),
            p.cuda_runtime_version().empty()
                ? ""
                : "CUDA " + p.cuda_runtime_version(),
            p.driver_version().empty() ? "" : "driver " + p.driver_version(),
            p.mpi_version()},
        " ");
    std::vector<std::string> env;
    for (const auto& [k, v] : p.nccl_env()) env.push_back(k + "=" + v);
    std::sort(env.begin(), env.end());
    rows.push_back({id, p.started_at(), std::to_string(counts[id]), p.backend(),
                    absl::StrJoin(host_list, ", "), absl::StrJoin(gpus, ", "),
                    p.topology_id(), versions, p.git_sha().substr(0, 12),
                    absl::StrJoin(env, " "),
                    absl::StrJoin(p.command_line(), " ")});
  }
  return Table({"job", "started", "results", "backend", "hosts (ranks)", "GPUs",
                "topology", "versions", "git", "NCCL env", "command"},
               rows);
}

// ------------------------------------------------------------ collectives

void Collectives(const std::vector<v1::Result>& results,
                 const HtmlReportOptions& o, std::vector<Figure>* figures) {
  const std::vector<BusbwCurve> curves = BusbwCurves(results);
  for (const CollectiveGroup& g : GroupCollectiveResults(results)) {
    const v1::Collective collective = g.results[0]->case_().collective();
    const int nranks = g.results[0]->nranks();
    const std::set<std::string>& vary = g.vary;  // label by what differs
    LinePlot plot;
    plot.title = "busbw: " + g.title;
    plot.x_label = "message size";
    plot.y_label = "busbw (GB/s)";
    plot.log_x = plot.log_y = true;
    plot.x_log_base = 2;
    plot.x_format = [](double v) {
      return FormatBytes(static_cast<int64_t>(std::llround(v)));
    };
    std::vector<std::string> series_order;
    std::map<std::string, std::map<int64_t, double>> series;
    std::set<int64_t> sizes;
    // Several runs of a point (a folder of repeated jobs, run --rounds):
    // the median.
    std::map<std::string, std::map<int64_t, std::vector<double>>> runs;
    for (const v1::Result* r : g.results) {
      std::string label = CollectiveSeriesLabel(*r, vary);
      if (!runs.count(label)) series_order.push_back(label);
      runs[label][r->case_().size_bytes()].push_back(r->busbw_gbps());
      sizes.insert(r->case_().size_bytes());
    }
    for (const auto& [label, points] : runs)
      for (const auto& [size, values] : points)
        series[label][size] = Median(values);
    for (const auto& label : series_order) {
      LineSeries s;
      s.name = label;
      for (const auto& [size, bw] : series[label])
        s.points.emplace_back(static_cast<double>(size), bw);
      plot.series.push_back(std::move(s));
    }
    // Predictions: one dashed series per system that fits the rank count.
    std::vector<std::string> predicted_names;
    std::vector<std::map<int64_t, double>> predicted;
    for (const v1::Topology& t : o.topologies) {
      const int gpus = RanksPerNode(t.node());
      if (gpus <= 0 || !(nranks < gpus || nranks % gpus == 0)) continue;
      // The ranks as whole nodes of the system, or as part of one.
      v1::Topology system = t;
      if (nranks < gpus) SetRanksPerNode(system.mutable_node(), nranks);
      const int nodes = std::max(1, nranks / gpus);
      LineSeries s;
      s.name = nranks < gpus
                   ? absl::StrFormat("predicted (%s, %d of its %d GPUs)",
                                     t.id(), nranks, gpus)
                   : absl::StrFormat("predicted (%s, %d node%s)", t.id(), nodes,
                                     nodes == 1 ? "" : "s");
      s.dashed = true;
      std::map<int64_t, double> values;
      for (int64_t size : sizes) {
        auto p = PredictCollective(system, nodes, collective, size);
        if (!p.ok() || p->busbw_gbps <= 0) continue;
        values[size] = p->busbw_gbps;
        s.points.emplace_back(static_cast<double>(size), p->busbw_gbps);
      }
      if (s.points.empty()) continue;
      predicted_names.push_back(s.name);
      predicted.push_back(std::move(values));
      plot.series.push_back(std::move(s));
    }
    Figure f = FigureOf(plot);
    f.caption = absl::StrFormat(
        "Bus bandwidth (nccl-tests' definition, docs/metrics.md) against "
        "message size; %d series%s.",
        series_order.size(),
        predicted_names.empty() ? "" : ", the model's predictions dashed");
    std::vector<std::string> header = {"size"};
    for (const auto& l : series_order) header.push_back(l + " (GB/s)");
    for (const auto& l : predicted_names) header.push_back(l + " (GB/s)");
    std::vector<std::vector<std::string>> rows;
    for (int64_t size : sizes) {
      std::vector<std::string> row = {FormatBytes(size)};
      for (const auto& l : series_order) {
        auto it = series[l].find(size);
        row.push_back(it == series[l].end() ? "" : Num(it->second));
      }
      for (const auto& values : predicted) {
        auto it = values.find(size);
        row.push_back(it == values.end() ? "" : Num(it->second));
      }
      rows.push_back(std::move(row));
    }
    f.table = Table(header, rows);
    // The curves' shape (core/curves.h): a second table, drops in the
    // caption.
    std::vector<std::vector<std::string>> shape;
    std::vector<std::string> drops;
    for (const BusbwCurve& c : curves) {
      if (c.group != g.title) continue;
      std::vector<std::string> where;
      for (const CurveDrop& d : c.drops) {
        std::string choice = DropChoiceText(d);
        if (!choice.empty()) choice = ", " + choice;
        where.push_back(DropSpanText(d) + choice + ")");
        drops.push_back(c.series + " " + where.back());
      }
      shape.push_back({c.series, Num(c.peak_gbps), FormatBytes(c.peak_size),
                       FormatBytes(c.half_size), FormatBytes(c.ninety_size),
                       where.empty() ? "none" : absl::StrJoin(where, "; ")});
    }
    if (!shape.empty()) {
      f.table += Table({"series", "peak busbw (GB/s)", "peak at", "50% at",
                        "90% at", "drops"},
                       shape);
    }
    if (!drops.empty()) {
      f.caption += absl::StrFormat(
          " Busbw drops by %.0f%% or more (outside both 95%% intervals) "
          "from one size to the next: %s.",
          100 * kCurveDropShare, absl::StrJoin(drops, "; "));
    }
    figures->push_back(std::move(f));
  }
}

// ------------------------------------------------------------ node benches

double BenchValue(const v1::Result& r) {
  const v1::Case& c = r.case_();
  if (c.bench() == v1::BENCH_LATENCY) return r.latency_ns();
  if (c.bench() == v1::BENCH_GEMM) return r.tflops();
  return r.bandwidth_gbps();
}

std::string BenchUnit(const v1::Case& c) {
  if (c.bench() == v1::BENCH_LATENCY) return "ns";
  if (c.bench() == v1::BENCH_GEMM) return "TFLOP/s";
  return "GB/s";
}

std::string PointLabel(const v1::Case& c) {
  return c.bench() == v1::BENCH_GEMM
             ? absl::StrFormat("%dx%dx%d", c.gemm().m(), c.gemm().n(),
                               c.gemm().k())
             : FormatBytes(c.size_bytes());
}

// A pair pattern's results: a source x destination heatmap (repeated runs:
// each cell's median; a failed run marks its cell).
void PairHeatmap(const std::string& title,
                 const std::vector<const v1::Result*>& v,
                 std::vector<Figure>* figures) {
  int n = 0;
  bool any_ok = false;
  for (const v1::Result* r : v) {
    n = std::max(n, r->nranks());
    any_ok = any_ok || r->status() == v1::OK;
  }
  if (!any_ok) return;
  Heatmap map;
  map.title = title;
  map.unit = BenchUnit(v.front()->case_());
  map.lower_is_better = v.front()->case_().bench() == v1::BENCH_LATENCY;
  map.row_label = "rank";
  map.col_label = "rank";
  map.cells.assign(n, std::vector<double>(n, kNaN));
  std::vector<std::vector<std::string>> rows(n);
  for (int i = 0; i < n; ++i) {
    map.row_names.push_back(std::to_string(i));
    map.col_names.push_back(std::to_string(i));
    rows[i].push_back(std::to_string(i));
    rows[i].resize(n + 1);
  }
  // Repeated runs: a cell shows the median of its runs; a failed run
  // marks it (as the text matrices do).
  std::map<std::pair<int, int>, std::vector<double>> values;
  std::set<std::pair<int, int>> failed, skipped;
  for (const v1::Result* r : v) {
    const int a = r->case_().src_rank(), b = r->case_().dst_rank();
    if (a < 0 || b < 0 || a >= n || b >= n) continue;
    if (r->status() == v1::OK) {
      values[{a, b}].push_back(BenchValue(*r));
    } else {
      (r->status() == v1::SKIPPED ? skipped : failed).insert({a, b});
    }
  }
  for (const auto& [ab, runs] : values) {
    if (failed.count(ab)) continue;
    map.cells[ab.first][ab.second] = Median(runs);
    rows[ab.first][ab.second + 1] = Num(Median(runs));
  }
  for (const auto& [a, b] : skipped)
    if (!values.count({a, b})) rows[a][b + 1] = "n/a";
  for (const auto& [a, b] : failed) rows[a][b + 1] = "FAIL";
  std::vector<std::string> header = {"src \\ dst"};
  for (int i = 0; i < n; ++i) header.push_back(std::to_string(i));
  Figure f = FigureOf(map);
  f.caption = "Rows: source rank; columns: destination rank (" + map.unit +
              "). nvbandwidth's semantics (docs/metrics.md).";
  f.table = Table(header, rows);
  figures->push_back(std::move(f));
}

// A per-rank pattern's results: bars per size (or GEMM shape), one series
// per rank that moved data, or the ranks together.
void RankBars(const std::string& title, const std::vector<const v1::Result*>& v,
              std::vector<Figure>* figures) {
  // Per-rank patterns: categories are the sizes (or GEMM shapes), one
  // series per rank that moved data (or the aggregate when none did).
  std::vector<std::string> cats;
  std::map<std::string, size_t> cat_index;
  for (const v1::Result* r : v) {
    if (r->status() != v1::OK) continue;
    std::string p = PointLabel(r->case_());
    if (!cat_index.count(p)) {
      cat_index[p] = cats.size();
      cats.push_back(p);
    }
  }
  if (cats.empty()) return;
  BarPlot plot;
  plot.title = title;
  const std::string unit = BenchUnit(v.front()->case_());
  plot.y_label = unit;
  plot.categories = cats;
  // One series per rank for one-rank-at-a-time patterns, else one for
  // the ranks together.
  std::vector<std::string> names;
  std::map<std::string, BarSeries> by_name;
  // Repeated runs: each bar is the median of its runs (the table lists
  // every run).
  std::map<std::pair<std::string, size_t>, std::vector<double>> runs;
  std::vector<std::vector<std::string>> rows;
  for (const v1::Result* r : v) {
    if (r->status() != v1::OK) continue;
    const v1::Case& c = r->case_();
    std::string name = r->nranks() > 1 ? "all ranks" : "value";
    if (r->nranks() > 1 &&
        (c.pattern() == v1::ONE_RANK || c.pattern() == v1::ONE_TO_ALL))
      name = absl::StrFormat("rank %d", c.src_rank());
    if (r->nranks() > 1 && c.pattern() == v1::ALL_TO_ONE)
      name = absl::StrFormat("to rank %d", c.dst_rank());
    auto [it, fresh] = by_name.try_emplace(name);
    if (fresh) {
      names.push_back(name);
      it->second.name = name;
      it->second.values.assign(cats.size(), kNaN);
    }
    const size_t ci = cat_index[PointLabel(c)];
    runs[{name, ci}].push_back(BenchValue(*r));
    it->second.values[ci] = Median(runs[{name, ci}]);
    std::vector<std::string> per_rank;
    for (double b : r->rank_bandwidth_gbps())
      per_rank.push_back(b > 0 ? Num(b) : "-");
    rows.push_back({cats[ci], name, Num(BenchValue(*r)), r->path(),
                    r->pct_of_ceiling() > 0
                        ? absl::StrFormat("%.1f%%", r->pct_of_ceiling())
                        : "",
                    absl::StrJoin(per_rank, " ")});
  }
  for (const auto& name : names) plot.series.push_back(by_name[name]);
  Figure f = FigureOf(plot);
  f.caption = title + " (" + unit + ")";
  f.table = Table(
      {"size", "ranks", unit, "path", "% of ceiling", "per rank (GB/s)"}, rows);
  figures->push_back(std::move(f));
}

void NodeBenches(const std::vector<v1::Result>& results,
                 std::vector<Figure>* figures) {
  // Pair patterns: one heatmap per configuration and size.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const v1::Result*>> pairs, others;
  std::vector<std::string> other_order;
  for (const auto& r : results) {
    const v1::Case& c = r.case_();
    if (c.bench() == v1::BENCH_COLLECTIVE || c.bench() == v1::BENCH_TRAIN ||
        c.bench() == v1::BENCH_TRANSFORMER ||
        c.bench() == v1::BENCH_INFERENCE || c.bench() == v1::BENCH_FIND_SLOW)
      continue;
    if (c.pattern() == v1::PAIR) {
      std::string title = absl::StrFormat("%s: %s, %s", c.spec_name(),
                                          BenchLabel(c), PointLabel(c));
      if (!c.variant().empty()) title += ", variant " + c.variant();
      if (!pairs.count(title)) order.push_back(title);
      pairs[title].push_back(&r);
    } else {
      std::string title =
          absl::StrFormat("%s: %s", c.spec_name(), BenchLabel(c));
      if (!c.variant().empty()) title += ", variant " + c.variant();
      if (!others.count(title)) other_order.push_back(title);
      others[title].push_back(&r);
    }
  }
  for (const auto& title : order) PairHeatmap(title, pairs[title], figures);
  for (const auto& title : other_order) RankBars(title, others[title], figures);
}

// ------------------------------------------------------------ training

// LLM inference: per spec, tokens/s per rank against TPOT p99 (the
// throughput a latency buys), a line per tensor-parallel width through its
// batch sizes; the table has every row and the caption the objective's best.
void Serving(const std::vector<v1::Result>& results,
             std::vector<Figure>* figures) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const v1::Result*>> groups;
  for (const auto& r : results) {
    const v1::Case& c = r.case_();
    if (c.bench() != v1::BENCH_INFERENCE || r.status() != v1::OK) continue;
    std::string key = absl::StrFormat("%s: %s", c.spec_name(), BenchLabel(c));
    if (!c.variant().empty()) key += ", variant " + c.variant();
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&r);
  }
  for (const auto& key : order) {
    auto& v = groups[key];
    std::stable_sort(
        v.begin(), v.end(), [](const v1::Result* a, const v1::Result* b) {
          return std::pair(a->nranks(),
                           a->case_().transformer().micro_batch()) <
                 std::pair(b->nranks(), b->case_().transformer().micro_batch());
        });
    LinePlot plot;
    plot.title = key + ": throughput against latency";
    plot.x_label = "time per output token, p99 (ms)";
    plot.y_label = "output tokens/s per rank";
    std::vector<std::vector<std::string>> rows;
    const double slo = v.front()->case_().serve().slo_tpot_p99_s();
    const v1::Result* best = nullptr;
    for (const v1::Result* r : v) {
      const std::string layout = LayoutName(r->case_());
      if (plot.series.empty() || plot.series.back().name != layout)
        plot.series.push_back(LineSeries{layout, {}, false});
      const v1::ServeFigures& s = r->serve();
      plot.series.back().points.emplace_back(s.tpot_p99_s() * 1e3,
                                             s.tokens_per_s_per_rank());
      rows.push_back({layout,
                      std::to_string(r->case_().transformer().micro_batch()),
                      Num(s.ttft_s() * 1e3), Num(s.tpot_p50_s() * 1e3),
                      Num(s.tpot_p99_s() * 1e3), Num(s.tokens_per_s_per_rank()),
                      slo <= 0 ? "-" : (s.slo_met() ? "met" : "missed")});
      if (slo > 0 && BeatsWithinObjective(*r, best)) best = r;
    }
    Figure f = FigureOf(plot);
    f.caption =
        "Each point is one batch size (the table's rows), left to right as "
        "the batch grows.";
    if (slo > 0) {
      f.caption +=
          best == nullptr
              ? absl::StrFormat(" No batch met TPOT p99 <= %s ms.",
                                Num(slo * 1e3))
              : absl::StrFormat(" Best within TPOT p99 <= %s ms: %s batch %d.",
                                Num(slo * 1e3), LayoutName(best->case_()),
                                best->case_().transformer().micro_batch());
    }
    f.table = Table({"layout", "batch", "TTFT (ms)", "TPOT p50 (ms)",
                     "TPOT p99 (ms)", "tokens/s per rank", "objective"},
                    rows);
    figures->push_back(std::move(f));
  }
}

void Training(const std::vector<v1::Result>& results,
              std::vector<Figure>* figures) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const v1::Result*>> groups;
  // Repeated runs count once, by the run with the median step.
  for (const v1::Result* p : MedianTrainRuns(results)) {
    const v1::Result& r = *p;
    const v1::Case& c = r.case_();
    if (r.status() != v1::OK) continue;
    std::string key = absl::StrFormat("%s: %s", c.spec_name(), BenchLabel(c));
    if (!c.variant().empty()) key += ", variant " + c.variant();
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&r);
  }
  if (order.empty()) return;
  LinePlot ladder;
  ladder.title = "scaling efficiency";
  ladder.x_label = "ranks";
  ladder.y_label = "efficiency";
  ladder.log_x = true;
  ladder.x_log_base = 2;
  std::vector<std::vector<std::string>> ladder_rows;
  for (const auto& key : order) {
    auto& v = groups[key];
    std::sort(v.begin(), v.end(), [](const v1::Result* a, const v1::Result* b) {
      return a->nranks() < b->nranks();
    });
    const bool strong = v.front()->case_().train().strong();
    const double t1 =
        v.front()->nranks() == 1 ? v.front()->stats().median_s() : 0;
    LineSeries s;
    s.name = key + (strong ? " (strong)" : " (weak)");
    BarPlot bars;
    bars.title = "step breakdown: " + key;
    bars.y_label = "ms per step";
    bars.stacked = true;
    BarSeries compute{"compute", {}}, exposed{"exposed communication", {}},
        skew{"rank skew", {}}, other{"other", {}};
    std::vector<std::vector<std::string>> rows;
    bool underflowed = false;
    for (const v1::Result* r : v) {
      const double tn = r->stats().median_s();
      const v1::TrainFigures& t = r->train();
      double e = 0;
      if (t1 > 0 && tn > 0) e = strong ? t1 / (r->nranks() * tn) : t1 / tn;
      if (e > 0) s.points.emplace_back(r->nranks(), e);
      const double step =
          t.step_of_breakdown_s() > 0 ? t.step_of_breakdown_s() : tn;
      bars.categories.push_back(absl::StrFormat("%d ranks", r->nranks()));
      compute.values.push_back(t.compute_s() * 1e3);
      exposed.values.push_back(t.exposed_comm_s() * 1e3);
      skew.values.push_back(t.skew_s() * 1e3);
      other.values.push_back(
          std::max(0.0,
                   step - t.compute_s() - t.exposed_comm_s() - t.skew_s()) *
          1e3);
      rows.push_back(
          {std::to_string(r->nranks()), Num(tn * 1e3), e > 0 ? Num(e, 3) : "-",
           Num(t.compute_s() * 1e3), Num(t.exposed_comm_s() * 1e3),
           Num(t.skew_s() * 1e3), Num(t.samples_per_s()),
           t.grad_zero_fraction() >= 0
               ? absl::StrFormat("%.1f%%", 100 * t.grad_zero_fraction())
               : "-"});
      underflowed =
          underflowed || t.grad_zero_fraction() >= kGradientsUnderflowed;
      ladder_rows.push_back(
          {key, std::to_string(r->nranks()), e > 0 ? Num(e, 3) : "-"});
    }
    ladder.series.push_back(std::move(s));
    bars.series = {compute, exposed, skew, other};
    Figure f = FigureOf(bars);
    f.caption =
        "Median step split into compute, gradient all-reduce not hidden "
        "behind backward, waiting for the slowest rank, and the rest.";
    if (underflowed) {
      f.caption +=
          " Warning: half or more of the gradient entries are zero (they "
          "underflowed; raise loss_scale): backward multiplied zeros, which "
          "runs faster than training.";
    }
    f.table =
        Table({"ranks", "step (ms)", "efficiency", "compute (ms)",
               "exposed (ms)", "skew (ms)", "samples/s", "zero gradients"},
              rows);
    figures->push_back(std::move(f));
  }
  if (SeriesDrawn(ladder) > 0) {
    Figure f = FigureOf(ladder);
    f.caption =
        "Weak scaling E = T(1)/T(N) at fixed per-rank batch; strong E = "
        "T(1)/(N T(N)) at fixed global batch.";
    f.table = Table({"configuration", "ranks", "efficiency"}, ladder_rows);
    figures->insert(figures->begin(), std::move(f));
  }
}

// ------------------------------------------------------------ find_slow

void FindSlow(const std::vector<v1::Result>& results,
              std::vector<Figure>* figures) {
  for (const auto& r : results) {
    if (r.case_().bench() != v1::BENCH_FIND_SLOW || !r.has_find_slow())
      continue;
    const v1::FindSlowFigures& f = r.find_slow();
    if (f.tests().empty()) continue;
    BarPlot plot;
    plot.title =
        absl::StrFormat("%s: pair tests over %d %s", r.case_().spec_name(),
                        f.member_count(), f.members());
    plot.y_label = "GB/s";
    BarSeries bw{"pair GB/s", {}};
    BarSeries ref{"reference (median pair)", {}};
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : f.tests()) {
      plot.categories.push_back(
          absl::StrFormat("%d-%d %s", t.a(), t.b(), t.phase()));
      bw.values.push_back(t.gbps());
      ref.values.push_back(f.reference_gbps());
      rows.push_back(
          {t.phase(), std::to_string(t.a()), std::to_string(t.b()),
           Num(t.gbps()),
           f.reference_gbps() > 0 ? Num(t.gbps() / f.reference_gbps(), 3) : "",
           t.a_host() + " - " + t.b_host()});
    }
    plot.series = {bw, ref};
    Figure fig = FigureOf(plot);
    fig.caption = "Verdict: " + f.verdict();
    fig.table =
        Table({"phase", "a", "b", "GB/s", "vs reference", "hosts"}, rows);
    figures->push_back(std::move(fig));
  }
}

// ------------------------------------------------------------ telemetry

void Telemetry(const std::vector<v1::Result>& results,
               std::vector<Figure>* figures) {
  // Per device (job, rank, device): its samples by time, each once.
  struct Device {
    std::string name;
    std::map<double, v1::TelemetrySample> samples;
  };
  std::set<std::string> jobs;
  for (const auto& r : results)
    if (r.telemetry_size() > 0) jobs.insert(r.job_id());
  if (jobs.empty()) return;
  std::vector<std::string> order;
  std::map<std::string, Device> devices;
  for (const auto& r : results) {
    for (const auto& t : r.telemetry()) {
      std::string name =
          absl::StrFormat("rank %d %s %s", t.rank(), t.host(), t.device());
      if (jobs.size() > 1) name += " (" + r.job_id() + ")";
      auto [it, fresh] = devices.try_emplace(name);
      if (fresh) {
        order.push_back(name);
        it->second.name = name;
      }
      for (const auto& s : t.samples()) it->second.samples[s.t_s()] = s;
    }
  }
  struct Metric {
    const char* title;
    const char* unit;
    bool (v1::TelemetrySample::*has)() const;
    double (v1::TelemetrySample::*get)() const;
  };
  const Metric metrics[] = {
      {"clock (SM on GPUs, mean CPU clock on hosts)", "MHz",
       &v1::TelemetrySample::has_sm_clock_mhz,
       &v1::TelemetrySample::sm_clock_mhz},
      {"power", "W", &v1::TelemetrySample::has_power_w,
       &v1::TelemetrySample::power_w},
      {"temperature", "C", &v1::TelemetrySample::has_temperature_c,
       &v1::TelemetrySample::temperature_c},
      {"utilization", "%", &v1::TelemetrySample::has_utilization_pct,
       &v1::TelemetrySample::utilization_pct},
      {"memory clock", "MHz", &v1::TelemetrySample::has_mem_clock_mhz,
       &v1::TelemetrySample::mem_clock_mhz},
  };
  for (const Metric& m : metrics) {
    LinePlot plot;
    plot.title = std::string("telemetry: ") + m.title;
    plot.x_label = "seconds since the job started";
    plot.y_label =
        std::string(m.title).substr(0, std::string(m.title).find(" (")) + " (" +
        m.unit + ")";
    std::vector<std::vector<std::string>> rows;
    for (const auto& name : order) {
      LineSeries series;
      series.name = name;
      std::vector<double> values;
      for (const auto& [t, s] : devices[name].samples) {
        if (!(s.*m.has)()) continue;
        series.points.emplace_back(t, (s.*m.get)());
        values.push_back((s.*m.get)());
      }
      if (values.empty()) continue;
      std::sort(values.begin(), values.end());
      rows.push_back({name, std::to_string(values.size()), Num(values.front()),
                      Num(values[values.size() / 2]), Num(values.back())});
      plot.series.push_back(std::move(series));
    }
    if (plot.series.empty()) continue;
    Figure f = FigureOf(plot);
    f.caption =
        std::string("Sampled on each rank while cases ran (") + m.unit + ").";
    f.table = Table({"device", "samples", "min", "median", "max"}, rows);
    figures->push_back(std::move(f));
  }
}

std::string Throttled(const std::vector<v1::Result>& results) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : results) {
    if (!r.throttled()) continue;
    rows.push_back({r.job_id(), std::to_string(r.case_().seq()),
                    r.case_().spec_name(), r.throttle_detail()});
  }
  if (rows.empty()) return "";
  return Table({"job", "seq", "case", "slowdown while it ran"}, rows);
}

// ------------------------------------------------------------ failures

// Failed results only (skips are listed apart, by reason), each with what
// it measured and its size.
std::string Failures(const std::vector<v1::Result>& results) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : results) {
    if (r.status() != v1::FAILED) continue;
    const v1::Failure& f = r.failure();
    rows.push_back(
        {r.job_id(), std::to_string(r.case_().seq()), r.case_().spec_name(),
         BenchLabel(r.case_()),
         r.case_().size_bytes() > 0 ? FormatBytes(r.case_().size_bytes()) : "",
         v1::FailureReason_Name(f.reason()),
         f.rank() >= 0 ? std::to_string(f.rank()) : "", f.host(), f.detail()});
  }
  if (rows.empty()) return "";
  return Table({"job", "seq", "case", "what", "size", "reason", "rank", "host",
                "detail"},
               rows);
}

// Skipped cases, one line per reason with its count: expected on a machine
// that lacks what a case needs, so listed after the figures and folded.
std::string Skips(const std::vector<v1::Result>& results) {
  std::vector<std::string> order;
  std::map<std::string, int> count;
  for (const auto& r : results) {
    if (r.status() != v1::SKIPPED) continue;
    const std::string why = r.failure().detail().empty()
                                ? std::string("no reason given")
                                : r.failure().detail();
    if (count[why]++ == 0) order.push_back(why);
  }
  if (order.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& why : order)
    rows.push_back({why, std::to_string(count[why])});
  return Table({"why skipped", "cases"}, rows);
}

}  // namespace

std::string RenderHtmlReport(const std::vector<v1::Result>& results,
                             const HtmlReportOptions& o) {
  std::string html = absl::StrFormat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n<h1>%s</h1>\n",
      Esc(o.title), kStyle, Esc(o.title));
  int ok = 0, failed = 0, skipped = 0;
  for (const auto& r : results) {
    if (r.status() == v1::OK) {
      ++ok;
    } else if (r.status() == v1::SKIPPED) {
      ++skipped;
    } else {
      ++failed;
    }
  }
  html += absl::StrFormat(
      "<p>%d result%s: %d OK, <span class=\"%s\">%d failed</span>, %d "
      "skipped. Generated %s from %s.</p>\n",
      results.size(), results.size() == 1 ? "" : "s", ok,
      failed > 0 ? "bad" : "", failed, skipped, Esc(o.generated_at),
      Esc(absl::StrJoin(o.sources, ", ")));
  for (const std::string& end : o.job_ends)
    html += "<p class=\"bad\">" + Esc(end) + "</p>\n";
  if (std::string f = Failures(results); !f.empty())
    html += "<h2 class=\"bad\">Failures</h2>\n" + f;
  html += "<h2>Provenance</h2>\n" + Provenance(results);

  auto section = [&](const std::string& name,
                     const std::vector<Figure>& figures) {
    if (figures.empty()) return;
    html += "<h2>" + Esc(name) + "</h2>\n";
    for (const Figure& f : figures) html += RenderFigure(f);
  };
  std::vector<Figure> collectives, nodes, training, serving, finder, telemetry;
  Collectives(results, o, &collectives);
  NodeBenches(results, &nodes);
  Training(results, &training);
  Serving(results, &serving);
  FindSlow(results, &finder);
  Telemetry(results, &telemetry);
  section("Collectives", collectives);
  section("Node benchmarks", nodes);
  section("Training", training);
  section("LLM inference", serving);
  section("Bad-node finder", finder);
  section("Telemetry", telemetry);
  if (std::string t = Throttled(results); !t.empty())
    html += "<h2 class=\"warn\">Measured while throttled</h2>\n" + t;
  if (std::string nodes = RenderNodeSummary(results); !nodes.empty())
    html += "<h2>Nodes</h2>\n<pre>" + Esc(nodes) + "</pre>\n";
  if (std::string k = Skips(results); !k.empty()) {
    html += absl::StrFormat(
        "<h2>Skipped</h2>\n<details><summary>%d case%s skipped (what this "
        "machine or launch lacks)</summary>\n%s</details>\n",
        skipped, skipped == 1 ? "" : "s", k);
  }
  html += absl::StrFormat("<script>%s</script>\n</body></html>\n", kScript);
  return html;
}

}  // namespace ringmaster
