#include "core/safe_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"

namespace ringmaster {

namespace {

// '/'-separated components, empty ones dropped. (Debian's Abseil has its
// own string_view type, so absl::StrSplit does not take std::string_view.)
std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

// Printable for messages: control and non-ASCII bytes as \xNN.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '\'') {
      out += absl::StrFormat("\\x%02x", u);
    } else {
      out += c;
    }
  }
  if (s.size() > 64) out += "...";
  return out;
}

absl::Status Errno(std::string_view what, std::string_view path, int err) {
  std::string msg = absl::StrFormat("%s %s: %s", what, path, strerror(err));
  if (err == ELOOP || err == ENOTDIR || err == EMLINK)
    return absl::PermissionDeniedError(
        msg + " (a symlink or non-folder under the results root is refused)");
  return absl::InternalError(msg);
}

}  // namespace

absl::StatusOr<std::string> NormalizeOutputName(std::string_view name) {
  if (name.size() > kMaxOutputNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("output: %d bytes, expected at most %d", name.size(),
                        kMaxOutputNameBytes));
  }
  if (!name.empty() && name.front() == '/') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "output: '%s' is absolute; expected a name relative to the results "
        "root",
        Printable(name)));
  }
  std::vector<std::string_view> parts;
  for (std::string_view part : Components(name)) {
    if (part == ".") continue;
    if (part == "..") {
      return absl::InvalidArgumentError(
          "output: '..' is not allowed (names stay under the results root)");
    }
    for (char c : part) {
      if (!NameChar(c)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "output: '%s' has the character '%s'; expected letters, digits, "
            "'.', '_', '-' and '/'",
            Printable(name), Printable(std::string_view(&c, 1))));
      }
    }
    if (part.front() == '.' || part.front() == '-') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "output: component '%s' starts with '%c'; expected a letter, digit "
          "or '_'",
          Printable(part), part.front()));
    }
    parts.push_back(part);
  }
  if (parts.empty()) return absl::InvalidArgumentError("output: empty name");
  if (static_cast<int>(parts.size()) > kMaxOutputNameDepth) {
    return absl::InvalidArgumentError(
        absl::StrFormat("output: %d levels, expected at most %d", parts.size(),
                        kMaxOutputNameDepth));
  }
  std::string out;
  for (std::string_view part : parts) {
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

DirFd& DirFd::operator=(DirFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}

DirFd::~DirFd() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<DirFd> OpenDirBeneath(const std::string& root,
                                     std::string_view rel, bool create) {
  if (create) {
    // The root may not exist yet: create it the ordinary way (its own
    // path is the operator's choice, links included).
    if (mkdir(root.c_str(), 0755) != 0 && errno != EEXIST)
      return Errno("cannot create", root, errno);
  }
  DirFd dir(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return Errno("cannot open", root, errno);
  std::string walked = root;
  for (std::string_view part : Components(rel)) {
    // The lexical rules again: this is the last line, whatever the caller.
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrFormat("'%s': '.' and '..' are not allowed", rel));
    }
    const std::string component(part);
    walked += "/" + component;
    if (create && mkdirat(dir.get(), component.c_str(), 0755) != 0 &&
        errno != EEXIST) {
      return Errno("cannot create", walked, errno);
    }
    // O_NOFOLLOW + O_DIRECTORY: a symlink here fails (ELOOP), whether it
    // was there before or swapped in after the mkdirat above.
    int next = openat(dir.get(), component.c_str(),
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) return Errno("cannot open", walked, errno);
    dir = DirFd(next);
  }
  return dir;
}

absl::Status WriteFileAt(const DirFd& dir, std::string_view name,
                         std::string_view content) {
  const std::string target(name);
  if (target.empty() || target == "." || target == ".." ||
      target.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s': expected one file name", Printable(name)));
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = absl::StrFormat(".%s.%016x.tmp", target, rng());
  // O_EXCL | O_NOFOLLOW: never opens an existing file or a planted link.
  int fd = openat(dir.get(), tmp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp, errno);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      unlinkat(dir.get(), tmp.c_str(), 0);
      return Errno("cannot write", tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    int err = errno;
    unlinkat(dir.get(), tmp.c_str(), 0);
    return Errno("cannot flush", tmp, err);
  }
  // renameat replaces a symlink at `target` itself; it never follows it.
  if (renameat(dir.get(), tmp.c_str(), dir.get(), target.c_str()) != 0) {
    int err = errno;
    unlinkat(dir.get(), tmp.c_str(), 0);
    return Errno("cannot rename into", target, err);
  }
  return absl::OkStatus();
}

}  // namespace ringmaster
