#include "core/result_io.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ringmaster {

namespace fs = std::filesystem;

absl::StatusOr<v1::Result> ParseResultLine(std::string_view line) {
  v1::Result r;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &r, opts);
  if (!status.ok())
    return absl::InvalidArgumentError(std::string(status.message()));
  return r;
}

absl::Status ForEachResult(const std::vector<std::string>& files,
                           const std::function<void(const v1::Result&)>& fn) {
  for (const std::string& path : files) {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(path + ": cannot read");
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      auto r = ParseResultLine(line);
      if (!r.ok()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s:%d: not a result (JSON Lines from ringmaster run --out or "
            "ringmaster results --format jsonl)",
            path, lineno));
      }
      fn(*r);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ResultFiles(
    const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(
               in, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file() && it->path().filename() == "results.jsonl")
          found.push_back(it->path().string());
      }
      if (found.empty()) {
        return absl::NotFoundError(
            in +
            ": no results.jsonl in this folder (expected a `ringmaster "
            "run --out` folder or a JSON Lines file)");
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(in, ec)) {
      files.push_back(in);
    } else {
      return absl::NotFoundError(in + ": no such file or folder");
    }
  }
  return files;
}

absl::StatusOr<std::vector<v1::Result>> LoadResults(
    const std::vector<std::string>& inputs) {
  auto files = ResultFiles(inputs);
  if (!files.ok()) return files.status();
  std::vector<v1::Result> out;
  std::set<std::string> seen;
  absl::Status st = ForEachResult(*files, [&](const v1::Result& r) {
    if (!r.idempotency_key().empty() &&
        !seen.insert(r.idempotency_key()).second)
      return;
    out.push_back(r);
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace ringmaster
