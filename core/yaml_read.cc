#include "core/yaml_read.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/units.h"

namespace ringmaster {

absl::Status YamlReader::Error(const YAML::Node& node, std::string_view field,
                               std::string_view what) const {
  int line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s: %s", file_, line, field, what));
}

absl::Status YamlReader::CheckKeys(const YAML::Node& map,
                                   const std::string& prefix,
                                   std::span<const char* const> allowed) const {
  for (const auto& kv : map) {
    std::string key = kv.first.Scalar();
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) {
      std::vector<std::string> names(std::begin(allowed), std::end(allowed));
      return Error(kv.first, prefix + key,
                   absl::StrFormat("unknown key (expected one of: %s)",
                                   absl::StrJoin(names, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> YamlReader::String(const YAML::Node& node,
                                               const std::string& field) const {
  if (!node.IsScalar()) return Error(node, field, "expected a string");
  return node.Scalar();
}

absl::StatusOr<std::string> YamlReader::RequiredString(
    const YAML::Node& parent, const YAML::Node& node,
    const std::string& field) const {
  if (!node) return Error(parent, field, "missing: expected a string");
  RM_ASSIGN_OR_RETURN(std::string s, String(node, field));
  if (absl::StripAsciiWhitespace(s).empty()) {
    return Error(node, field, "expected a non-empty string");
  }
  return s;
}

absl::StatusOr<int64_t> YamlReader::Int(const YAML::Node& node,
                                        const std::string& field, int64_t min,
                                        int64_t max) const {
  int64_t v = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
    return Error(node, field,
                 absl::StrFormat("expected an integer, got %s", Show(node)));
  }
  if (v < min || v > max) {
    return Error(node, field,
                 absl::StrFormat("expected an integer in [%d, %d], got %d", min,
                                 max, v));
  }
  return v;
}

absl::StatusOr<double> YamlReader::Number(const YAML::Node& node,
                                          const std::string& field,
                                          double min_exclusive,
                                          double max_inclusive) const {
  double v = 0;
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) ||
      !std::isfinite(v)) {
    return Error(node, field,
                 absl::StrFormat("expected a number, got %s", Show(node)));
  }
  if (!(v > min_exclusive && v <= max_inclusive)) {
    return Error(node, field,
                 absl::StrFormat("expected a number in (%g, %g], got %g",
                                 min_exclusive, max_inclusive, v));
  }
  return v;
}

// One of two keywords (case-insensitive), lowercased.
absl::StatusOr<std::string> YamlReader::OneOf(const YAML::Node& node,
                                              const std::string& field,
                                              const char* a,
                                              const char* b) const {
  std::string v = node.IsScalar() ? absl::AsciiStrToLower(node.Scalar()) : "";
  if (v != a && v != b) {
    return Error(
        node, field,
        absl::StrFormat("expected %s or %s, got %s", a, b, Show(node)));
  }
  return v;
}

absl::StatusOr<bool> YamlReader::Bool(const YAML::Node& node,
                                      const std::string& field) const {
  if (node.IsScalar()) {
    std::string s = absl::AsciiStrToLower(node.Scalar());
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  return Error(node, field,
               absl::StrFormat("expected true or false, got %s", Show(node)));
}

absl::StatusOr<int64_t> YamlReader::Size(const YAML::Node& node,
                                         const std::string& field) const {
  if (!node.IsScalar()) {
    return Error(node, field, "expected a size like 8B, 64KiB or 1GiB");
  }
  auto size = ParseSizeBytes(node.Scalar());
  if (!size.ok()) {
    return Error(node, field,
                 absl::StrFormat("%s, got \"%s\"", size.status().message(),
                                 node.Scalar()));
  }
  if (*size < 1) {
    return Error(node, field, "size must be at least 1 byte");
  }
  if (*size > max_size_bytes_) {
    return Error(
        node, field,
        absl::StrFormat("size must be at most %s, got %s",
                        FormatBytes(max_size_bytes_), FormatBytes(*size)));
  }
  return *size;
}

absl::StatusOr<double> YamlReader::Duration(const YAML::Node& node,
                                            const std::string& field) const {
  if (!node.IsScalar()) {
    return Error(node, field, "expected a duration like 2s or 500ms");
  }
  auto d = ParseDurationSeconds(node.Scalar());
  if (!d.ok()) {
    return Error(
        node, field,
        absl::StrFormat("%s, got \"%s\"", d.status().message(), node.Scalar()));
  }
  if (*d <= 0) return Error(node, field, "duration must be positive");
  return *d;
}

std::string YamlReader::Show(const YAML::Node& node) {
  if (node.IsScalar()) return absl::StrFormat("\"%s\"", node.Scalar());
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

// A scalar or a list of scalars, as a list of (node, text) pairs.
absl::StatusOr<std::vector<YAML::Node>> YamlReader::ScalarList(
    const YAML::Node& node, const std::string& field) const {
  std::vector<YAML::Node> out;
  if (node.IsScalar()) {
    out.push_back(node);
  } else if (node.IsSequence()) {
    if (node.size() == 0)
      return Error(node, field, "expected a non-empty list");
    if (static_cast<int>(node.size()) > max_list_entries_) {
      return Error(
          node, field,
          absl::StrFormat("at most %d entries are allowed", max_list_entries_));
    }
    for (size_t i = 0; i < node.size(); ++i) {
      if (!node[i].IsScalar()) {
        return Error(node[i], absl::StrFormat("%s[%d]", field, i),
                     "expected a single value");
      }
      out.push_back(node[i]);
    }
  } else {
    return Error(node, field, "expected a value or a list of values");
  }
  return out;
}

}  // namespace ringmaster
