// Parsing and printing of sizes and durations as people write them in plans.
//
// Sizes: "8", "8B", "64KiB", "1MiB", "8GiB" (binary) and "1KB", "1MB",
// "1GB" (decimal, 1e3 steps). Durations: "2s", "500ms", "250us", or a
// plain number of seconds.
#ifndef RINGMASTER_CORE_UNITS_H_
#define RINGMASTER_CORE_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringmaster {

// Parses a byte count. Rejects negatives, fractions of a byte and overflow.
absl::StatusOr<int64_t> ParseSizeBytes(std::string_view text);

// The longest duration a plan or an option may give: 30 days.
inline constexpr double kMaxDurationSeconds = 30.0 * 24 * 3600;

// Parses a duration to seconds. Rejects negatives, NaN, infinity and more than
// kMaxDurationSeconds.
absl::StatusOr<double> ParseDurationSeconds(std::string_view text);

// "8 B", "64 KiB", "1.5 MiB": binary units, at most 3 significant decimals.
std::string FormatBytes(int64_t bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_UNITS_H_
