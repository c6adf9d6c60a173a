#include "core/datasheet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/topology.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

// Every entry of the shipped table loads and is complete, the built-in
// copy is that file, and the models the table must cover are there.
TEST(Datasheets, EveryEntryLoadsAndTheBuiltInTableIsTheFile) {
  std::ifstream in(std::string(RINGMASTER_SOURCE_DIR) +
                   "/topologies/datasheets.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto table = ParseDatasheets(text.str(), "datasheets.yaml");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->SerializeAsString(),
            BuiltInDatasheets().SerializeAsString());
  for (const char* name :
       {"NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB",
        "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe",
        "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H200",
        "NVIDIA L40S", "NVIDIA L4", "NVIDIA B200"}) {
    const v1::Datasheet* d = FindDatasheet(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_GT(DatasheetPeakTflops(*d, v1::BFLOAT16), 0) << name;
    EXPECT_GT(DatasheetPeakTflops(*d, v1::TFLOAT32), 0) << name;
    EXPECT_GT(PcieGbps(d->pcie().generation(), d->pcie().width()), 0) << name;
  }
  // Hopper, Ada and Blackwell have fp8; Ampere does not.
  EXPECT_GT(DatasheetPeakTflops(*FindDatasheet("NVIDIA H200"), v1::FLOAT8_E4M3),
            0);
  EXPECT_EQ(DatasheetPeakTflops(*FindDatasheet("NVIDIA A100-SXM4-80GB"),
                                v1::FLOAT8_E4M3),
            0);
}

TEST(Datasheets, TelemetryNamesFindTheirEntryAndUnknownGpusNone) {
  const v1::Datasheet* d = FindDatasheet("GPU 0000:19:00.0 NVIDIA H200");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->gpu().hbm_gbps(), 4800);
  EXPECT_EQ(DatasheetPeakTflops(*d, v1::BFLOAT16), 989.5);
  EXPECT_EQ(FindDatasheet("NVIDIA H200 NVL"), nullptr);  // another product
  EXPECT_EQ(FindDatasheet("NVIDIA GeForce RTX 4090"), nullptr);
  EXPECT_EQ(FindDatasheet(""), nullptr);
}

TEST(Datasheets, IncompleteEntriesAreRefusedNamingTheField) {
  auto missing = ParseDatasheets(
      "gpus:\n  - names: [X]\n    gpu: {model: X, hbm_gib: 1, hbm_gbps: 1,"
      " peak_tflops: {fp32: 1, bf16: 2}}\n    pcie: {generation: 4, width: "
      "16}\n    source: s\n",
      "t.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("gpus[0]: tdp_w"));
  auto twice = ParseDatasheets(
      "gpus:\n"
      "  - {names: [X], gpu: {model: X, hbm_gib: 1, hbm_gbps: 1, peak_tflops: "
      "{fp32: 1, bf16: 2}}, pcie: {generation: 4, width: 16}, tdp_w: 1, "
      "source: s}\n"
      "  - {names: [X], gpu: {model: Y, hbm_gib: 1, hbm_gbps: 1, peak_tflops: "
      "{fp32: 1, bf16: 2}}, pcie: {generation: 4, width: 16}, tdp_w: 1, "
      "source: s}\n",
      "t.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("in two entries"));
}

}  // namespace
}  // namespace ringmaster
