#include "core/yaml_read.h"

#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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
  // Names are one line of printable text: they head tables and logs.
  if (FirstControlCharacter(s, false) >= 0) {
    return Error(node, field,
                 "expected one line of printable text (no tab, newline or "
                 "control character)");
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

namespace ringmaster {
namespace {

// Hand-written UTF-8 check (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF): the byte offset of the first bad sequence, or
// -1. Sets `*c1` to the offset of the first C1 control (U+0080..U+009F).
int64_t FirstInvalidUtf8(std::string_view s, int64_t* c1) {
  *c1 = -1;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = b[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    for (int k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return static_cast<int64_t>(i);
    }
    if (cp >= 0x80 && cp <= 0x9F && *c1 < 0) *c1 = static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

int LineAt(std::string_view text, int64_t offset) {
  int line = 1;
  for (int64_t i = 0; i < offset && i < static_cast<int64_t>(text.size());
       ++i) {
    line += text[i] == '\n';
  }
  return line;
}

// The scalars of `node` (keys included) hold no control character, and no
// mapping repeats a key.
absl::Status CheckTree(const YAML::Node& node, const std::string& file,
                       int depth) {
  auto error = [&](const YAML::Node& at, const std::string& what) {
    const int line = at.Mark().is_null() ? 0 : at.Mark().line + 1;
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: (yaml): %s", file, line, what));
  };
  if (depth > 64) return error(node, "nesting too deep");
  if (node.IsScalar()) {
    const int64_t at = FirstControlCharacter(node.Scalar(), true);
    if (at >= 0) {
      return error(
          node, absl::StrFormat("control character 0x%02x in a value (a "
                                "plan's text is printable)",
                                static_cast<unsigned char>(
                                    node.Scalar()[static_cast<size_t>(at)])));
    }
    return absl::OkStatus();
  }
  if (node.IsSequence()) {
    for (const auto& item : node) {
      if (auto s = CheckTree(item, file, depth + 1); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : node) {
      if (auto s = CheckTree(kv.first, file, depth + 1); !s.ok()) return s;
      if (kv.first.IsScalar() && !seen.insert(kv.first.Scalar()).second) {
        return error(kv.first,
                     absl::StrFormat("key \"%s\" given twice in one mapping",
                                     kv.first.Scalar()));
      }
      if (auto s = CheckTree(kv.second, file, depth + 1); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t FirstControlCharacter(std::string_view text, bool allow_whitespace) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool whitespace = c == '\t' || c == '\n' || c == '\r';
    if ((c < 0x20 && !(allow_whitespace && whitespace)) || c == 0x7F)
      return static_cast<int64_t>(i);
    // C1 controls in UTF-8: 0xC2 0x80..0x9F.
    if (c == 0xC2 && i + 1 < text.size() &&
        static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9F)
      return static_cast<int64_t>(i);
  }
  return -1;
}

absl::StatusOr<YAML::Node> LoadYamlDocument(std::string_view text,
                                            const std::string& file) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: (yaml): a NUL byte at byte offset %d (not a text file?)", file,
        LineAt(text, static_cast<int64_t>(nul)), nul));
  }
  int64_t c1 = -1;
  if (const int64_t bad = FirstInvalidUtf8(text, &c1); bad >= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: (yaml): invalid UTF-8 at byte offset %d (byte 0x%02x)", file,
        LineAt(text, bad), bad,
        static_cast<unsigned char>(text[static_cast<size_t>(bad)])));
  }
  if (const int64_t ctl = FirstControlCharacter(text, true); ctl >= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: (yaml): control character 0x%02x at byte offset %d", file,
        LineAt(text, ctl),
        static_cast<unsigned char>(text[static_cast<size_t>(ctl)]), ctl));
  }
  // A second document: a `---` or `...` marker line after content. Found
  // in the text (yaml-cpp's LoadAll loops forever on some malformed input;
  // a marker cannot occur inside a scalar at column 0).
  bool content = false;
  int line_no = 0;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    const bool marker = line == "---" || absl::StartsWith(line, "--- ") ||
                        line == "..." || absl::StartsWith(line, "... ");
    if (marker && content) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: (yaml): a second YAML document; a file holds one (remove "
          "the `---` or split the file)",
          file, line_no));
    }
    const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(line);
    if (!marker && !stripped.empty() && stripped[0] != '#' &&
        !absl::StartsWith(line, "%"))
      content = true;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: (yaml): invalid YAML: %s", file, line, e.msg));
  }
  try {
    if (auto s = CheckTree(root, file, 0); !s.ok()) return s;
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: (yaml): %s", file, line, e.msg));
  }
  return root;
}

}  // namespace ringmaster
