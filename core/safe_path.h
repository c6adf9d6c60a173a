// Output paths that stay under a root folder, whatever the name a user gave
// and whatever another process does to the folders meanwhile.
//
// Two layers: NormalizeOutputName() checks a user's relative name
// lexically (no "..", no absolute path, a small character set), and the
// *Beneath() functions walk the name one component at a time with openat()
// and O_NOFOLLOW from an open descriptor of the root, so a symlink placed
// under the root before the call, or swapped in during it, is refused
// rather than followed (no check-then-use window). Hand-written: Debian 12's
// C++ libraries have no confinement helper (std::filesystem follows links).
#ifndef RINGMASTER_CORE_SAFE_PATH_H_
#define RINGMASTER_CORE_SAFE_PATH_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

inline constexpr size_t kMaxOutputNameBytes = 200;
inline constexpr int kMaxOutputNameDepth = 8;

// A relative output name ("nightly/h200-pair") in canonical form: '/'
// separated components of [A-Za-z0-9._-], none "." or "..", none starting
// with '.' or '-', no empty components (repeated or trailing '/' are
// dropped), at most kMaxOutputNameDepth components and kMaxOutputNameBytes
// bytes. Anything else is InvalidArgument naming what is wrong, e.g.
// "output: '..' is not allowed (names stay under the results root)".
absl::StatusOr<std::string> NormalizeOutputName(std::string_view name);

// An open directory descriptor that closes itself.
class DirFd {
 public:
  DirFd() = default;
  explicit DirFd(int fd) : fd_(fd) {}
  DirFd(DirFd&& o) noexcept : fd_(o.release()) {}
  DirFd& operator=(DirFd&& o) noexcept;
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  ~DirFd();
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Opens the folder `rel` (NormalizeOutputName's form, or "" for the root
// itself) beneath `root`, creating missing components (mode 0755) when
// `create`. `root` itself may be reached through symlinks (the operator
// chose it); nothing beneath it is: a symlink component fails with
// PermissionDenied naming it. Thread-safe (no process-wide state).
absl::StatusOr<DirFd> OpenDirBeneath(const std::string& root,
                                     std::string_view rel, bool create);

// Writes `content` to the file `name` (one component) in the open folder
// `dir`: a temporary file is written, flushed and renamed over `name`, so
// readers see the old file or the new one, and a symlink at `name` is
// replaced, never written through. Mode 0644.
absl::Status WriteFileAt(const DirFd& dir, std::string_view name,
                         std::string_view content);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_SAFE_PATH_H_
