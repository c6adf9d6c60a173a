// Reading stored results back: JSON Lines files (`ringmaster run --out`,
// `ringmaster results --format jsonl`) and the folders that hold them.
#ifndef RINGMASTER_CORE_RESULT_IO_H_
#define RINGMASTER_CORE_RESULT_IO_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// One JSON Lines record as a result (unknown fields ignored: newer
// writers). InvalidArgument when it is not one.
absl::StatusOr<v1::Result> ParseResultLine(std::string_view line);

// Calls `fn` with every result of the JSON Lines files, in order; a line that
// is not a result is an error naming the file and line. Blank lines are
// skipped; unknown fields are ignored (newer writers).
absl::Status ForEachResult(const std::vector<std::string>& files,
                           const std::function<void(const v1::Result&)>& fn);

// The files behind `inputs`: a file is itself; a folder is every
// results.jsonl below it (a `--out` root holds one folder per job), sorted.
// A folder with none, or a missing path, is an error.
absl::StatusOr<std::vector<std::string>> ResultFiles(
    const std::vector<std::string>& inputs);

// Every result of `inputs` (files or folders). A result whose idempotency
// key was already read (the same file given twice, a folder and a file in
// it) is kept once, the first time.
absl::StatusOr<std::vector<v1::Result>> LoadResults(
    const std::vector<std::string>& inputs);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_RESULT_IO_H_
