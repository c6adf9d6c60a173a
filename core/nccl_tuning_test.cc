#include "core/nccl_tuning.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// Lines as NCCL 2.28.3 printed them on the 2xH200 machine (mpirun prefixes
// are added by the launcher log).
TEST(ParseNcclTuningLine, RealLines) {
  auto c = ParseNcclTuningLine(
      "O vm:663:663 [0] NCCL INFO AllReduce: 1073741824 Bytes -> Algo RING "
      "proto SIMPLE "
      "channel{Lo..Hi}={0..23}");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->function, "AllReduce");
  EXPECT_EQ(c->bytes, 1073741824);
  EXPECT_EQ(c->algorithm, "RING");
  EXPECT_EQ(c->protocol, "SIMPLE");
  EXPECT_EQ(c->channels, 24);
  auto g = ParseNcclTuningLine(
      "vm:663:663 [0] NCCL INFO AllGather: 4 Bytes -> Algo RING proto LL "
      "channel{Lo..Hi}={0..0}");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->channels, 1);
  EXPECT_FALSE(ParseNcclTuningLine(
      "vm:663:663 [0] NCCL INFO NCCL version 2.28.3+cuda13.0"));
  EXPECT_FALSE(
      ParseNcclTuningLine("NCCL INFO   Algorithm   |                           "
                          " Tree                  |"));
}

TEST(NcclTuningKey, PerRankBytes) {
  v1::Case c;
  c.set_dtype(v1::FLOAT32);
  c.set_count(2);
  c.set_collective(v1::ALL_REDUCE);
  EXPECT_EQ(*NcclTuningKey(c, 2),
            std::make_pair(std::string("AllReduce"), int64_t{8}));
  c.set_collective(v1::ALL_GATHER);  // 8 B gathered over 2 ranks: 4 B each
  EXPECT_EQ(*NcclTuningKey(c, 2),
            std::make_pair(std::string("AllGather"), int64_t{4}));
  c.set_collective(v1::REDUCE_SCATTER);
  c.set_count(262144);
  EXPECT_EQ(*NcclTuningKey(c, 4),
            std::make_pair(std::string("ReduceScatter"), int64_t{262144}));
  c.set_collective(v1::SEND_RECV);
  EXPECT_FALSE(NcclTuningKey(c, 2).has_value());
}

}  // namespace
}  // namespace ringmaster
