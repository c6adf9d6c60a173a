// Runs the real `ringmaster` binary from a test and collects its exit code,
// standard output and standard error (the integration, hostile, new-user
// and other serve tests).
#ifndef RINGMASTER_TESTS_CLI_RUNNER_H_
#define RINGMASTER_TESTS_CLI_RUNNER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace ringmaster {

struct Outcome {
  int exit_code = -1;  // 128 + signal when a signal ended it
  std::string out, err;
  double seconds = 0;
};

// The binary under test: RINGMASTER_TEST_BIN_DIR (another build, e.g. an
// older one, to see what a test catches) or this build's.
std::string Bin();
// A path in the source tree.
std::string Source(const std::string& path);

// One run of the binary with `args`; `env` entries ("NAME=value") are set
// for it; `on_start` gets its pid once it runs; `stdin_path` feeds its
// standard input.
Outcome Ringmaster(const std::vector<std::string>& args,
                   const std::vector<std::string>& env = {},
                   const std::function<void(pid_t)>& on_start = nullptr,
                   const std::string& stdin_path = "");

}  // namespace ringmaster

#endif  // RINGMASTER_TESTS_CLI_RUNNER_H_
