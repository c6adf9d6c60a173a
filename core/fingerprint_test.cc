#include "core/fingerprint.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::Fingerprint Base(int pid) {
  v1::Fingerprint f;
  f.set_host("node" + std::to_string(pid));
  f.set_pid(pid);
  f.set_build_id("abc");
  f.set_nccl_version("2.28.9");
  f.set_gpu_model("NVIDIA H200");
  (*f.mutable_nccl_env())["NCCL_NVLS_ENABLE"] = "0";
  return f;
}

TEST(CompareFingerprints, HostAndPidMayDiffer) {
  EXPECT_FALSE(CompareFingerprints({Base(1), Base(2), Base(3)}).has_value());
  EXPECT_FALSE(CompareFingerprints({Base(1)}).has_value());
}

TEST(CompareFingerprints, NamesFieldsAndRanks) {
  v1::Fingerprint odd = Base(3);
  odd.set_build_id("xyz");
  (*odd.mutable_nccl_env())["NCCL_NVLS_ENABLE"] = "1";
  v1::Fingerprint gpu = Base(4);
  gpu.set_gpu_model("NVIDIA H100");
  auto m = CompareFingerprints({Base(1), Base(2), odd, gpu});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->fields,
            (std::vector<std::string>{"build_id", "gpu_model", "nccl_env"}));
  EXPECT_EQ(m->ranks, (std::vector<int>{2, 3}));
  EXPECT_NE(m->detail.find("build_id: rank 0 \"abc\" vs rank 2 \"xyz\""),
            std::string::npos)
      << m->detail;
}

}  // namespace
}  // namespace ringmaster
