#include "core/units.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace ringmaster {
namespace {

// Splits "64KiB" into number "64" and suffix "KiB" (whitespace allowed).
// Debian's Abseil has its own string_view type, distinct from std's.
void SplitNumber(std::string_view std_text, absl::string_view* number,
                 absl::string_view* suffix) {
  absl::string_view text = absl::StripAsciiWhitespace(
      absl::string_view(std_text.data(), std_text.size()));
  size_t i = 0;
  while (i < text.size() &&
         (absl::ascii_isdigit(text[i]) || text[i] == '.' || text[i] == '-' ||
          text[i] == '+' || text[i] == 'e' || text[i] == 'E')) {
    // 'e' is an exponent only when followed by a digit or sign.
    if ((text[i] == 'e' || text[i] == 'E') &&
        (i + 1 >= text.size() || !(absl::ascii_isdigit(text[i + 1]) ||
                                   text[i + 1] == '-' || text[i + 1] == '+'))) {
      break;
    }
    ++i;
  }
  *number = text.substr(0, i);
  *suffix = absl::StripAsciiWhitespace(text.substr(i));
}

}  // namespace

absl::StatusOr<int64_t> ParseSizeBytes(std::string_view text) {
  absl::string_view number, suffix;
  SplitNumber(text, &number, &suffix);
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) ||
      !std::isfinite(value)) {
    return absl::InvalidArgumentError("expected a size like 8B, 64KiB or 1GiB");
  }
  if (value < 0) return absl::InvalidArgumentError("size must not be negative");
  double multiplier = 0;
  std::string unit = absl::AsciiStrToLower(std::string(suffix));
  if (unit.empty() || unit == "b") {
    multiplier = 1;
  } else if (unit == "kib" || unit == "k") {
    multiplier = 1024.0;
  } else if (unit == "mib" || unit == "m") {
    multiplier = 1024.0 * 1024;
  } else if (unit == "gib" || unit == "g") {
    multiplier = 1024.0 * 1024 * 1024;
  } else if (unit == "tib" || unit == "t") {
    multiplier = 1024.0 * 1024 * 1024 * 1024;
  } else if (unit == "kb") {
    multiplier = 1e3;
  } else if (unit == "mb") {
    multiplier = 1e6;
  } else if (unit == "gb") {
    multiplier = 1e9;
  } else if (unit == "tb") {
    multiplier = 1e12;
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown size unit \"%s\" (expected B, KiB, MiB, GiB, TiB, KB, MB, "
        "GB or TB)",
        suffix));
  }
  double bytes = value * multiplier;
  if (bytes >= 9.2e18) return absl::InvalidArgumentError("size is too large");
  if (bytes != std::floor(bytes)) {
    return absl::InvalidArgumentError("size must be a whole number of bytes");
  }
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<double> ParseDurationSeconds(std::string_view text) {
  absl::string_view number, suffix;
  SplitNumber(text, &number, &suffix);
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) ||
      !std::isfinite(value)) {
    return absl::InvalidArgumentError("expected a duration like 2s or 500ms");
  }
  if (value < 0) {
    return absl::InvalidArgumentError("duration must not be negative");
  }
  std::string unit = absl::AsciiStrToLower(std::string(suffix));
  double seconds = 0;
  if (unit.empty() || unit == "s") {
    seconds = value;
  } else if (unit == "ms") {
    seconds = value * 1e-3;
  } else if (unit == "us") {
    seconds = value * 1e-6;
  } else if (unit == "ns") {
    seconds = value * 1e-9;
  } else if (unit == "m" || unit == "min") {
    seconds = value * 60;
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown duration unit \"%s\" (expected s, ms, us, ns or min)",
        suffix));
  }
  if (!std::isfinite(seconds) || seconds > kMaxDurationSeconds) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "duration must be at most %.0f s (30 days)", kMaxDurationSeconds));
  }
  return seconds;
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB",
                                           "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%d B", bytes);
  return absl::StrFormat("%.4g %s", value, kUnits[unit]);
}

}  // namespace ringmaster
