// Starting workers through mpirun, and watching the process tree.
//
// mpirun runs in a session of its own (setsid), so every local rank it
// starts can be found and reaped by session id even though OpenMPI puts
// each rank in its own process group. Arguments go to execve as argv,
// never through a shell.
#ifndef RINGMASTER_COORDINATOR_LAUNCHER_H_
#define RINGMASTER_COORDINATOR_LAUNCHER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

// A resource limit for launched processes: setrlimit(2)'s resource, set as
// both the soft and the hard limit (so a rank cannot raise it again).
struct ResourceLimit {
  std::string name;  // as prlimit(1) names it: as, cpu, nofile, ...
  int resource = 0;  // RLIMIT_*
  uint64_t value = 0;
};

// Parses NAME=VALUE: as, data, rss, memlock, fsize, stack (bytes, with
// units: 4GiB, 512MiB), cpu (seconds), nofile, nproc, core (counts or
// bytes). "unlimited" is accepted. Errors name the part that is wrong.
absl::StatusOr<ResourceLimit> ParseResourceLimit(std::string_view text);

struct MpirunOptions {
  std::string mpirun = "mpirun";
  int np = 2;
  std::string hostfile;    // empty: local host only
  int ranks_per_node = 0;  // with a hostfile: --map-by ppr:K:node (0: slots)
  bool allow_run_as_root = false;        // required by OpenMPI when uid is 0
  bool oversubscribe = false;            // more ranks than cores
  std::vector<std::string> forward_env;  // variable names passed with -x
  std::vector<std::string> extra_args;   // user's extra mpirun arguments
  std::vector<std::string> worker_argv;  // the worker and its arguments
};

// The mpirun command line for `options`.
std::vector<std::string> BuildMpirunArgv(const MpirunOptions& options);

// Names of the variables of `env` (NAME=value strings) that workers need:
// NCCL_*, CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH and RINGMASTER_* (an
// allowlist: nothing else crosses).
std::vector<std::string> ForwardedEnvNames(const std::vector<std::string>& env);

// The munge daemon's socket as Debian's libmunge finds it by default.
inline constexpr char kMungeSocket[] = "/run/munge/munge.socket.2";

// PMIx (under Open MPI's mpirun) authenticates its local clients through
// munge when libmunge is installed. With a stale socket (munge installed, its
// daemon gone) libmunge retries the refused connection for about 2.3 s at
// mpirun's start and again in the ranks' MPI_Init (measured: a 2-rank host
// plan 9.0 s instead of 4.5 s). When `socket_path` exists but refuses
// connections and `env` does not set PMIX_MCA_psec, sets PMIX_MCA_psec=^munge
// in `env` (a single host's PMIx clients then authenticate by the local
// socket's peer credentials) and returns a one-line note saying so; else
// changes nothing and returns an empty string. A missing socket costs nothing:
// libmunge fails at once.
std::string AvoidStaleMunge(std::vector<std::string>* env,
                            const std::string& socket_path = kMungeSocket);

// Sets NAME=value in an environment list (replacing an earlier NAME).
void SetEnvEntry(std::vector<std::string>* env, const std::string& name,
                 const std::string& value);

// Runs a command (argv, no shell) with an environment; returns its exit
// status and stdout. Waits at most `timeout`.
struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};
absl::StatusOr<CommandResult> RunAndCapture(
    const std::vector<std::string>& argv, const std::vector<std::string>* env,
    absl::Duration timeout, const std::vector<ResourceLimit>* limits = nullptr);

// A rank failure as mpirun reports it.
struct RankFailure {
  int rank = -1;
  std::string host;
  std::string detail;  // e.g. "exited on signal 9 (Killed)"
};

// Recognizes OpenMPI's "mpirun noticed that process rank N with PID P on
// node H exited on signal S (Name)." (and the exit-code variant).
std::optional<RankFailure> ParseMpirunFailureLine(std::string_view line);

// "exit code 3" or "signal 9 (Killed)" for a waitpid status.
std::string DescribeWaitStatus(int status);

// Pids of the live processes of session `sid` (from /proc).
std::vector<pid_t> ProcessesInSession(pid_t sid);

// SIGTERM to every process of session `sid`, SIGKILL after `grace` to what
// is left (for a launcher whose parent, a previous coordinator, is gone).
// Returns how many processes got SIGKILL.
int TerminateSessionOf(pid_t sid, absl::Duration grace);

// SIGKILL to every process in the sessions of this process's live
// children (a stop that cannot wait: `run`'s second Ctrl-C). Returns how
// many processes were signalled. Safe from any thread.
int KillChildSessions();

// A child process in its own session whose stdout and stderr lines are
// delivered to a callback from a reader thread.
class ChildProcess {
 public:
  using LineCallback =
      std::function<void(std::string_view line, bool is_stderr)>;
  // Starts argv[0] (looked up in PATH). `on_line` runs on reader threads
  // and must be thread-safe. `env` (NAME=value strings) replaces the
  // environment when given; `limits` are set in the child before it execs
  // (inherited by everything it starts on this host).
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, LineCallback on_line,
      const std::vector<std::string>* env = nullptr,
      const std::vector<ResourceLimit>* limits = nullptr);
  ~ChildProcess();  // kills the session if still running, joins readers

  pid_t pid() const { return pid_; }
  // The waitpid status once the child has exited (non-blocking).
  std::optional<int> Poll();
  // SIGTERM to the child, then (after `grace`) to every process of its
  // session, then SIGKILL to whatever is left. Waits for the child itself.
  // Returns how many processes got SIGKILL.
  int TerminateSession(absl::Duration grace);
  // Waits for the reader threads to see end of output (after exit).
  void JoinReaders();
  // Leaves the process running on its own: the destructor neither signals
  // nor waits (the reader threads finish by themselves at end of output).
  void Detach();

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  std::optional<int> status_;
  bool detached_ = false;
  std::thread out_reader_;
  std::thread err_reader_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_LAUNCHER_H_
