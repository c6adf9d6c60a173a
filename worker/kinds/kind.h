// Benchmark kinds as plug-ins: each kind (collectives, p2p, gemm, training,
// ...) is one class in a file of its own, registered by the name a plan's
// `bench:` gives it. The rank session (worker/rank_session.h) looks a
// case's kind up by name and runs it; a kind composes what back ends
// provide (backends/provider.h) and times it through the one measurement
// loop (worker/measure.h). No kind names a concrete back end.
//
// Adding a kind: a file that defines a BenchmarkKind and ends with
// RINGMASTER_REGISTER_KIND("name", Class), listed in the worker's kinds
// library (or in any binary linked with the worker's objects).
#ifndef RINGMASTER_WORKER_KINDS_KIND_H_
#define RINGMASTER_WORKER_KINDS_KIND_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/provider.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// The launch's first `size` ranks (a ladder rung, or the whole launch).
// Members have its communicator and control; the others have neither.
struct RankGroup {
  int size = 0;
  HostComm* comm = nullptr;
  Control* control = nullptr;
  bool member() const { return comm != nullptr; }
};

// What the rank session offers a kind while a case runs. Owned by the
// session; valid for the whole job.
class CaseEnv {
 public:
  virtual ~CaseEnv() = default;
  virtual int rank() const = 0;        // in the launch
  virtual int world_size() const = 0;  // ranks in the launch
  virtual int local_rank() const = 0;  // on this rank's host
  // Every launch rank's host name, indexed by rank.
  virtual const std::vector<std::string>& hosts() const = 0;
  virtual const std::vector<Fault>& faults() const = 0;
  virtual HostComm& world_comm() = 0;
  virtual Control& world_control() = 0;
  // The first `n` ranks; created collectively (every launch rank) on first
  // use.
  virtual absl::StatusOr<RankGroup> Group(int n) = 0;
  // The back end that runs `c`: its own, or the launch's for `auto`;
  // nullptr, with the reason, when this launch cannot run it.
  virtual BackendProvider* ProviderFor(const v1::Case& c, std::string* why) = 0;
  // The launch's back end (what `auto` means here).
  virtual BackendProvider& launch_provider() = 0;
  // The launch's collective backend over every rank, made at start.
  virtual CollectiveBackend& world_collectives() = 0;
  // `provider`'s node benchmarks over every launch rank, made on first use
  // (collective) and shared by every kind that measures the node.
  virtual absl::StatusOr<NodeBench*> NodeBenchOf(BackendProvider& provider) = 0;
};

class BenchmarkKind {
 public:
  virtual ~BenchmarkKind() = default;

  // Who runs a case: false (the default), every rank of the launch (node
  // benchmarks choose their active ranks themselves); true, the case's own
  // ranks (Case.nranks, 0 = all), while the others wait.
  virtual bool RunsOnCaseRanks() const { return false; }

  // Called on every rank of the launch before the case's ranks run it, for
  // set-up that is collective over the whole launch (splitting a
  // communicator). An error ends the job.
  virtual absl::Status BeforeCase(const v1::Case& c, CaseEnv& env) {
    return absl::OkStatus();
  }

  // Runs `c` on this rank. The result on rank 0 is the one reported: the
  // case, status, statistics and figures; a failure names its reason.
  virtual v1::Result Run(const v1::Case& c, CaseEnv& env) = 0;
};

using KindFactory = std::function<std::unique_ptr<BenchmarkKind>()>;

// Registers `name` at static-initialization time; false if it was taken.
bool RegisterKind(std::string name, KindFactory factory);

// A new instance of kind `name` (one per job), or nullptr when none is
// registered under that name.
std::unique_ptr<BenchmarkKind> MakeKind(std::string_view name);

// Every registered name, sorted.
std::vector<std::string> KindNames();

// The registry name of a case's kind: its plug-in name (Case.kind), or
// the built-in bench's name ("collective", "p2p", ...).
std::string KindNameOf(const v1::Case& c);

// A result for `c` that did not run: SKIPPED (reason REJECTED) with `why`.
v1::Result SkippedResult(const v1::Case& c, int nranks, const std::string& why);

// A result for `c` whose back end could not be set up: FAILED,
// BACKEND_ERROR, with `why`'s message.
v1::Result FailedResult(const v1::Case& c, int nranks, const absl::Status& why);

// For kinds whose cases run on an object a back end makes over a group of
// ranks (a trainer, an inference engine): one per rank count and back end,
// made by the first case that needs it and kept for the job.
template <typename T>
class GroupObjects {
 public:
  using Make = std::function<absl::StatusOr<std::unique_ptr<T>>(
      BackendProvider&, const RankResources&)>;
  struct Got {
    T* object = nullptr;
    Control* control = nullptr;         // over the case's ranks
    std::optional<v1::Result> instead;  // when there is no object
  };
  // The object for case `c` on its ranks; else a result instead: SKIPPED
  // without a provider for the case (or, when `unmade_skips`, when the
  // provider cannot make the object), FAILED otherwise.
  Got For(const v1::Case& c, CaseEnv& env, const Make& make,
          bool unmade_skips) {
    const int n = c.nranks() > 0 ? c.nranks() : env.world_size();
    std::string why;
    BackendProvider* provider = env.ProviderFor(c, &why);
    if (provider == nullptr)
      return {nullptr, nullptr, SkippedResult(c, n, why)};
    auto group = env.Group(n);
    if (!group.ok())
      return {nullptr, nullptr, FailedResult(c, n, group.status())};
    std::unique_ptr<T>& object = objects_[{n, provider->kind()}];
    if (!object) {
      RankResources r{group->comm, group->control, env.local_rank(),
                      env.faults()};
      auto made = make(*provider, r);
      if (!made.ok()) {
        return {nullptr, nullptr,
                unmade_skips
                    ? SkippedResult(c, n, std::string(made.status().message()))
                    : FailedResult(c, n, made.status())};
      }
      object = std::move(*made);
    }
    return {object.get(), group->control, std::nullopt};
  }

 private:
  std::map<std::pair<int, v1::Backend>, std::unique_ptr<T>> objects_;
};

}  // namespace ringmaster

#define RINGMASTER_KIND_CONCAT_INNER(a, b) a##b
#define RINGMASTER_KIND_CONCAT(a, b) RINGMASTER_KIND_CONCAT_INNER(a, b)
// Registers Class (default-constructible) under `name`.
#define RINGMASTER_REGISTER_KIND(name, Class)                             \
  static const bool RINGMASTER_KIND_CONCAT(kRegistered, __LINE__) =       \
      ::ringmaster::RegisterKind(name, [] {                               \
        return std::unique_ptr<::ringmaster::BenchmarkKind>(new Class()); \
      })

#endif  // RINGMASTER_WORKER_KINDS_KIND_H_
