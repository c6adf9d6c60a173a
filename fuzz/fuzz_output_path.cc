// S3 fuzz target: the output-path sanitizer. A name either fails with
// "output:" or normalizes to a canonical relative name that is stable,
// never absolute and never holds "..", and whose folders, created beneath
// a scratch root, stay beneath it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/safe_path.h"

namespace {

const std::string& Root() {
  // Never destroyed: the exit handler that removes the tree reads it.
  static const std::string* root = [] {
    char tmpl[] = "/tmp/ringmaster-fuzz-path-XXXXXX";
    const char* made = mkdtemp(tmpl);
    if (!made) abort();
    auto* path = new std::string(made);
    // Removed with the process (libFuzzer ends with exit()).
    std::atexit([] { std::filesystem::remove_all(Root()); });
    return path;
  }();
  return *root;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  std::string_view name(reinterpret_cast<const char*>(data), size);
  auto normal = ringmaster::NormalizeOutputName(name);
  if (!normal.ok()) {
    if (normal.status().message().rfind("output:", 0) != 0) __builtin_trap();
    return 0;
  }
  const std::string& n = *normal;
  if (n.empty() || n.front() == '/' || n.back() == '/') __builtin_trap();
  if (("/" + n + "/").find("/../") != std::string::npos) __builtin_trap();
  if (("/" + n + "/").find("/./") != std::string::npos) __builtin_trap();
  auto again = ringmaster::NormalizeOutputName(n);
  if (!again.ok() || *again != n) __builtin_trap();
  // Created for real beneath the root; the result must resolve inside it.
  auto dir = ringmaster::OpenDirBeneath(Root(), n, /*create=*/true);
  if (!dir.ok()) __builtin_trap();
  std::error_code ec;
  const fs::path real = fs::canonical(fs::path(Root()) / n, ec);
  const std::string root = fs::canonical(Root()).string() + "/";
  if (ec || real.string().rfind(root, 0) != 0) __builtin_trap();
  static int calls = 0;
  if (++calls % 2000 == 0) {  // keep the scratch tree small
    fs::remove_all(Root(), ec);
    fs::create_directories(Root(), ec);
  }
  return 0;
}
