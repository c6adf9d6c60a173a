#include "cli/cli_args.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>
#include <vector>

namespace ringmaster {
namespace {

// Parses `args` (without the program name) into fresh options; the CLI11
// error's exit code, or 0.
// The app owns the subcommands `c` points to: it lives as long as they do.
struct Parsed {
  CliOptions o;
  CliCommands c;
  std::unique_ptr<CLI::App> app = std::make_unique<CLI::App>("test");
  int error = 0;
  std::string message;
};

Parsed Parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App& app = *p.app;
  AddCommands(app, &p.o, &p.c);
  std::vector<const char*> argv = {"ringmaster"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::ParseError& e) {
    p.error = e.get_exit_code();
    p.message = e.what();
  }
  return p;
}

TEST(CliArgs, RunTakesItsOptionsAndKeepsTheDocumentedDefaults) {
  Parsed p = Parse({"run", "plan.yaml", "--np", "4", "--backend", "host",
                    "--mpirun-arg", "--bind-to", "--mpirun-arg", "none"});
  ASSERT_EQ(p.error, 0) << p.message;
  EXPECT_TRUE(p.c.run->parsed());
  EXPECT_EQ(p.o.run.plan_path, "plan.yaml");
  EXPECT_EQ(p.o.run.np, 4);
  EXPECT_EQ(p.o.run.backend, "host");
  EXPECT_EQ(p.o.run.mpirun_args,
            (std::vector<std::string>{"--bind-to", "none"}));
  EXPECT_EQ(p.o.run.out_dir, "ringmaster-results");
  EXPECT_EQ(p.o.run.rounds, 1);
  EXPECT_EQ(p.o.run.op_timeout_s, 60);
  EXPECT_TRUE(p.o.run.worker.empty());
}

TEST(CliArgs, RunWithoutAPlanLeavesThePathEmpty) {
  Parsed p = Parse({"run"});
  ASSERT_EQ(p.error, 0) << p.message;
  EXPECT_TRUE(p.o.run.plan_path.empty());  // the quickstart, found later
}

TEST(CliArgs, OutOfRangeAndUnknownValuesAreRefused) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"run", "--np", "0"},
           {"run", "--backend", "gpu"},
           {"run", "--rounds", "0"},
           {"run", "--worker", "/no/such/worker"},
           {"serve", "--launcher", "ssh"},
           {"results", "JOB", "--format", "xml"},
           {"report"},  // results are required
           {"submit"},  // so is the plan
           {"frobnicate"},
           {}}) {  // a subcommand is required
    Parsed p = Parse(args);
    EXPECT_NE(p.error, 0) << ::testing::PrintToString(args);
  }
}

TEST(CliArgs, ClientsShareTheirOptionsAndReadTheCoordinatorFromTheEnvironment) {
  setenv("RINGMASTER_COORDINATOR", "10.0.0.5:7450", 1);
  Parsed p = Parse({"status", "--limit", "5", "--json"});
  unsetenv("RINGMASTER_COORDINATOR");
  ASSERT_EQ(p.error, 0) << p.message;
  EXPECT_TRUE(p.c.status->parsed());
  EXPECT_EQ(p.o.list_limit, 5);
  EXPECT_TRUE(p.o.client.json);
  EXPECT_EQ(p.o.client.coordinator, "10.0.0.5:7450");

  Parsed w = Parse({"watch", "job-7", "--call-timeout", "3"});
  ASSERT_EQ(w.error, 0) << w.message;
  EXPECT_EQ(w.o.job, "job-7");
  EXPECT_EQ(w.o.client.timeout_s, 3);
}

TEST(CliArgs, ServeDefaultsToLoopbackAndMpirun) {
  Parsed p = Parse({"serve", "--max-running", "2"});
  ASSERT_EQ(p.error, 0) << p.message;
  EXPECT_EQ(p.o.serve.service.server.address, "127.0.0.1:7450");
  EXPECT_EQ(p.o.serve.service.launcher, "mpirun");
  EXPECT_EQ(p.o.serve.service.max_running, 2);
}

TEST(CliArgs, SubmitAndLaunchSpecTakeTheirOwnRankCounts) {
  Parsed s = Parse({"submit", "p.yaml", "--np", "8", "--env", "NCCL_DEBUG=INFO",
                    "--output", "nightly/h200"});
  ASSERT_EQ(s.error, 0) << s.message;
  EXPECT_EQ(s.o.submit.np, 8);
  EXPECT_EQ(s.o.submit.env, (std::vector<std::string>{"NCCL_DEBUG=INFO"}));
  EXPECT_EQ(s.o.submit.output, "nightly/h200");
  Parsed l = Parse({"launch-spec", "p.yaml", "--launcher", "k8s-job", "--np",
                    "16", "--ranks-per-node", "8"});
  ASSERT_EQ(l.error, 0) << l.message;
  EXPECT_EQ(l.o.launch_spec.launcher, "k8s-job");
  EXPECT_EQ(l.o.launch_spec.np, 16);
  EXPECT_EQ(l.o.launch_spec.ranks_per_node, 8);
}

}  // namespace
}  // namespace ringmaster
