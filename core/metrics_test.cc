#include "core/metrics.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

struct FactorCase {
  v1::Collective collective;
  int n;
  double factor;  // computed by hand
};

class BusBwFactorTest : public ::testing::TestWithParam<FactorCase> {};

TEST_P(BusBwFactorTest, MatchesNcclTests) {
  const FactorCase& c = GetParam();
  EXPECT_DOUBLE_EQ(BusBwFactor(c.collective, c.n), c.factor);
}

INSTANTIATE_TEST_SUITE_P(
    AllCollectives, BusBwFactorTest,
    ::testing::Values(
        // all_reduce: 2(n-1)/n
        FactorCase{v1::ALL_REDUCE, 1, 0.0}, FactorCase{v1::ALL_REDUCE, 2, 1.0},
        FactorCase{v1::ALL_REDUCE, 4, 1.5}, FactorCase{v1::ALL_REDUCE, 8, 1.75},
        // all_gather, reduce_scatter, all_to_all: (n-1)/n
        FactorCase{v1::ALL_GATHER, 1, 0.0}, FactorCase{v1::ALL_GATHER, 2, 0.5},
        FactorCase{v1::ALL_GATHER, 4, 0.75},
        FactorCase{v1::ALL_GATHER, 8, 0.875},
        FactorCase{v1::REDUCE_SCATTER, 1, 0.0},
        FactorCase{v1::REDUCE_SCATTER, 2, 0.5},
        FactorCase{v1::REDUCE_SCATTER, 4, 0.75},
        FactorCase{v1::REDUCE_SCATTER, 8, 0.875},
        FactorCase{v1::ALL_TO_ALL, 1, 0.0}, FactorCase{v1::ALL_TO_ALL, 2, 0.5},
        FactorCase{v1::ALL_TO_ALL, 4, 0.75},
        FactorCase{v1::ALL_TO_ALL, 8, 0.875},
        // broadcast, reduce, send_recv: 1
        FactorCase{v1::BROADCAST, 1, 1.0}, FactorCase{v1::BROADCAST, 2, 1.0},
        FactorCase{v1::BROADCAST, 4, 1.0}, FactorCase{v1::BROADCAST, 8, 1.0},
        FactorCase{v1::REDUCE, 1, 1.0}, FactorCase{v1::REDUCE, 2, 1.0},
        FactorCase{v1::REDUCE, 4, 1.0}, FactorCase{v1::REDUCE, 8, 1.0},
        FactorCase{v1::SEND_RECV, 1, 1.0}, FactorCase{v1::SEND_RECV, 2, 1.0},
        FactorCase{v1::SEND_RECV, 4, 1.0}, FactorCase{v1::SEND_RECV, 8, 1.0}));

TEST(BusBwFactor, InvalidInputs) {
  EXPECT_EQ(BusBwFactor(v1::ALL_REDUCE, 0), 0.0);
  EXPECT_EQ(BusBwFactor(v1::COLLECTIVE_UNSPECIFIED, 4), 0.0);
}

TEST(GigabytesPerSecond, Decimal) {
  // 8 GiB in 24.683 ms (nccl-tests anchor): 8589934592 / 0.024683 / 1e9.
  EXPECT_NEAR(GigabytesPerSecond(8589934592LL, 0.0246826692), 348.01, 0.01);
  EXPECT_EQ(GigabytesPerSecond(100, 0), 0.0);
}

TEST(FillBandwidth, AllReduceFourRanks) {
  v1::Result r;
  r.mutable_case_()->set_collective(v1::ALL_REDUCE);
  r.mutable_case_()->set_size_bytes(1000000000);
  r.mutable_stats()->set_median_s(0.5);
  r.set_nranks(4);
  FillBandwidth(&r);
  EXPECT_DOUBLE_EQ(r.algbw_gbps(), 2.0);  // 1e9 B / 0.5 s
  EXPECT_DOUBLE_EQ(r.busbw_gbps(), 3.0);  // 2.0 * 2*3/4
}

}  // namespace
}  // namespace ringmaster
