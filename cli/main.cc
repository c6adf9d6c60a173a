// ringmaster: the command-line interface.
//
//   ringmaster run [PLAN] [--np N] [--out DIR] ...   the main job
//   ringmaster validate PLAN                          check a plan, run nothing
//   ringmaster serve [--listen ADDR] [--data DIR] ...  the coordinator service
//   ringmaster submit|status|watch|results|cancel ...  its clients
//   ringmaster report RESULTS... [--html F]       tables, CSV, JSON Lines, HTML
//   ringmaster compare BASE NEW                      noise-aware verdicts
//   ringmaster verdict RESULTS... --rules F          pass/fail per
//   node/GPU/pair ringmaster version
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/model_commands.h"
#include "cli/report_commands.h"
#include "cli/run_command.h"
#include "cli/service_commands.h"
#include "core/build_info.h"

int main(int argc, char** argv) {
  std::vector<std::string> command_line(argv, argv + argc);
  CLI::App app{
      "Ringmaster: what does this GPU cluster really deliver, and why?\n"
      "Runs benchmark plans through mpirun and stores every result: at once "
      "(run), or through a long-running coordinator (serve, submit, watch)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ringmaster ") +
                                        ringmaster::RingmasterVersion() + " (" +
                                        ringmaster::GitSha() + ")");

  ringmaster::RunOptions run_opts;
  auto* run = app.add_subcommand(
      "run",
      "Run a plan: embedded coordinator + mpirun launch. Without PLAN runs "
      "plans/quickstart.yaml on all visible GPUs, or on 2 host ranks without "
      "GPUs.");
  run->add_option("plan", run_opts.plan_path, "Plan file (YAML)");
  run->add_option("--np", run_opts.np,
                  "Number of ranks (default: plan's, else #GPUs, else 2)")
      ->check(CLI::Range(1, 65536));
  run->add_option("--out", run_opts.out_dir,
                  "Results folder: <out>/ringmaster.db and "
                  "<out>/<job-id>/results.{jsonl,csv}")
      ->capture_default_str();
  run->add_option("--backend", run_opts.backend,
                  "auto, host (MPI on CPUs) or cuda (NCCL)")
      ->check(CLI::IsMember({"auto", "host", "cuda"}))
      ->capture_default_str();
  run->add_option("--hostfile", run_opts.hostfile,
                  "mpirun hostfile for multi-node runs")
      ->check(CLI::ExistingFile);
  run->add_option("--mpirun", run_opts.mpirun, "mpirun executable")
      ->capture_default_str();
  run->add_option("--mpirun-arg", run_opts.mpirun_args,
                  "Extra argument passed to mpirun (repeatable)");
  run->add_option("--timeout", run_opts.timeout_s,
                  "Job deadline in seconds (default: derived from the plan)")
      ->check(CLI::PositiveNumber);
  run->add_option(
         "--heartbeat-timeout", run_opts.heartbeat_timeout_s,
         "Seconds without a heartbeat before a rank counts as unreachable")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--op-timeout", run_opts.op_timeout_s,
                  "Seconds without progress on any rank before the rank "
                  "furthest behind is declared hung (rank_hung)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_flag("--quiet", run_opts.quiet, "Do not echo the launcher's output");
  run->add_flag("--nccl-algorithms", run_opts.nccl_algorithms,
                "Label every result with NCCL's algorithm, protocol and "
                "channels, read from "
                "NCCL's tuning log in a one-operation probe launch before "
                "each variant's first measured one");
  run->add_option("--rounds", run_opts.rounds,
                  "Run the plan this many times, one job per variant in each "
                  "round (variants A and B run A B A B ...): an interleaved "
                  "A/B benchmark for `ringmaster compare OUT OUT "
                  "--base-variant A --new-variant B`, or repeated runs of a "
                  "plan without variants")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  run->add_option("--worker", run_opts.worker,
                  "The worker binary to launch (default: ringmaster-worker "
                  "beside this one); a worker built with benchmark kinds of "
                  "its own runs plans that name them")
      ->check(CLI::ExistingFile);

  std::string validate_path, validate_worker;
  auto* validate = app.add_subcommand(
      "validate", "Check a plan and print its expansion; runs nothing");
  validate->add_option("plan", validate_path, "Plan file (YAML)")->required();
  validate->add_option("--worker", validate_worker,
                       "The worker whose benchmark kinds the plan may name "
                       "(default: ringmaster-worker beside this one)")
      ->check(CLI::ExistingFile);

  auto* version = app.add_subcommand("version", "Print the version and build");

  // The machine and the model.
  ringmaster::TopoOptions topo_opts;
  auto* topo = app.add_subcommand(
      "topo",
      "Detect this machine: CPUs and NUMA nodes (hwloc), NICs, GPUs with "
      "their NVLink and PCIe links, and each path's speed of light");
  topo->add_option("--format", topo_opts.format,
                   "text, or yaml (the topology schema of topologies/)")
      ->check(CLI::IsMember({"text", "yaml"}))
      ->capture_default_str();
  topo->add_option("--worker", topo_opts.worker,
                   "ringmaster-worker for the GPU probe (default: beside "
                   "this binary)");
  ringmaster::PredictOptions predict_opts;
  auto* predict = app.add_subcommand(
      "predict",
      "Predict a plan's collectives on a described system "
      "(topologies/*.yaml), or calibrate the model on measured results");
  predict->add_option("plan", predict_opts.plan, "Plan to predict (YAML)");
  predict->add_option("--topology", predict_opts.topology, "Topology file")
      ->required()
      ->check(CLI::ExistingFile);
  predict
      ->add_option("--nodes", predict_opts.nodes,
                   "Nodes (default: the topology's)")
      ->check(CLI::Range(1, 100000));
  predict->add_option("--sizes", predict_opts.sizes,
                      "MIN:MAX: powers of two instead of the plan's sizes");
  predict
      ->add_option("--calibrate", predict_opts.calibrate,
                   "Results (JSON Lines) to fit the model on first "
                   "(repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  predict
      ->add_option("--min-size", predict_opts.min_size,
                   "Calibrate on sizes of at least this much")
      ->capture_default_str();
  predict
      ->add_option("--holdout", predict_opts.holdout,
                   "Leave every k-th size out of the fit and report the "
                   "error there")
      ->check(CLI::Range(2, 100));
  predict->add_option("--params-out", predict_opts.params_out,
                      "Write the fitted model parameters (YAML) here");
  predict->add_option("--summary", predict_opts.summary_out,
                      "Write the figures (JSON) here");
  predict
      ->add_option("--compute-from", predict_opts.compute_from,
                   "Training: one rank's measured steps (results JSON "
                   "Lines) as each rank's compute (repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  predict
      ->add_option("--gemm-efficiency", predict_opts.gemm_efficiency,
                   "Training without --compute-from: the share of the GPU's "
                   "dense peak its GEMMs reach")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  predict
      ->add_option("--compare", predict_opts.compare,
                   "Another topology to predict the plan on, side by side "
                   "(repeatable: NVLink vs PCIe vs InfiniBand vs RoCE)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  predict
      ->add_option("--measured", predict_opts.measured,
                   "Results (JSON Lines) whose busbw goes beside the "
                   "predictions (repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  predict->add_option("--format", predict_opts.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  ringmaster::ReportOptions report_opts;
  auto* report = app.add_subcommand(
      "report",
      "Show stored results: a terminal table (default), CSV, JSON Lines, or "
      "one self-contained HTML file with plots (--html)");
  report
      ->add_option("results", report_opts.inputs,
                   "JSON Lines files or `run --out` folders (searched for "
                   "results.jsonl)")
      ->required();
  report->add_option("--html", report_opts.html,
                     "Write the HTML report (plots + tables) to this file");
  report
      ->add_option("--format", report_opts.format,
                   "text, csv or jsonl on standard output (default: text, "
                   "none with --html)")
      ->check(CLI::IsMember({"text", "csv", "jsonl"}));
  report
      ->add_option("--topology", report_opts.topologies,
                   "Overlay the model's predictions on this system "
                   "(topologies/*.yaml; repeatable: NVLink vs PCIe vs "
                   "InfiniBand vs RoCE side by side)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  report->add_option("--title", report_opts.title, "The report's title")
      ->capture_default_str();

  ringmaster::CompareCommandOptions compare_opts;
  auto* compare = app.add_subcommand(
      "compare",
      "Noise-aware verdicts (better / same / worse) per measurement between "
      "two sets of results; exit 1 when something got worse or failed");
  compare
      ->add_option("base", compare_opts.base,
                   "Baseline results: a JSON Lines file or a folder (several "
                   "runs pool their samples)")
      ->required();
  compare->add_option("new", compare_opts.next, "Results to judge")->required();
  compare
      ->add_option("--alpha", compare_opts.alpha,
                   "Significance level of the Mann-Whitney U test")
      ->check(CLI::Range(1e-9, 0.5))
      ->capture_default_str();
  compare
      ->add_option("--threshold", compare_opts.threshold,
                   "Smallest relative change of the median that counts")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  compare->add_option("--format", compare_opts.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  compare->add_flag("--all", compare_opts.all,
                    "List unchanged measurements too");
  compare->add_option("--base-variant", compare_opts.base_variant,
                      "Only BASE's results of this variant (a plan's "
                      "variants[].name), matched with NEW's by all else");
  compare->add_option("--new-variant", compare_opts.new_variant,
                      "Only NEW's results of this variant (BASE and NEW may "
                      "be the same folder: ringmaster run --rounds N)");

  ringmaster::VerdictCommandOptions verdict_opts;
  auto* verdict = app.add_subcommand(
      "verdict",
      "Judge results against rules and references (expected values with "
      "tolerances, speed-of-light shares, fleet medians, a baseline): pass "
      "or fail per node, GPU and GPU pair with the evidence; exit 1 on any "
      "failed check (docs/report.md, rules/ for examples)");
  verdict
      ->add_option("results", verdict_opts.inputs,
                   "JSON Lines files or --out folders")
      ->required();
  verdict->add_option("--rules", verdict_opts.rules, "Rules file (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  verdict->add_option("--baseline", verdict_opts.baseline,
                      "Baseline results for baseline_within rules");
  verdict->add_option("--format", verdict_opts.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  // The coordinator as a service.
  ringmaster::ServeOptions serve_opts;
  auto* serve = app.add_subcommand(
      "serve",
      "Run the coordinator service: accepts plans (ringmaster submit), "
      "launches them through mpirun one admission slot at a time, stores "
      "every result in DIR/ringmaster.db and survives restarts. Writes the "
      "admin token to DIR/admin.token (mode 0600).");
  auto& so = serve_opts.service;
  so.server.address = "127.0.0.1:7450";
  serve
      ->add_option("--listen", so.server.address,
                   "Listen address; anything but loopback needs --tls-cert "
                   "and --tls-key")
      ->capture_default_str();
  serve->add_option("--data", so.data_dir, "Data folder (store, token, logs)")
      ->capture_default_str();
  serve->add_option("--results-root", so.results_root,
                    "Where jobs submitted with --output are exported "
                    "(default: DATA/results); nothing is written outside it");
  serve
      ->add_option("--users", serve_opts.users_file,
                   "Users file: one \"NAME TOKEN\" per line (role user)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--tls-cert", serve_opts.tls_cert_file,
                   "Server certificate (PEM)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--tls-key", serve_opts.tls_key_file,
                   "Server private key (PEM)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--tls-client-ca", serve_opts.tls_client_ca_file,
                   "Require client certificates signed by this CA (mTLS)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--launcher", so.launcher,
                   "mpirun; slurm (sbatch + srun --mpi=pmix, followed with "
                   "squeue, cancelled with scancel); k8s (manifests applied "
                   "with kubectl, deleted on cancel); or external (ranks "
                   "started by other means register with the job's worker "
                   "token)")
      ->check(CLI::IsMember({"mpirun", "slurm", "k8s", "external"}))
      ->capture_default_str();
  serve->add_option("--slurm-partition", so.slurm_partition,
                    "Slurm partition (default: the cluster's)");
  serve
      ->add_option("--slurm-ranks-per-node", so.slurm_ranks_per_node,
                   "Ranks per node under Slurm (default: the plan's "
                   "ranks_per_node, else all on one node)")
      ->check(CLI::Range(1, 4096));
  serve
      ->add_option("--slurm-gpus-per-node", so.slurm_gpus_per_node,
                   "GPUs requested per node (--gpus-per-node)")
      ->check(CLI::Range(0, 64));
  serve->add_option("--slurm-arg", so.slurm_args,
                    "Extra sbatch option, e.g. --account=x (repeatable)");
  serve
      ->add_option("--k8s-style", so.k8s_style,
                   "job (Indexed Job + headless Service, ranks bootstrap "
                   "through the coordinator) or mpijob (kubeflow MPIJob)")
      ->check(CLI::IsMember({"job", "mpijob"}))
      ->capture_default_str();
  serve->add_option("--k8s-image", so.k8s_image,
                    "Worker image (--launcher k8s)");
  serve->add_option("--k8s-namespace", so.k8s_namespace,
                    "Namespace (default: kubectl's)");
  serve
      ->add_option("--k8s-ranks-per-pod", so.k8s_ranks_per_pod,
                   "Ranks per worker pod, one per GPU (default: the plan's "
                   "ranks_per_node, else 1)")
      ->check(CLI::Range(1, 4096));
  serve
      ->add_option("--k8s-gpus-per-pod", so.k8s_gpus_per_pod,
                   "nvidia.com/gpu limit per worker pod")
      ->check(CLI::Range(0, 64));
  serve->add_option("--k8s-tls-ca-secret", so.k8s_tls_ca_secret,
                    "Secret with this coordinator's CA (key ca.crt) for the "
                    "pods");
  serve->add_option("--kubectl", so.kubectl, "kubectl executable")
      ->capture_default_str();
  serve
      ->add_option("--k8s-poll", so.k8s_poll_s,
                   "Seconds between kubectl get calls while a job runs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->add_option("--mpirun", so.mpirun, "mpirun executable")
      ->capture_default_str();
  serve->add_option("--hostfile", so.hostfile, "mpirun hostfile")
      ->check(CLI::ExistingFile);
  serve->add_option("--mpirun-arg", so.mpirun_args,
                    "Extra argument passed to mpirun (repeatable)");
  serve->add_option("--advertise", so.worker_address,
                    "Address the ranks use to reach this coordinator "
                    "(default: 127.0.0.1 and the listening port)");
  serve->add_option("--max-running", so.max_running, "Jobs launched at once")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  serve
      ->add_option("--max-queued", so.max_queued,
                   "Jobs waiting before submissions get RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  serve->add_option("--user-quota", so.user_quota, "Unfinished jobs per user")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  serve->add_option("--max-ranks", so.max_ranks, "Ranks per job")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  serve
      ->add_option("--max-attempts", so.max_attempts,
                   "Attempts per job for infrastructure failures "
                   "(worker_exit, rank_hung, unreachable, restart)")
      ->check(CLI::Range(1, 10))
      ->capture_default_str();
  serve
      ->add_option("--heartbeat-timeout", so.heartbeat_timeout_s,
                   "Lease of a rank, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve
      ->add_option("--op-timeout", so.op_timeout_s,
                   "Seconds without progress on any rank before rank_hung")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->add_flag("--allow-fault-injection", so.allow_fault_injection,
                  "Accept RINGMASTER_FAULT in submitted env (tests only)");
  serve->add_option("--worker-rlimit", serve_opts.worker_rlimits,
                    "NAME=VALUE limit on the launcher and its local ranks, "
                    "e.g. as=16GiB, nofile=4096, cpu=3600, core=0 "
                    "(repeatable; 'as' breaks CUDA ranks)");

  ringmaster::ClientOptions client_opts;
  if (const char* addr = std::getenv("RINGMASTER_COORDINATOR"))
    client_opts.coordinator = addr;
  auto add_client_options = [&client_opts](CLI::App* cmd) {
    cmd->add_option("--coordinator", client_opts.coordinator,
                    "Coordinator address (or $RINGMASTER_COORDINATOR)")
        ->capture_default_str();
    cmd->add_option("--token-file", client_opts.token_file,
                    "File holding the token (default: $RINGMASTER_TOKEN_FILE, "
                    "then ringmaster-data/admin.token)");
    cmd->add_option("--tls-ca", client_opts.tls_ca,
                    "CA of the coordinator's certificate (enables TLS)");
    cmd->add_option("--tls-cert", client_opts.tls_cert,
                    "Client certificate for mTLS");
    cmd->add_option("--tls-key", client_opts.tls_key, "Client key for mTLS");
    cmd->add_option("--call-timeout", client_opts.timeout_s,
                    "Deadline of each call, seconds")
        ->capture_default_str();
    cmd->add_flag("--json", client_opts.json, "JSON output");
  };
  ringmaster::SubmitOptions submit_opts;
  auto* submit = app.add_subcommand(
      "submit", "Submit a plan to a coordinator; prints the job id last");
  submit->add_option("plan", submit_opts.plan_path, "Plan file (YAML)")
      ->required();
  submit->add_option("--np", submit_opts.np, "Number of ranks")
      ->check(CLI::Range(1, 65536));
  submit->add_option("--backend", submit_opts.backend, "auto, host or cuda")
      ->check(CLI::IsMember({"auto", "host", "cuda"}))
      ->capture_default_str();
  submit->add_option("--request-id", submit_opts.request_id,
                     "Idempotency key: resubmitting it returns the same job");
  submit
      ->add_option("--timeout", submit_opts.timeout_s,
                   "Job deadline, seconds (default: from the plan)")
      ->check(CLI::PositiveNumber);
  submit
      ->add_option("--op-timeout", submit_opts.op_timeout_s,
                   "Seconds without progress before rank_hung")
      ->check(CLI::PositiveNumber);
  submit->add_option("--env", submit_opts.env,
                     "NAME=value for the ranks (NCCL_* only; repeatable)");
  submit->add_option("--output", submit_opts.output,
                     "Export the finished job to OUTPUT/JOB_ID/ under the "
                     "coordinator's results root (e.g. nightly/h200)");
  add_client_options(submit);
  std::string job_arg;
  int list_limit = 20;
  auto* status = app.add_subcommand(
      "status", "One job's state, or the latest jobs without JOB");
  status->add_option("job", job_arg, "Job id");
  status->add_option("--limit", list_limit, "Jobs listed")
      ->capture_default_str();
  add_client_options(status);
  auto* watch = app.add_subcommand(
      "watch", "Follow a job live until it ends (exit 0 = SUCCEEDED)");
  watch->add_option("job", job_arg, "Job id")->required();
  add_client_options(watch);
  std::string results_format = "table";
  auto* results = app.add_subcommand("results", "A job's stored results");
  results->add_option("job", job_arg, "Job id")->required();
  results->add_option("--format", results_format, "table, csv or jsonl")
      ->check(CLI::IsMember({"table", "csv", "jsonl"}))
      ->capture_default_str();
  std::string results_status;
  results
      ->add_option("--status", results_status, "Only results with this status")
      ->check(CLI::IsMember({"OK", "FAILED", "SKIPPED"}));
  add_client_options(results);
  auto* cancel = app.add_subcommand(
      "cancel", "Cancel a job: its processes get SIGTERM, then SIGKILL");
  cancel->add_option("job", job_arg, "Job id")->required();
  add_client_options(cancel);

  ringmaster::LaunchSpecOptions spec_opts;
  auto* launch_spec = app.add_subcommand(
      "launch-spec",
      "Print what a launcher submits for a plan (an sbatch script running "
      "srun --mpi=pmix), for submitting by hand with a job's worker token");
  launch_spec->add_option("plan", spec_opts.plan_path, "Plan file (YAML)")
      ->required();
  launch_spec
      ->add_option(
          "--launcher", spec_opts.launcher,
          "slurm (sbatch script), k8s-mpijob (kubeflow MPIJob) or k8s-job "
          "(Indexed Job + headless Service, coordinator bootstrap)")
      ->check(CLI::IsMember({"slurm", "k8s-mpijob", "k8s-job"}))
      ->capture_default_str();
  launch_spec
      ->add_option("--np", spec_opts.np, "Ranks (default: the plan's, else 2)")
      ->check(CLI::Range(1, 65536));
  launch_spec
      ->add_option("--ranks-per-node", spec_opts.ranks_per_node,
                   "Ranks per node (default: all on one node)")
      ->check(CLI::Range(1, 4096));
  launch_spec
      ->add_option("--gpus-per-node", spec_opts.gpus_per_node,
                   "GPUs per node to request")
      ->check(CLI::Range(0, 64));
  launch_spec->add_option("--partition", spec_opts.partition,
                          "Slurm partition");
  launch_spec->add_option(
      "--coordinator", spec_opts.coordinator,
      "Coordinator address (default: $RINGMASTER_COORDINATOR "
      "when the job starts)");
  launch_spec->add_option("--job", spec_opts.job_id,
                          "Job id from `ringmaster submit` (default: "
                          "$RINGMASTER_JOB when the job starts)");
  launch_spec->add_option("--worker", spec_opts.worker,
                          "ringmaster-worker path on the nodes");
  launch_spec->add_option("--backend", spec_opts.backend, "auto, host or cuda")
      ->check(CLI::IsMember({"auto", "host", "cuda"}))
      ->capture_default_str();
  launch_spec->add_option("--output", spec_opts.output, "Slurm output file")
      ->capture_default_str();
  launch_spec->add_option("--image", spec_opts.image,
                          "Worker image (k8s-mpijob, k8s-job)");
  launch_spec->add_option("--namespace", spec_opts.namespace_,
                          "Kubernetes namespace (k8s-mpijob, k8s-job)");
  launch_spec->add_option(
      "--tls-ca-secret", spec_opts.tls_ca_secret,
      "Secret with the coordinator's CA under key \"ca.crt\", "
      "mounted in every container (k8s-mpijob, k8s-job)");
  launch_spec
      ->add_option("--token-secret", spec_opts.token_secret,
                   "Secret with the job's worker token under key "
                   "\"token\" (k8s-mpijob, k8s-job)")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : ringmaster::kExitUsage;
  }
  if (version->parsed()) {
    std::cout << "ringmaster " << ringmaster::RingmasterVersion() << " ("
              << ringmaster::GitSha() << ")\n";
    return 0;
  }
  if (validate->parsed())
    return ringmaster::ValidateCommand(validate_path, validate_worker);
  if (report->parsed()) return ringmaster::ReportCommand(report_opts);
  if (compare->parsed()) return ringmaster::CompareCommand(compare_opts);
  if (verdict->parsed()) return ringmaster::VerdictCommand(verdict_opts);
  if (topo->parsed()) return ringmaster::TopoCommand(topo_opts);
  if (predict->parsed()) {
    if (predict_opts.plan.empty() && predict_opts.calibrate.empty()) {
      std::cerr << "ringmaster: error: predict needs a plan, --calibrate "
                   "results, or both\n";
      return ringmaster::kExitUsage;
    }
    return ringmaster::PredictCommand(predict_opts);
  }
  if (serve->parsed()) return ringmaster::ServeCommand(serve_opts);
  if (submit->parsed())
    return ringmaster::SubmitCommand(client_opts, submit_opts);
  if (status->parsed())
    return ringmaster::StatusCommand(client_opts, job_arg, list_limit);
  if (watch->parsed()) return ringmaster::WatchCommand(client_opts, job_arg);
  if (results->parsed())
    return ringmaster::ResultsCommand(client_opts, job_arg, results_format,
                                      results_status);
  if (cancel->parsed()) return ringmaster::CancelCommand(client_opts, job_arg);
  if (launch_spec->parsed()) return ringmaster::LaunchSpecCommand(spec_opts);
  return ringmaster::RunCommand(run_opts, command_line);
}
