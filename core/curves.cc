#include "core/curves.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/labels.h"
#include "core/names.h"
#include "core/stats.h"
#include "core/units.h"

namespace ringmaster {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string Choice(const v1::Result& r) {
  if (r.nccl_algorithm().empty()) return "";
  return r.nccl_protocol().empty()
             ? r.nccl_algorithm()
             : r.nccl_algorithm() + "/" + r.nccl_protocol();
}

// One measured size of a series, over its runs.
struct Point {
  std::vector<double> gbps;
  double low = kInf;   // the lowest of the runs' interval bounds
  double high = 0;     // the highest
  std::string choice;  // the first run's NCCL choice that has one
};

// busbw is bytes over time, so a relative half-width c of the time's 95%
// interval maps to [bw / (1 + c), bw / (1 - c)]; no interval (one sample)
// leaves the point as measured, and c >= 1 leaves no upper bound.
void AddRun(const v1::Result& r, Point* p) {
  const double bw = r.busbw_gbps();
  const double c = RelativeCi(r.stats());
  const double low = c > 0 ? bw / (1 + c) : bw;
  const double high = c <= 0 ? bw : c < 1 ? bw / (1 - c) : kInf;
  p->gbps.push_back(bw);
  p->low = std::min(p->low, low);
  p->high = std::max(p->high, high);
  if (p->choice.empty()) p->choice = Choice(r);
}

}  // namespace

std::string CollectiveSeriesLabel(const v1::Result& r,
                                  const std::set<std::string>& vary) {
  const v1::Case& c = r.case_();
  std::vector<std::string> parts;
  if (vary.count("spec")) parts.push_back(c.spec_name());
  // Curves of several plans in one plot: their case names alone can differ
  // in spelling only ("allreduce", "all_reduce"); the job tells them apart.
  if (vary.count("spec") && vary.count("job"))
    parts.push_back("(job " + r.job_id() + ")");
  if (vary.count("variant"))
    parts.push_back(c.variant().empty() ? "default" : c.variant());
  if (vary.count("dtype")) parts.emplace_back(DataTypeName(c.dtype()));
  if (vary.count("op") && IsReduction(c.collective()))
    parts.emplace_back(ReduceOpName(c.op()));
  if (vary.count("place")) parts.push_back(c.in_place() ? "in-place" : "out");
  if (parts.empty()) parts.push_back(c.spec_name());
  return absl::StrJoin(parts, " ");
}

std::string DropSpanText(const CurveDrop& d) {
  return absl::StrFormat("%s -> %s: %.4g -> %.4g GB/s (%+.0f%%",
                         FormatBytes(d.from_size), FormatBytes(d.to_size),
                         d.from_gbps, d.to_gbps,
                         100 * (d.to_gbps / d.from_gbps - 1));
}

std::string DropChoiceText(const CurveDrop& d) {
  if (d.from_choice.empty() && d.to_choice.empty()) return "";
  if (d.from_choice == d.to_choice)
    return absl::StrFormat("NCCL %s on both", d.from_choice);
  return absl::StrFormat("NCCL %s -> %s",
                         d.from_choice.empty() ? "?" : d.from_choice,
                         d.to_choice.empty() ? "?" : d.to_choice);
}

std::vector<CollectiveGroup> GroupCollectiveResults(
    const std::vector<v1::Result>& results) {
  std::vector<CollectiveGroup> groups;
  std::map<std::string, size_t> index;
  for (const auto& r : results) {
    const v1::Case& c = r.case_();
    if (c.bench() != v1::BENCH_COLLECTIVE || r.status() != v1::OK ||
        r.busbw_gbps() <= 0)
      continue;
    std::string title = absl::StrFormat(
        "%s, %d ranks, %s timing", CollectiveName(c.collective()), r.nranks(),
        TimingModeName(r.timing_mode()));
    auto [it, fresh] = index.try_emplace(title, groups.size());
    if (fresh) groups.push_back({title, {}, {}});
    groups[it->second].results.push_back(&r);
  }
  for (CollectiveGroup& g : groups) {
    std::map<std::string, std::set<std::string>> values;
    for (const v1::Result* r : g.results) {
      const v1::Case& c = r->case_();
      values["spec"].insert(c.spec_name());
      values["job"].insert(r->job_id());
      values["variant"].insert(c.variant());
      values["dtype"].insert(std::string(DataTypeName(c.dtype())));
      values["op"].insert(std::string(ReduceOpName(c.op())));
      values["place"].insert(c.in_place() ? "in" : "out");
    }
    for (const auto& [k, v] : values)
      if (v.size() > 1) g.vary.insert(k);
  }
  return groups;
}

std::vector<BusbwCurve> BusbwCurves(const std::vector<v1::Result>& results) {
  std::vector<BusbwCurve> curves;
  for (const CollectiveGroup& g : GroupCollectiveResults(results)) {
    std::vector<std::string> series_order;
    std::map<std::string, std::map<int64_t, Point>> series;
    for (const v1::Result* r : g.results) {
      std::string label = CollectiveSeriesLabel(*r, g.vary);
      if (!series.count(label)) series_order.push_back(label);
      AddRun(*r, &series[label][r->case_().size_bytes()]);
    }
    for (const auto& label : series_order) {
      const auto& points = series[label];  // ascending size
      if (points.size() < 3) continue;
      BusbwCurve curve;
      curve.group = g.title;
      curve.series = label;
      curve.points = static_cast<int>(points.size());
      struct Measured {
        int64_t size;
        double gbps;  // the median of the point's runs
        const Point* point;
      };
      std::vector<Measured> m;
      for (const auto& [size, p] : points)
        m.push_back({size, Median(p.gbps), &p});
      for (const Measured& x : m) {
        if (x.gbps > curve.peak_gbps) {
          curve.peak_gbps = x.gbps;
          curve.peak_size = x.size;
        }
      }
      for (const Measured& x : m) {
        if (curve.half_size == 0 && x.gbps >= 0.5 * curve.peak_gbps)
          curve.half_size = x.size;
        if (curve.ninety_size == 0 && x.gbps >= 0.9 * curve.peak_gbps)
          curve.ninety_size = x.size;
      }
      for (size_t i = 1; i < m.size(); ++i) {
        const Measured& a = m[i - 1];
        const Measured& b = m[i];
        if (b.gbps <= (1 - kCurveDropShare) * a.gbps &&
            b.point->high < a.point->low) {
          curve.drops.push_back({a.size, b.size, a.gbps, b.gbps,
                                 a.point->choice, b.point->choice});
        }
      }
      curves.push_back(std::move(curve));
    }
  }
  return curves;
}

std::string RenderBusbwCurves(const std::vector<v1::Result>& results) {
  const std::vector<BusbwCurve> curves = BusbwCurves(results);
  if (curves.empty()) return "";
  std::string out = absl::StrFormat(
      "# busbw curves: the peak, the first size at 50%% and at 90%% of it, "
      "and drops (%.0f%%+ from one size to the next, outside both 95%% "
      "intervals)\n",
      100 * kCurveDropShare);
  std::string group;
  for (const BusbwCurve& c : curves) {
    if (c.group != group) {
      group = c.group;
      out += "#   " + group + "\n";
    }
    out += absl::StrFormat(
        "    %-24s peak %9.4g GB/s at %9s   50%% at %9s   90%% at %9s   "
        "%d sizes%s\n",
        c.series, c.peak_gbps, FormatBytes(c.peak_size),
        FormatBytes(c.half_size), FormatBytes(c.ninety_size), c.points,
        c.drops.empty() ? "" : "  <- drops");
    for (const CurveDrop& d : c.drops) {
      std::string choice = DropChoiceText(d);
      if (!choice.empty()) choice = "; " + choice;
      out += "      drop " + DropSpanText(d) + ")" + choice + "\n";
    }
  }
  return out;
}

}  // namespace ringmaster
