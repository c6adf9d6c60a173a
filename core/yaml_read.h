// One YAML reading layer for every file Ringmaster reads (plans, topologies,
// rules): scalars as integers, numbers, booleans, sizes and durations, lists
// of scalars and key checks, each error one line "file:line: field: what
// was expected" naming where the value was written.
#ifndef RINGMASTER_CORE_YAML_READ_H_
#define RINGMASTER_CORE_YAML_READ_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster {

class YamlReader {
 public:
  // `file` names the document in messages. Sizes above `max_size_bytes`
  // and lists longer than `max_list_entries` are errors.
  explicit YamlReader(std::string file,
                      int64_t max_size_bytes = int64_t{1} << 40,
                      int max_list_entries = 1024)
      : file_(std::move(file)),
        max_size_bytes_(max_size_bytes),
        max_list_entries_(max_list_entries) {}

  const std::string& file() const { return file_; }

  // InvalidArgument "file:line: field: what" at `node`'s line.
  absl::Status Error(const YAML::Node& node, std::string_view field,
                     std::string_view what) const;

  absl::Status CheckKeys(const YAML::Node& map, const std::string& prefix,
                         std::span<const char* const> allowed) const;

  absl::StatusOr<std::string> String(const YAML::Node& node,
                                     const std::string& field) const;

  absl::StatusOr<std::string> RequiredString(const YAML::Node& parent,
                                             const YAML::Node& node,
                                             const std::string& field) const;

  absl::StatusOr<int64_t> Int(const YAML::Node& node, const std::string& field,
                              int64_t min, int64_t max) const;

  absl::StatusOr<double> Number(const YAML::Node& node,
                                const std::string& field, double min_exclusive,
                                double max_inclusive) const;

  // One of two keywords (case-insensitive), lowercased.
  absl::StatusOr<std::string> OneOf(const YAML::Node& node,
                                    const std::string& field, const char* a,
                                    const char* b) const;

  absl::StatusOr<bool> Bool(const YAML::Node& node,
                            const std::string& field) const;

  absl::StatusOr<int64_t> Size(const YAML::Node& node,
                               const std::string& field) const;

  absl::StatusOr<double> Duration(const YAML::Node& node,
                                  const std::string& field) const;

  static std::string Show(const YAML::Node& node);

  // A scalar or a list of scalars, as a list of (node, text) pairs.
  absl::StatusOr<std::vector<YAML::Node>> ScalarList(
      const YAML::Node& node, const std::string& field) const;

 protected:
  std::string file_;
  int64_t max_size_bytes_;
  int max_list_entries_;
};

// Parses `text` as exactly one YAML document for a file Ringmaster reads.
// Refused, each with "file:line: (yaml): ...": a NUL byte, bytes that are
// not UTF-8 (with their byte offset), control characters other than tab,
// newline and carriage return (raw, or written as escapes inside a quoted
// scalar), a second document, and a key given twice in one mapping.
absl::StatusOr<YAML::Node> LoadYamlDocument(std::string_view text,
                                            const std::string& file);

// The first control character (C0 other than tab, newline and carriage
// return, DEL, or a C1 code point) in UTF-8 `text`: its byte offset, or -1.
int64_t FirstControlCharacter(std::string_view text, bool allow_whitespace);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_YAML_READ_H_
