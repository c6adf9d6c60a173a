#include "core/faults.h"

#include <chrono>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ringmaster {

absl::StatusOr<std::vector<Fault>> ParseFaults(std::string_view std_text) {
  absl::string_view text(std_text.data(), std_text.size());
  std::vector<Fault> faults;
  for (absl::string_view item :
       absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    std::vector<std::string> parts =
        absl::StrSplit(absl::StripAsciiWhitespace(item), ':');
    Fault f;
    const std::string& kind = parts[0];
    if (kind == "crash") {
      f.kind = Fault::Kind::kCrash;
    } else if (kind == "exit") {
      f.kind = Fault::Kind::kExit;
    } else if (kind == "hang") {
      f.kind = Fault::Kind::kHang;
    } else if (kind == "corrupt") {
      f.kind = Fault::Kind::kCorrupt;
    } else if (kind == "mismatch") {
      f.kind = Fault::Kind::kMismatch;
    } else if (kind == "linger") {
      f.kind = Fault::Kind::kLinger;
    } else if (kind == "slow") {
      f.kind = Fault::Kind::kSlow;
    } else if (kind == "hog") {
      f.kind = Fault::Kind::kHog;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "RINGMASTER_FAULT: unknown fault \"%s\" (expected crash, exit, hang, "
          "corrupt, mismatch, linger, slow or hog)",
          kind));
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      std::pair<std::string, std::string> kv = absl::StrSplit(parts[i], '=');
      if (kv.first == "factor") {
        double factor = 0;
        if (!absl::SimpleAtod(kv.second, &factor) || !(factor >= 1) ||
            factor > 1000) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "RINGMASTER_FAULT: \"%s\" needs a number from 1 to 1000",
              parts[i]));
        }
        f.factor = factor;
        continue;
      }
      int64_t v = 0;
      if (!absl::SimpleAtoi(kv.second, &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "RINGMASTER_FAULT: \"%s\" needs a non-negative integer", parts[i]));
      }
      if (kv.first == "rank") {
        f.rank = static_cast<int>(v);
      } else if (kv.first == "seq") {
        f.seq = v;
      } else if (kv.first == "bytes") {
        f.bytes = v;
      } else {
        return absl::InvalidArgumentError(absl::StrFormat(
            "RINGMASTER_FAULT: unknown field \"%s\" (expected rank, seq, "
            "factor or bytes)",
            kv.first));
      }
    }
    faults.push_back(f);
  }
  return faults;
}

std::optional<Fault> FindFault(const std::vector<Fault>& faults,
                               Fault::Kind kind, int rank,
                               std::optional<int64_t> seq) {
  for (const Fault& f : faults) {
    if (f.kind != kind) continue;
    if (f.rank >= 0 && f.rank != rank) continue;
    if (seq && f.seq != *seq) continue;
    return f;
  }
  return std::nullopt;
}

double SlowFactor(const std::vector<Fault>& faults, int rank) {
  auto f = FindFault(faults, Fault::Kind::kSlow, rank);
  return f ? f->factor : 1.0;
}

void SpinFor(double seconds) {
  if (!(seconds > 0)) return;
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace ringmaster
