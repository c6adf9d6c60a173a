#include "coordinator/launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

extern char** environ;

namespace ringmaster {

std::vector<std::string> BuildMpirunArgv(const MpirunOptions& o) {
  std::vector<std::string> argv = {o.mpirun};
  if (o.allow_run_as_root) argv.push_back("--allow-run-as-root");
  if (o.oversubscribe) argv.push_back("--oversubscribe");
  argv.insert(argv.end(), {"-np", std::to_string(o.np)});
  if (!o.hostfile.empty()) {
    argv.insert(argv.end(), {"--hostfile", o.hostfile});
    // Node-major placement: ranks 0..K-1 on the first node, and so on.
    if (o.ranks_per_node > 0) {
      argv.insert(
          argv.end(),
          {"--map-by", "ppr:" + std::to_string(o.ranks_per_node) + ":node"});
    }
  }
  // GPU workers run NCCL proxy threads: do not pin a rank to one core.
  argv.insert(argv.end(), {"--bind-to", "none"});
  for (const auto& name : o.forward_env) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
  argv.insert(argv.end(), o.worker_argv.begin(), o.worker_argv.end());
  return argv;
}

std::vector<std::string> ForwardedEnvNames(
    const std::vector<std::string>& env) {
  std::vector<std::string> names;
  for (const std::string& kv : env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    bool ok = absl::StartsWith(name, "NCCL_") ||
              absl::StartsWith(name, "RINGMASTER_") ||
              name == "CUDA_VISIBLE_DEVICES" || name == "LD_LIBRARY_PATH";
    // Names only ever reach argv, but keep them to the shell-safe set.
    for (char c : name)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (ok) names.push_back(name);
  }
  return names;
}

std::optional<RankFailure> ParseMpirunFailureLine(std::string_view line) {
  static const std::regex kPattern(
      R"(process rank (\d+) with PID (\d+) on node (\S+) exited on (signal \d+.*?|.*?exit code \d+|.*?status \d+)\.?\s*$)");
  std::cmatch m;
  if (!std::regex_search(line.data(), line.data() + line.size(), m, kPattern)) {
    return std::nullopt;
  }
  RankFailure f;
  if (!absl::SimpleAtoi(m[1].str(), &f.rank)) return std::nullopt;
  f.host = m[3].str();
  f.detail = "exited on " + m[4].str();
  return f;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status))
    return absl::StrFormat("exit code %d", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return absl::StrFormat("signal %d (%s)", sig, strsignal(sig));
  }
  return absl::StrFormat("wait status %d", status);
}

void SetEnvEntry(std::vector<std::string>* env, const std::string& name,
                 const std::string& value) {
  const std::string prefix = name + "=";
  env->erase(std::remove_if(env->begin(), env->end(),
                            [&](const std::string& e) {
                              return e.compare(0, prefix.size(), prefix) == 0;
                            }),
             env->end());
  env->push_back(prefix + value);
}

std::vector<pid_t> ProcessesInSession(pid_t sid) {
  std::vector<pid_t> pids;
  DIR* dir = opendir("/proc");
  if (!dir) return pids;
  while (dirent* e = readdir(dir)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream stat(absl::StrFormat("/proc/%d/stat", pid));
    std::string text((std::istreambuf_iterator<char>(stat)),
                     std::istreambuf_iterator<char>());
    // Fields after the parenthesised command: state ppid pgrp session ...
    auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    long ppid = 0, pgrp = 0, session = 0;
    rest >> state >> ppid >> pgrp >> session;
    if (session == sid && state != "Z") pids.push_back(pid);
  }
  closedir(dir);
  return pids;
}

namespace {

void ReadLines(int fd, bool is_stderr, ChildProcess::LineCallback cb) {
  std::string buf;
  char chunk[4096];
  while (true) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    size_t pos;
    while ((pos = buf.find('\n')) != std::string::npos) {
      cb(std::string_view(buf.data(), pos), is_stderr);
      buf.erase(0, pos + 1);
    }
  }
  if (!buf.empty()) cb(buf, is_stderr);
  close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, LineCallback on_line,
    const std::vector<std::string>* env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  std::vector<char*> cenv;
  if (env) {
    for (const auto& e : *env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(),
                        env ? cenv.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return absl::NotFoundError(
        absl::StrFormat("cannot start %s: %s", argv[0], std::strerror(rc)));
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->out_reader_ = std::thread(ReadLines, out[0], false, on_line);
  child->err_reader_ = std::thread(ReadLines, err[0], true, on_line);
  return child;
}

std::optional<int> ChildProcess::Poll() {
  if (status_) return status_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) status_ = status;
  return status_;
}

int ChildProcess::TerminateSession(absl::Duration grace) {
  // The launcher first: mpirun tears its ranks down itself and may crash
  // when its ranks are signalled under it. SIGCONT after SIGTERM: a
  // stopped process (SIGSTOP) only acts on its SIGTERM once it runs again.
  if (!Poll()) {
    kill(pid_, SIGTERM);
    for (pid_t p : ProcessesInSession(pid_)) kill(p, SIGCONT);
    const absl::Time deadline = absl::Now() + grace;
    while (absl::Now() < deadline &&
           !(Poll() && ProcessesInSession(pid_).empty())) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  // Then whatever is left of its session, the same way as an orphan's.
  const int killed = ProcessesInSession(pid_).empty()
                         ? 0
                         : TerminateSessionOf(pid_, grace / 2);
  if (!status_) {
    int status = 0;
    if (waitpid(pid_, &status, 0) == pid_) status_ = status;
  }
  return killed;
}

int TerminateSessionOf(pid_t sid, absl::Duration grace) {
  if (sid <= 1) return 0;
  for (pid_t p : ProcessesInSession(sid)) kill(p, SIGTERM);
  for (pid_t p : ProcessesInSession(sid)) kill(p, SIGCONT);
  absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline && !ProcessesInSession(sid).empty()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  int killed = 0;
  for (pid_t p : ProcessesInSession(sid)) {
    if (kill(p, SIGKILL) == 0) ++killed;
  }
  for (int i = 0; i < 50 && !ProcessesInSession(sid).empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  return killed;
}

void ChildProcess::JoinReaders() {
  if (out_reader_.joinable()) out_reader_.join();
  if (err_reader_.joinable()) err_reader_.join();
}

void ChildProcess::Detach() {
  detached_ = true;
  if (out_reader_.joinable()) out_reader_.detach();
  if (err_reader_.joinable()) err_reader_.detach();
}

ChildProcess::~ChildProcess() {
  if (detached_) return;
  if (!Poll() || !ProcessesInSession(pid_).empty())
    TerminateSession(absl::Seconds(1));
  JoinReaders();
}

absl::StatusOr<CommandResult> RunAndCapture(
    const std::vector<std::string>& argv, const std::vector<std::string>* env,
    absl::Duration timeout) {
  CommandResult r;
  std::mutex mu;
  auto child = ChildProcess::Spawn(
      argv,
      [&](std::string_view line, bool is_err) {
        std::lock_guard<std::mutex> lock(mu);
        (is_err ? r.err : r.out).append(line.data(), line.size()).append("\n");
      },
      env);
  if (!child.ok()) return child.status();
  absl::Time give_up = absl::Now() + timeout;
  std::optional<int> status;
  while (!(status = (*child)->Poll())) {
    if (absl::Now() > give_up) {
      (*child)->TerminateSession(absl::Seconds(1));
      return absl::DeadlineExceededError(argv[0] + " did not finish in time");
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  (*child)->JoinReaders();
  r.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128;
  return r;
}

}  // namespace ringmaster
