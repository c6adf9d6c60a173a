#include "core/labels.h"

#include <map>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/names.h"
#include "core/units.h"

namespace ringmaster {

double RelativeCi(const v1::Stats& s) {
  if (!s.ci_on_median())
    return s.mean_s() > 0 ? s.ci95_half_width_s() / s.mean_s() : -1;
  if (s.median_ci95_high_s() <= 0 || s.median_s() <= 0) return -1;
  return (s.median_ci95_high_s() - s.median_ci95_low_s()) / 2 / s.median_s();
}

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  auto hex = [&out](unsigned char c) {
    absl::StrAppendFormat(&out, "\\x%02x", c);
  };
  for (size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      hex(c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      // A well-formed multi-byte sequence that is not a C1 control stays.
      const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
      bool ok = len > 0 && c <= 0xF4 && i + len <= n;
      for (size_t k = 1; ok && k < len; ++k) ok = (b[i + k] & 0xC0) == 0x80;
      if (ok && c == 0xC2 && b[i + 1] <= 0x9F) ok = false;  // C1
      if (!ok) {
        hex(c);
        ++i;
        continue;
      }
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    ++i;
  }
  return out;
}

namespace {

std::string UnescapedLabel(const v1::Case& c) {
  if (!c.kind().empty()) {
    // A plug-in kind: its name and parameters (sorted by name).
    std::vector<std::string> parts = {c.kind()};
    std::map<std::string, std::string> params(c.params().begin(),
                                              c.params().end());
    for (const auto& [k, v] : params) parts.push_back(k + "=" + v);
    return absl::StrJoin(parts, " ");
  }
  std::vector<std::string> parts = {std::string(BenchName(c.bench()))};
  if (c.method() != v1::COPY_METHOD_UNSPECIFIED)
    parts.emplace_back(CopyMethodName(c.method()));
  switch (c.bench()) {
    case v1::BENCH_P2P:
    case v1::BENCH_HOST_DEVICE:
      parts.emplace_back(CopyDirectionName(c.direction()));
      parts.emplace_back(c.bidirectional() ? "bidir" : "uni");
      if (c.bench() == v1::BENCH_HOST_DEVICE)
        parts.emplace_back(HostMemoryName(c.host_memory()));
      parts.emplace_back(TransferPatternName(c.pattern()));
      break;
    case v1::BENCH_LATENCY:
      parts.emplace_back(LatencyPathName(c.latency_path()));
      break;
    case v1::BENCH_GEMM:
      parts.emplace_back(DataTypeName(c.dtype()));
      break;
    case v1::BENCH_TRANSFORMER: {
      const v1::TransformerSpec& t = c.transformer();
      parts.push_back(absl::StrFormat(
          "%s L%d seq %d micro-batch %d %s %s",
          t.preset().empty()
              ? absl::StrFormat("h%d/%dq/%dkv/f%d", t.hidden(), t.heads(),
                                t.kv_heads(), t.ffn_hidden())
              : t.preset(),
          t.layers(), t.seq(), t.micro_batch(),
          c.dtype() == v1::DATA_TYPE_UNSPECIFIED ? "" : DataTypeName(c.dtype()),
          t.optimizer()));
      break;
    }
    case v1::BENCH_INFERENCE: {
      const v1::TransformerSpec& t = c.transformer();
      parts.push_back(absl::StrFormat(
          "%s L%d prompt %d + %d%s",
          t.preset().empty()
              ? absl::StrFormat("h%d/%dq/%dkv/f%d", t.hidden(), t.heads(),
                                t.kv_heads(), t.ffn_hidden())
              : t.preset(),
          t.layers(), c.serve().prompt(), c.serve().generate(),
          c.dtype() == v1::DATA_TYPE_UNSPECIFIED
              ? ""
              : std::string(" ") + std::string(DataTypeName(c.dtype()))));
      break;
    }
    case v1::BENCH_TRAIN: {
      const v1::TrainSpec& t = c.train();
      if (t.inference()) {
        // Forward passes: "inference", never "train".
        parts[0] = "inference";
        parts.push_back(absl::StrFormat(
            "L%d H%d B%d%s %s", t.layers(), t.hidden(), t.batch(),
            t.strong() ? " global" : "/rank", DataTypeName(c.dtype())));
        break;
      }
      parts.push_back(absl::StrFormat(
          "L%d H%d B%d%s %s %s %s, bucket %s%s%s", t.layers(), t.hidden(),
          t.batch(), t.strong() ? " global" : "/rank", DataTypeName(c.dtype()),
          t.optimizer(),
          t.schedule() == "pipelined" ? "pipelined"
          : t.overlap()               ? "overlap"
                                      : "no-overlap",
          FormatBytes(t.bucket_bytes()), t.comm() == "ce" ? ", comm ce" : "",
          t.schedule() == "pipelined" && t.deferred_layers() > 0
              ? absl::StrFormat(", %d deferred", t.deferred_layers())
              : ""));
      if (t.master_weights() &&
          (c.dtype() == v1::BFLOAT16 || c.dtype() == v1::FLOAT16))
        parts.back() += ", fp32 master";
      if (t.loss_scale() > 0)
        parts.back() += absl::StrFormat(", loss scale %g", t.loss_scale());
      if (t.gemm() == "heuristic") parts.back() += ", heuristic GEMMs";
      break;
    }
    default:
      parts.emplace_back(TransferPatternName(c.pattern()));
      break;
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace

std::string BenchLabel(const v1::Case& c) {
  return Printable(UnescapedLabel(c));
}

}  // namespace ringmaster
