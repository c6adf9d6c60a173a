#include "tests/cli_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "coordinator/launcher.h"

namespace ringmaster {

std::string Bin() {
  const char* dir = std::getenv("RINGMASTER_TEST_BIN_DIR");
  return std::string(dir ? dir : RINGMASTER_BIN_DIR) + "/ringmaster";
}
std::string Source(const std::string& p) {
  return std::string(RINGMASTER_SOURCE_DIR) + "/" + p;
}

Outcome Ringmaster(const std::vector<std::string>& args,
                   const std::vector<std::string>& env,
                   const std::function<void(pid_t)>& on_start,
                   const std::string& stdin_path) {
  std::vector<std::string> argv = {"env"};
  argv.insert(argv.end(), env.begin(), env.end());
  if (!stdin_path.empty()) {
    argv = {"sh", "-c", "exec \"$0\" \"$@\" < " + stdin_path, "env"};
    argv.insert(argv.end(), env.begin(), env.end());
  }
  argv.push_back(Bin());
  argv.insert(argv.end(), args.begin(), args.end());
  Outcome o;
  std::mutex mu;
  const auto start = std::chrono::steady_clock::now();
  auto child = ChildProcess::Spawn(argv, [&](std::string_view line, bool err) {
    std::lock_guard<std::mutex> lock(mu);
    (err ? o.err : o.out).append(line.data(), line.size()).append("\n");
  });
  if (!child.ok()) {
    o.err = std::string(child.status().message());
    return o;
  }
  if (on_start) on_start((*child)->pid());
  std::optional<int> status;
  while (!(status = (*child)->Poll())) usleep(5000);
  (*child)->JoinReaders();
  o.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  o.exit_code =
      WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  return o;
}

}  // namespace ringmaster
