// S3 fuzz target: what a client or a worker can send. The first byte picks
// a request type, the rest is its protobuf wire encoding (as gRPC hands it
// to our handlers); it is decoded and given to the same logic the service
// runs (JobFromSubmit, and the JobManager with a real SQLite store on a
// live job). With the first byte's high bit set the request is aimed at
// that job (its id and attempt), so the deeper paths are reached.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/job_manager.h"
#include "coordinator/store.h"
#include "coordinator/submit.h"

namespace {

using namespace ringmaster;  // NOLINT: a fuzz driver, one file

constexpr char kPlan[] =
    "name: fuzz\n"
    "cases:\n"
    "  - name: ar\n"
    "    collective: all_reduce\n"
    "    sizes: [1KiB, 4KiB]\n";

struct World {
  std::unique_ptr<Store> store;
  std::unique_ptr<JobManager> manager;
  std::string job_id;
  int attempt = 1;
};

void NewJob(World* w) {
  v1::SubmitPlanRequest req;
  req.set_plan_yaml(kPlan);
  req.set_nranks(4);
  auto job = JobFromSubmit(req);
  if (!job.ok()) abort();
  bool duplicate = false;
  auto created = w->manager->CreateJob(*job, &duplicate);
  if (!created.ok()) abort();
  w->job_id = created->job_id();
  w->attempt = created->attempt();
  (void)w->manager->MarkLaunching(w->job_id, 0);
}

std::string& ScratchDir() {
  static std::string dir;
  return dir;
}

World& TheWorld() {
  static World* w = [] {
    auto* world = new World();
    char tmpl[] = "/dev/shm/ringmaster-fuzz-XXXXXX";
    const char* dir = mkdtemp(tmpl);
    if (!dir) abort();
    ScratchDir() = dir;
    // The store goes with the process (libFuzzer ends with exit()).
    std::atexit([] { std::filesystem::remove_all(ScratchDir()); });
    auto store = Store::Open(std::string(dir) + "/fuzz.db");
    if (!store.ok()) abort();
    world->store = std::move(*store);
    JobManager::Options options;
    options.events = false;
    world->manager = std::make_unique<JobManager>(world->store.get(), options);
    NewJob(world);
    return world;
  }();
  return *w;
}

template <typename M>
bool Decode(const uint8_t* data, size_t size, M* m) {
  return m->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  World& w = TheWorld();
  const bool aim = data[0] & 0x80;
  const int kind = data[0] & 0x7f;
  ++data;
  --size;
  switch (kind % 6) {
    case 0: {
      v1::SubmitPlanRequest req;
      if (!Decode(data, size, &req)) return 0;
      (void)JobFromSubmit(req);
      break;
    }
    case 1: {
      v1::RegisterRequest req;
      if (!Decode(data, size, &req)) return 0;
      if (aim) req.set_job_id(w.job_id);
      (void)w.manager->Register(req);
      break;
    }
    case 2: {
      v1::HeartbeatRequest req;
      if (!Decode(data, size, &req)) return 0;
      if (aim) {
        req.set_job_id(w.job_id);
        req.set_attempt(w.attempt);
      }
      (void)w.manager->Heartbeat(req);
      break;
    }
    case 3: {
      v1::ReportResultsRequest req;
      if (!Decode(data, size, &req)) return 0;
      if (aim) {
        req.set_job_id(w.job_id);
        req.set_attempt(w.attempt);
        for (auto& r : *req.mutable_results()) {
          r.set_job_id(w.job_id);
          r.set_attempt(w.attempt);
        }
      }
      (void)w.manager->ReportResults(req);
      break;
    }
    case 4: {
      v1::QueryResultsRequest req;
      if (!Decode(data, size, &req)) return 0;
      if (aim) req.set_job_id(w.job_id);
      (void)w.manager->QueryResults(req.job_id(), req.after_seq(), 100,
                                    req.status(), req.attempt());
      break;
    }
    case 5: {
      v1::CancelJobRequest req;
      if (!Decode(data, size, &req)) return 0;
      (void)w.manager->GetJob(req.job_id());
      (void)w.manager->Snapshot(aim ? w.job_id : req.job_id());
      break;
    }
  }
  // A job that a request ended is replaced, so later inputs reach a live one.
  auto job = w.manager->GetJob(w.job_id);
  if (!job.ok() || TerminalState(job->state())) NewJob(&w);
  return 0;
}
