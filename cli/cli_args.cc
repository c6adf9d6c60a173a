#include "cli/cli_args.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/units.h"

namespace ringmaster {
namespace {

// A finite number in [lo, hi]: CLI11's ranges let "nan" through (every
// comparison with it is false) and "inf" through open ends.
CLI::Validator FiniteRange(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v))
          return "expected a finite number, got " + text;
        if (v < lo || v > hi)
          return absl::StrFormat("expected a number in [%g, %g], got %s", lo,
                                 hi, text);
        return "";
      },
      absl::StrFormat("NUMBER in [%g, %g]", lo, hi));
}

// Seconds: finite, positive, at most 30 days.
CLI::Validator Seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v))
          return "expected a finite number of seconds, got " + text;
        if (v <= 0 || v > kMaxDurationSeconds)
          return absl::StrFormat("expected seconds in (0, %.0f], got %s",
                                 kMaxDurationSeconds, text);
        return "";
      },
      "SECONDS in (0, 30 days]");
}

// `run` and `validate`: the main job.
void AddRun(CLI::App& app, CliOptions* o, CliCommands* c) {
  c->run = app.add_subcommand(
      "run",
      "Run a plan: embedded coordinator + mpirun launch. Without PLAN: on "
      "exactly one GPU the server card (plans/server-card.yaml: what this "
      "GPU server delivers beside its datasheet); otherwise "
      "plans/quickstart.yaml on all visible GPUs, or on 2 host ranks "
      "without GPUs.");
  c->run->add_option("plan", o->run.plan_path,
                     "Plan file (YAML), or a shipped plan's name "
                     "(quickstart, server-card, dp-scaling, ...)");
  c->run->add_option("--plan", o->run.plan_path,
                     "The same as PLAN (a path or a shipped plan's name)");
  c->run
      ->add_option("--np", o->run.np,
                   "Number of ranks (default: plan's, else #GPUs, else 2); "
                   "on this machine at most one per core (host ranks) or per "
                   "GPU unless --oversubscribe")
      ->check(CLI::Range(1, 4096));
  c->run->add_flag("--oversubscribe", o->run.oversubscribe,
                   "Allow more local host ranks than cores (their times then "
                   "measure sharing, not the machine)");
  c->run
      ->add_option("--out", o->run.out_dir,
                   "Results folder: <out>/ringmaster.db and "
                   "<out>/<job-id>/results.{jsonl,csv}")
      ->capture_default_str();
  c->run
      ->add_option("--backend", o->run.backend,
                   "auto, host (MPI on CPUs) or cuda (NCCL)")
      ->check(CLI::IsMember({"auto", "host", "cuda"}))
      ->capture_default_str();
  c->run
      ->add_option("--hostfile", o->run.hostfile,
                   "mpirun hostfile for multi-node runs")
      ->check(CLI::ExistingFile);
  c->run->add_option("--mpirun", o->run.mpirun, "mpirun executable")
      ->capture_default_str();
  c->run->add_option("--mpirun-arg", o->run.mpirun_args,
                     "Extra argument passed to mpirun (repeatable)");
  c->run
      ->add_option("--timeout", o->run.timeout_s,
                   "Job deadline in seconds (default: derived from the plan)")
      ->check(Seconds());
  c->run
      ->add_option(
          "--heartbeat-timeout", o->run.heartbeat_timeout_s,
          "Seconds without a heartbeat before a rank counts as unreachable")
      ->check(Seconds())
      ->capture_default_str();
  c->run
      ->add_option("--op-timeout", o->run.op_timeout_s,
                   "Seconds without progress on any rank before the rank "
                   "furthest behind is declared hung (rank_hung)")
      ->check(Seconds())
      ->capture_default_str();
  c->run->add_flag("--quiet", o->run.quiet,
                   "Do not echo the launcher's output");
  c->run->add_flag("--nccl-algorithms", o->run.nccl_algorithms,
                   "Label every result with NCCL's algorithm, protocol and "
                   "channels, read from "
                   "NCCL's tuning log in a one-operation probe launch before "
                   "each variant's first measured one");
  c->run
      ->add_option("--rounds", o->run.rounds,
                   "Run the plan this many times, one job per variant in each "
                   "round (variants A and B run A B A B ...): an interleaved "
                   "A/B benchmark for `ringmaster compare OUT OUT "
                   "--base-variant A --new-variant B`, or repeated runs of a "
                   "plan without variants")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->run
      ->add_option("--worker", o->run.worker,
                   "The worker binary to launch (default: ringmaster-worker "
                   "beside this one); a worker built with benchmark kinds of "
                   "its own runs plans that name them")
      ->check(CLI::ExistingFile);

  c->validate = app.add_subcommand(
      "validate",
      "Check a plan and print its expansion and memory needs; runs nothing");
  c->validate->add_option("plan", o->validate_path, "Plan file (YAML)")
      ->required();
  c->validate
      ->add_option("--worker", o->validate_worker,
                   "The worker whose benchmark kinds the plan may name "
                   "(default: ringmaster-worker beside this one)")
      ->check(CLI::ExistingFile);
  c->validate
      ->add_option("--np", o->validate_np,
                   "Count the cases as a launch of this many ranks runs them "
                   "(default: the plan's ranks, else 2, as `run` on a "
                   "machine without GPUs)")
      ->check(CLI::Range(1, 4096));
  c->validate
      ->add_option("--topology", o->validate_topology,
                   "Topology file: check each case's memory need against its "
                   "GPU's memory")
      ->check(CLI::ExistingFile);
}

// `topo` and `predict`: the machine and the model.
void AddMachineAndModel(CLI::App& app, CliOptions* o, CliCommands* c) {
  c->topo = app.add_subcommand(
      "topo",
      "Detect this machine: CPUs and NUMA nodes (hwloc), NICs, GPUs with "
      "their NVLink and PCIe links, and each path's speed of light");
  c->topo
      ->add_option("--format", o->topo.format,
                   "text, or yaml (the topology schema of topologies/)")
      ->check(CLI::IsMember({"text", "yaml"}))
      ->capture_default_str();
  c->topo->add_option("--worker", o->topo.worker,
                      "ringmaster-worker for the GPU probe (default: beside "
                      "this binary)");
  c->predict = app.add_subcommand(
      "predict",
      "Predict a plan's collectives on a described system "
      "(topologies/*.yaml), or calibrate the model on measured results");
  c->predict->add_option("plan", o->predict.plan, "Plan to predict (YAML)");
  c->predict->add_option("--topology", o->predict.topology, "Topology file")
      ->required()
      ->check(CLI::ExistingFile);
  c->predict
      ->add_option("--nodes", o->predict.nodes,
                   "Nodes (default: the topology's)")
      ->check(CLI::Range(1, 100000));
  c->predict->add_option("--sizes", o->predict.sizes,
                         "MIN:MAX: powers of two instead of the plan's sizes");
  c->predict
      ->add_option("--calibrate", o->predict.calibrate,
                   "Results (JSON Lines) to fit the model on first "
                   "(repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  c->predict
      ->add_option("--min-size", o->predict.min_size,
                   "Calibrate on sizes of at least this much")
      ->capture_default_str();
  c->predict
      ->add_option("--holdout", o->predict.holdout,
                   "Leave every k-th size out of the fit and report the "
                   "error there")
      ->check(CLI::Range(2, 100));
  c->predict->add_option("--params-out", o->predict.params_out,
                         "Write the fitted model parameters (YAML) here");
  c->predict->add_option("--summary", o->predict.summary_out,
                         "Write the figures (JSON) here");
  c->predict
      ->add_option("--compute-from", o->predict.compute_from,
                   "Training: one rank's measured steps (results JSON "
                   "Lines) as each rank's compute (repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  c->predict
      ->add_option("--gemm-efficiency", o->predict.gemm_efficiency,
                   "Training without --compute-from: the share of the GPU's "
                   "dense peak its GEMMs reach")
      ->check(FiniteRange(0.01, 1.0))
      ->capture_default_str();
  c->predict
      ->add_option("--compare", o->predict.compare,
                   "Another topology to predict the plan on, side by side "
                   "(repeatable: NVLink vs PCIe vs InfiniBand vs RoCE)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  c->predict
      ->add_option("--measured", o->predict.measured,
                   "Results (JSON Lines) whose busbw goes beside the "
                   "predictions (repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  c->predict
      ->add_option("--price-per-gpu-hour", o->predict.price_per_gpu_hour,
                   "USD per GPU-hour for the cost columns (default: the "
                   "topology's price_per_gpu_hour; 0 shows no cost)")
      ->check(FiniteRange(0, 1e6));
  c->predict->add_option("--format", o->predict.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

// `report`, `compare` and `verdict`: reading results.
void AddReports(CLI::App& app, CliOptions* o, CliCommands* c) {
  c->report = app.add_subcommand(
      "report",
      "Show stored results: a terminal table (default), CSV, JSON Lines, or "
      "one self-contained HTML file with plots (--html)");
  c->report
      ->add_option("results", o->report.inputs,
                   "JSON Lines files or `run --out` folders (searched for "
                   "results.jsonl)")
      ->required();
  c->report->add_option("--html", o->report.html,
                        "Write the HTML report (plots + tables) to this file");
  c->report
      ->add_option("--format", o->report.format,
                   "text, csv or jsonl on standard output (default: text, "
                   "none with --html)")
      ->check(CLI::IsMember({"text", "csv", "jsonl"}));
  c->report
      ->add_option("--topology", o->report.topologies,
                   "Overlay the model's predictions on this system "
                   "(topologies/*.yaml; repeatable: NVLink vs PCIe vs "
                   "InfiniBand vs RoCE side by side)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  c->report->add_option("--title", o->report.title, "The report's title")
      ->capture_default_str();

  c->compare = app.add_subcommand(
      "compare",
      "Noise-aware verdicts (better / same / worse) per measurement between "
      "two sets of results; exit 1 when something got worse or failed");
  c->compare
      ->add_option("base", o->compare.base,
                   "Baseline results: a JSON Lines file or a folder (several "
                   "runs pool their samples)")
      ->required();
  c->compare->add_option("new", o->compare.next, "Results to judge")
      ->required();
  c->compare
      ->add_option("--alpha", o->compare.alpha,
                   "Significance level of the Mann-Whitney U test")
      ->check(FiniteRange(1e-9, 0.5))
      ->capture_default_str();
  c->compare
      ->add_option("--threshold", o->compare.threshold,
                   "Smallest relative change of the median that counts")
      ->check(FiniteRange(0.0, 10.0))
      ->capture_default_str();
  c->compare->add_option("--format", o->compare.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  c->compare->add_flag("--all", o->compare.all,
                       "List unchanged measurements too");
  c->compare->add_option("--base-variant", o->compare.base_variant,
                         "Only BASE's results of this variant (a plan's "
                         "variants[].name), matched with NEW's by all else");
  c->compare->add_option("--new-variant", o->compare.new_variant,
                         "Only NEW's results of this variant (BASE and NEW may "
                         "be the same folder: ringmaster run --rounds N)");

  c->verdict = app.add_subcommand(
      "verdict",
      "Judge results against rules and references (expected values with "
      "tolerances, speed-of-light shares, fleet medians, a baseline): pass "
      "or fail per node, GPU and GPU pair with the evidence; exit 1 on any "
      "failed check (docs/report.md, rules/ for examples)");
  c->verdict
      ->add_option("results", o->verdict.inputs,
                   "JSON Lines files or --out folders")
      ->required();
  c->verdict->add_option("--rules", o->verdict.rules, "Rules file (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  c->verdict->add_option("--baseline", o->verdict.baseline,
                         "Baseline results for baseline_within rules");
  c->verdict->add_option("--format", o->verdict.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

// `serve`: the coordinator as a service (listener, TLS, users).
void AddServe(CLI::App& app, CliOptions* o, CliCommands* c) {
  c->serve = app.add_subcommand(
      "serve",
      "Run the coordinator service: accepts plans (ringmaster submit), "
      "launches them through its launcher (mpirun, Slurm, Kubernetes, or "
      "ranks started elsewhere) one admission slot at a time, stores "
      "every result in DIR/ringmaster.db and survives restarts. Writes the "
      "admin token to DIR/admin.token (mode 0600).");
  auto& so = o->serve.service;
  so.server.address = "127.0.0.1:7450";
  c->serve
      ->add_option("--listen", so.server.address,
                   "Listen address; anything but loopback needs --tls-cert "
                   "and --tls-key")
      ->capture_default_str();
  c->serve
      ->add_option("--data", so.data_dir, "Data folder (store, token, logs)")
      ->capture_default_str();
  c->serve->add_option(
      "--results-root", so.results_root,
      "Where jobs submitted with --output are exported "
      "(default: DATA/results); nothing is written outside it");
  c->serve
      ->add_option("--users", o->serve.users_file,
                   "Users file: one \"NAME TOKEN\" per line (role user)")
      ->check(CLI::ExistingFile);
  c->serve
      ->add_option("--tls-cert", o->serve.tls_cert_file,
                   "Server certificate (PEM)")
      ->check(CLI::ExistingFile);
  c->serve
      ->add_option("--tls-key", o->serve.tls_key_file,
                   "Server private key (PEM)")
      ->check(CLI::ExistingFile);
  c->serve
      ->add_option("--tls-client-ca", o->serve.tls_client_ca_file,
                   "Require client certificates signed by this CA (mTLS)")
      ->check(CLI::ExistingFile);
}

// `serve`: how it launches jobs (mpirun, Slurm, Kubernetes).
void AddServeLaunchers(CLI::App& app, CliOptions* o, CliCommands* c) {
  auto& so = o->serve.service;
  c->serve
      ->add_option("--launcher", so.launcher,
                   "mpirun; slurm (sbatch + srun --mpi=pmix, followed with "
                   "squeue, cancelled with scancel); k8s (manifests applied "
                   "with kubectl, deleted on cancel); or external (ranks "
                   "started by other means register with the job's worker "
                   "token)")
      ->check(CLI::IsMember({"mpirun", "slurm", "k8s", "external"}))
      ->capture_default_str();
  c->serve->add_option("--slurm-partition", so.slurm_partition,
                       "Slurm partition (default: the cluster's)");
  c->serve
      ->add_option("--slurm-ranks-per-node", so.slurm_ranks_per_node,
                   "Ranks per node under Slurm (default: the plan's "
                   "ranks_per_node, else all on one node)")
      ->check(CLI::Range(1, 4096));
  c->serve
      ->add_option("--slurm-gpus-per-node", so.slurm_gpus_per_node,
                   "GPUs requested per node (--gpus-per-node)")
      ->check(CLI::Range(0, 64));
  c->serve->add_option("--slurm-arg", so.slurm_args,
                       "Extra sbatch option, e.g. --account=x (repeatable)");
  c->serve
      ->add_option("--k8s-style", so.k8s_style,
                   "job (Indexed Job + headless Service, ranks bootstrap "
                   "through the coordinator) or mpijob (kubeflow MPIJob)")
      ->check(CLI::IsMember({"job", "mpijob"}))
      ->capture_default_str();
  c->serve->add_option("--k8s-image", so.k8s_image,
                       "Worker image (--launcher k8s)");
  c->serve->add_option("--k8s-namespace", so.k8s_namespace,
                       "Namespace (default: kubectl's)");
  c->serve
      ->add_option("--k8s-ranks-per-pod", so.k8s_ranks_per_pod,
                   "Ranks per worker pod, one per GPU (default: the plan's "
                   "ranks_per_node, else 1)")
      ->check(CLI::Range(1, 4096));
  c->serve
      ->add_option("--k8s-gpus-per-pod", so.k8s_gpus_per_pod,
                   "nvidia.com/gpu limit per worker pod")
      ->check(CLI::Range(0, 64));
  c->serve->add_option("--k8s-tls-ca-secret", so.k8s_tls_ca_secret,
                       "Secret with this coordinator's CA (key ca.crt) for the "
                       "pods");
  c->serve->add_option("--kubectl", so.kubectl, "kubectl executable")
      ->capture_default_str();
  c->serve
      ->add_option("--k8s-poll", so.k8s_poll_s,
                   "Seconds between kubectl get calls while a job runs")
      ->check(Seconds())
      ->capture_default_str();
  c->serve->add_option("--mpirun", so.mpirun, "mpirun executable")
      ->capture_default_str();
  c->serve->add_option("--hostfile", so.hostfile, "mpirun hostfile")
      ->check(CLI::ExistingFile);
  c->serve->add_option("--mpirun-arg", so.mpirun_args,
                       "Extra argument passed to mpirun (repeatable)");
}

// `serve`: admission, quotas, watchdog and rank limits.
void AddServeLimits(CLI::App& app, CliOptions* o, CliCommands* c) {
  auto& so = o->serve.service;
  c->serve->add_option("--advertise", so.worker_address,
                       "Address the ranks use to reach this coordinator "
                       "(default: 127.0.0.1 and the listening port)");
  c->serve->add_option("--max-running", so.max_running, "Jobs launched at once")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  c->serve
      ->add_option("--max-queued", so.max_queued,
                   "Jobs waiting before submissions get RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  c->serve
      ->add_option("--user-quota", so.user_quota, "Unfinished jobs per user")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  c->serve->add_option("--max-ranks", so.max_ranks, "Ranks per job")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  c->serve
      ->add_option("--max-attempts", so.max_attempts,
                   "Attempts per job for infrastructure failures "
                   "(worker_exit, rank_hung, unreachable, restart)")
      ->check(CLI::Range(1, 10))
      ->capture_default_str();
  c->serve
      ->add_option("--heartbeat-timeout", so.heartbeat_timeout_s,
                   "Lease of a rank, seconds")
      ->check(Seconds())
      ->capture_default_str();
  c->serve
      ->add_option_function<double>(
          "--heartbeat-interval",
          [&so](double s) {
            so.heartbeat_interval_ms = static_cast<int>(std::lround(s * 1000));
          },
          "Seconds between a rank's (or node leader's) heartbeats, told to "
          "the workers at registration (default 1; a large job: see "
          "docs/scale.md)")
      ->check(CLI::Range(0.05, 60.0));
  c->serve
      ->add_option("--op-timeout", so.op_timeout_s,
                   "Seconds without progress on any rank before rank_hung")
      ->check(Seconds())
      ->capture_default_str();
  c->serve
      ->add_option("--on-stop", o->serve.on_stop,
                   "On SIGINT/SIGTERM: leave running jobs to the next "
                   "coordinator on this data dir (which adopts them), or "
                   "cancel them (every launcher and rank ended; a second "
                   "signal ends them at once)")
      ->check(CLI::IsMember({"leave", "cancel"}))
      ->capture_default_str();
  c->serve->add_flag("--allow-fault-injection", so.allow_fault_injection,
                     "Accept RINGMASTER_FAULT in submitted env (tests only)");
  c->serve->add_option("--worker-rlimit", o->serve.worker_rlimits,
                       "NAME=VALUE limit on the launcher and its local ranks, "
                       "e.g. as=16GiB, nofile=4096, cpu=3600, core=0 "
                       "(repeatable; 'as' breaks CUDA ranks)");
}

// `submit`, `status`, `watch`, `results`, `cancel`: clients of a coordinator.
void AddClients(CLI::App& app, CliOptions* o, CliCommands* c) {
  if (const char* addr = std::getenv("RINGMASTER_COORDINATOR"))
    o->client.coordinator = addr;
  // `results` has a --format of its own (text, csv, jsonl).
  auto add_client_options = [o](CLI::App* cmd, bool format = true) {
    cmd->add_option("--coordinator", o->client.coordinator,
                    "Coordinator address (or $RINGMASTER_COORDINATOR)")
        ->capture_default_str();
    cmd->add_option("--token-file", o->client.token_file,
                    "File holding the token (default: $RINGMASTER_TOKEN_FILE, "
                    "then ringmaster-data/admin.token)");
    cmd->add_option("--tls-ca", o->client.tls_ca,
                    "CA of the coordinator's certificate (enables TLS)");
    cmd->add_option("--tls-cert", o->client.tls_cert,
                    "Client certificate for mTLS");
    cmd->add_option("--tls-key", o->client.tls_key, "Client key for mTLS");
    cmd->add_option("--call-timeout", o->client.timeout_s,
                    "Deadline of each call, seconds")
        ->capture_default_str();
    if (!format) return;
    cmd->add_option("--format", o->client.format, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    // The older spelling of --format json, kept for scripts (not listed).
    cmd->add_flag("--json", o->client.json, "Same as --format json")->group("");
  };
  c->submit = app.add_subcommand(
      "submit", "Submit a plan to a coordinator; prints the job id last");
  c->submit->add_option("plan", o->submit.plan_path, "Plan file (YAML)")
      ->required();
  c->submit
      ->add_option("--np", o->submit.np,
                   "Number of ranks (default: the plan's ranks, else 2)")
      ->check(CLI::Range(1, 65536));
  c->submit->add_option("--backend", o->submit.backend, "auto, host or cuda")
      ->check(CLI::IsMember({"auto", "host", "cuda"}))
      ->capture_default_str();
  c->submit->add_option(
      "--request-id", o->submit.request_id,
      "Idempotency key: resubmitting it returns the same job");
  c->submit
      ->add_option("--timeout", o->submit.timeout_s,
                   "Job deadline, seconds (default: from the plan)")
      ->check(Seconds());
  c->submit
      ->add_option("--op-timeout", o->submit.op_timeout_s,
                   "Seconds without progress before rank_hung")
      ->check(Seconds());
  c->submit->add_option("--env", o->submit.env,
                        "NAME=value for the ranks (NCCL_* only; repeatable)");
  c->submit->add_option("--export", o->submit.output,
                        "Export the finished job to EXPORT/JOB_ID/ under the "
                        "coordinator's results root (e.g. nightly/h200)");
  // The older name of --export (not listed).
  c->submit->add_option("--output", o->submit.output, "Same as --export")
      ->group("");
  add_client_options(c->submit);
  c->status = app.add_subcommand(
      "status", "One job's state, or the latest jobs without JOB");
  c->status->add_option("job", o->job, "Job id");
  c->status->add_option("--limit", o->list_limit, "Jobs listed")
      ->capture_default_str();
  add_client_options(c->status);
  c->watch = app.add_subcommand(
      "watch", "Follow a job live until it ends (exit 0 = SUCCEEDED)");
  c->watch->add_option("job", o->job, "Job id")->required();
  add_client_options(c->watch);
  c->results = app.add_subcommand("results", "A job's stored results");
  c->results->add_option("job", o->job, "Job id")->required();
  // "table" is the older name of "text" (accepted, not listed).
  c->results->add_option("--format", o->results_format, "text, csv or jsonl")
      ->check(CLI::IsMember({"text", "csv", "jsonl", "table"}))
      ->capture_default_str();
  c->results
      ->add_option("--status", o->results_status,
                   "Only results with this status")
      ->check(CLI::IsMember({"OK", "FAILED", "SKIPPED"}));
  add_client_options(c->results, /*format=*/false);
  c->cancel = app.add_subcommand(
      "cancel", "Cancel a job: its processes get SIGTERM, then SIGKILL");
  c->cancel->add_option("job", o->job, "Job id")->required();
  add_client_options(c->cancel);
}

// `launch-spec`: what a launcher submits for a plan.
void AddLaunchSpec(CLI::App& app, CliOptions* o, CliCommands* c) {
  c->launch_spec = app.add_subcommand(
      "launch-spec",
      "Print what a launcher submits for a plan (an sbatch script running "
      "srun --mpi=pmix, a kubeflow MPIJob, or an Indexed Job), for "
      "submitting by hand with a job's worker token. k8s-mpijob and k8s-job "
      "require --coordinator, --job and --image");
  c->launch_spec
      ->add_option("plan", o->launch_spec.plan_path, "Plan file (YAML)")
      ->required();
  c->launch_spec
      ->add_option(
          "--launcher", o->launch_spec.launcher,
          "slurm (sbatch script), k8s-mpijob (kubeflow MPIJob) or k8s-job "
          "(Indexed Job + headless Service, coordinator bootstrap)")
      ->check(CLI::IsMember({"slurm", "k8s-mpijob", "k8s-job"}))
      ->capture_default_str();
  c->launch_spec
      ->add_option("--np", o->launch_spec.np,
                   "Ranks (default: the plan's, else 2)")
      ->check(CLI::Range(1, 65536));
  c->launch_spec
      ->add_option("--ranks-per-node", o->launch_spec.ranks_per_node,
                   "Ranks per node (default: all on one node)")
      ->check(CLI::Range(1, 4096));
  c->launch_spec
      ->add_option("--gpus-per-node", o->launch_spec.gpus_per_node,
                   "GPUs per node to request")
      ->check(CLI::Range(0, 64));
  c->launch_spec->add_option("--partition", o->launch_spec.partition,
                             "Slurm partition");
  c->launch_spec->add_option(
      "--coordinator", o->launch_spec.coordinator,
      "Coordinator address; required for k8s-mpijob and k8s-job (slurm "
      "default: $RINGMASTER_COORDINATOR when the job starts)");
  c->launch_spec->add_option(
      "--job", o->launch_spec.job_id,
      "Job id from `ringmaster submit`; required for k8s-mpijob and k8s-job "
      "(slurm default: $RINGMASTER_JOB when the job starts)");
  c->launch_spec->add_option("--worker", o->launch_spec.worker,
                             "ringmaster-worker path on the nodes");
  c->launch_spec
      ->add_option("--backend", o->launch_spec.backend, "auto, host or cuda")
      ->check(CLI::IsMember({"auto", "host", "cuda"}))
      ->capture_default_str();
  c->launch_spec
      ->add_option("--slurm-log", o->launch_spec.output,
                   "Slurm's output file (sbatch --output)")
      ->capture_default_str();
  // The older name of --slurm-log (not listed).
  c->launch_spec
      ->add_option("--output", o->launch_spec.output, "Same as --slurm-log")
      ->group("");
  c->launch_spec->add_option(
      "--image", o->launch_spec.image,
      "Worker image; required for k8s-mpijob and k8s-job (for k8s-mpijob "
      "it must run sshd: deploy/docker/worker.Dockerfile's does)");
  c->launch_spec->add_option("--namespace", o->launch_spec.namespace_,
                             "Kubernetes namespace (k8s-mpijob, k8s-job)");
  c->launch_spec->add_option(
      "--tls-ca-secret", o->launch_spec.tls_ca_secret,
      "Secret with the coordinator's CA under key \"ca.crt\", "
      "mounted in every container (k8s-mpijob, k8s-job)");
  c->launch_spec
      ->add_option("--token-secret", o->launch_spec.token_secret,
                   "Secret with the job's worker token under key "
                   "\"token\" (k8s-mpijob, k8s-job)")
      ->capture_default_str();
}

}  // namespace

void AddCommands(CLI::App& app, CliOptions* o, CliCommands* c) {
  app.require_subcommand(1);
  AddRun(app, o, c);
  c->version = app.add_subcommand("version", "Print the version and build");
  AddMachineAndModel(app, o, c);
  AddReports(app, o, c);
  AddServe(app, o, c);
  AddServeLaunchers(app, o, c);
  AddServeLimits(app, o, c);
  AddClients(app, o, c);
  AddLaunchSpec(app, o, c);
}

}  // namespace ringmaster
