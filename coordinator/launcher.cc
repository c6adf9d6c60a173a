#include "coordinator/launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/mutex.h"
#include "core/units.h"

extern char** environ;

namespace ringmaster {

absl::StatusOr<ResourceLimit> ParseResourceLimit(std::string_view text) {
  struct Known {
    const char* name;
    int resource;
    bool bytes;
  };
  static constexpr Known kKnown[] = {
      {"as", RLIMIT_AS, true},          {"data", RLIMIT_DATA, true},
      {"rss", RLIMIT_RSS, true},        {"memlock", RLIMIT_MEMLOCK, true},
      {"fsize", RLIMIT_FSIZE, true},    {"stack", RLIMIT_STACK, true},
      {"core", RLIMIT_CORE, true},      {"cpu", RLIMIT_CPU, false},
      {"nofile", RLIMIT_NOFILE, false}, {"nproc", RLIMIT_NPROC, false},
  };
  const size_t eq = text.find('=');
  const std::string name(text.substr(0, eq));
  const Known* known = nullptr;
  for (const Known& k : kKnown)
    if (name == k.name) known = &k;
  if (eq == std::string_view::npos || !known) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker rlimit '%s': expected NAME=VALUE with NAME one of as, data, "
        "rss, memlock, fsize, stack, core, cpu, nofile, nproc",
        std::string(text)));
  }
  const std::string value(text.substr(eq + 1));
  ResourceLimit limit{name, known->resource, 0};
  if (value == "unlimited") {
    limit.value = RLIM_INFINITY;
    return limit;
  }
  int64_t v = -1;
  if (known->bytes) {
    auto bytes = ParseSizeBytes(value);
    if (bytes.ok()) v = *bytes;
  } else if (!absl::SimpleAtoi(value, &v)) {
    v = -1;
  }
  if (v < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker rlimit %s: '%s' is not a %s", name, value,
        known->bytes ? "size (e.g. 4GiB)" : "non-negative integer"));
  }
  limit.value = static_cast<uint64_t>(v);
  return limit;
}

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

std::string AvoidStaleMunge(std::vector<std::string>* env,
                            const std::string& socket_path) {
  for (const std::string& e : *env)
    if (absl::StartsWith(e, "PMIX_MCA_psec=")) return "";
  struct stat st;
  if (stat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return "";
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof addr.sun_path) return "";
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  const int err = rc == 0 ? 0 : errno;
  close(fd);
  // A live daemon, or a socket we may not open (another user's policy):
  // leave PMIx as it is.
  if (err == 0 || err == EACCES || err == EPERM) return "";
  SetEnvEntry(env, "PMIX_MCA_psec", "^munge");
  return absl::StrFormat(
      "munge socket %s refuses connections (%s: no munge daemon); launching "
      "with PMIX_MCA_psec=^munge (else mpirun and the ranks' MPI_Init each "
      "wait about 2.3 s in libmunge's retries; set PMIX_MCA_psec yourself to "
      "choose)",
      socket_path, std::strerror(err));
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

namespace {

// argv[0] as execve wants it: itself when it has a '/', else the first
// executable of that name in our PATH (as posix_spawnp looks it up).
// Looked up before fork: the child may only make async-signal-safe calls.
std::string ResolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  std::string path_var = "/usr/local/bin:/usr/bin:/bin";
  if (const char* p = getenv("PATH")) path_var = p;
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// The signals a launching process may block or ignore (`serve` and `run`
// take SIGINT/SIGTERM/SIGHUP with sigwait; `run` ignores SIGPIPE). Both
// the blocked mask and ignored dispositions survive execve, so launched
// programs get them back: otherwise mpirun would start with SIGTERM blocked
// and a cancel's SIGTERM could not reach it before the SIGKILL after it.
constexpr int kInheritedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT};

// In a forked child before execve: async-signal-safe calls only.
void ResetSignalsInChild() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : kInheritedSignals) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// fork + setrlimit + execve (posix_spawn cannot set limits). Between fork
// and execve only async-signal-safe calls. Returns the pid, or -errno.
pid_t ForkWithLimits(const std::string& path, char* const* argv,
                     char* const* envp, int out_fd, int err_fd,
                     const std::vector<ResourceLimit>& limits) {
  std::vector<rlimit> values;
  for (const auto& l : limits) {
    rlimit current{};
    getrlimit(l.resource, &current);
    // Never above the coordinator's own hard limit (setrlimit would fail
    // for a non-root coordinator).
    rlim_t v = static_cast<rlim_t>(l.value);
    if (current.rlim_max != RLIM_INFINITY &&
        (v == RLIM_INFINITY || v > current.rlim_max))
      v = current.rlim_max;
    values.push_back({v, v});
  }
  pid_t pid = fork();
  if (pid < 0) return -errno;
  if (pid == 0) {
    setsid();
    ResetSignalsInChild();
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    for (size_t i = 0; i < limits.size(); ++i) {
      if (setrlimit(limits[i].resource, &values[i]) != 0) {
        static const char kMsg[] = "ringmaster: setrlimit failed\n";
        (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
        _exit(127);
      }
    }
    execve(path.c_str(), argv, envp);
    static const char kMsg[] = "ringmaster: execve failed\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    _exit(127);
  }
  return pid;
}

}  // namespace

namespace {

// posix_spawnp in a new session, stdin from /dev/null. Returns 0 or errno.
int SpawnPlain(char* const* argv, char* const* envp, int out_fd, int err_fd,
               pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // As ResetSignalsInChild: an empty mask, default dispositions.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : kInheritedSignals) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  int rc = posix_spawnp(pid, argv[0], &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

}  // namespace

namespace {

// The sessions of the live (not detached) children of this process, for
// KillChildSessions.
struct SessionRegistry {
  Mutex mu;
  std::set<pid_t> sids ABSL_GUARDED_BY(mu);
};

SessionRegistry& Sessions() {
  static auto* registry = new SessionRegistry();  // never destroyed
  return *registry;
}

void Forget(pid_t sid) {
  MutexLock lock(&Sessions().mu);
  Sessions().sids.erase(sid);
}

}  // namespace

int KillChildSessions() {
  std::set<pid_t> sids;
  {
    MutexLock lock(&Sessions().mu);
    sids = Sessions().sids;
  }
  int killed = 0;
  for (pid_t sid : sids) {
    for (pid_t p : ProcessesInSession(sid)) killed += kill(p, SIGKILL) == 0;
  }
  return killed;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, LineCallback on_line,
    const std::vector<std::string>* env,
    const std::vector<ResourceLimit>* limits) {
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
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  char* const* envp = env ? cenv.data() : environ;
  pid_t pid = -1;
  int rc = 0;
  if (limits && !limits->empty()) {
    const std::string path = ResolveProgram(argv[0]);
    if (path.empty()) {
      rc = ENOENT;
    } else {
      pid = ForkWithLimits(path, cargv.data(), envp, out[1], err[1], *limits);
      if (pid < 0) rc = -pid;
    }
  } else {
    rc = SpawnPlain(cargv.data(), envp, out[1], err[1], &pid);
  }
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return absl::NotFoundError(
        absl::StrFormat("cannot start %s: %s", argv[0], std::strerror(rc)));
  }
  {
    MutexLock lock(&Sessions().mu);
    Sessions().sids.insert(pid);
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
  Forget(pid_);
  if (out_reader_.joinable()) out_reader_.detach();
  if (err_reader_.joinable()) err_reader_.detach();
}

ChildProcess::~ChildProcess() {
  if (detached_) return;
  if (!Poll() || !ProcessesInSession(pid_).empty())
    TerminateSession(absl::Seconds(1));
  Forget(pid_);
  JoinReaders();
}

absl::StatusOr<CommandResult> RunAndCapture(
    const std::vector<std::string>& argv, const std::vector<std::string>* env,
    absl::Duration timeout, const std::vector<ResourceLimit>* limits) {
  CommandResult r;
  std::mutex mu;
  auto child = ChildProcess::Spawn(
      argv,
      [&](std::string_view line, bool is_err) {
        std::lock_guard<std::mutex> lock(mu);
        (is_err ? r.err : r.out).append(line.data(), line.size()).append("\n");
      },
      env, limits);
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
