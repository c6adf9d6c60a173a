#include "core/faults.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(ParseFaults, Several) {
  auto faults = ParseFaults("crash:rank=1:seq=3; corrupt:rank=0;hang");
  ASSERT_TRUE(faults.ok()) << faults.status();
  ASSERT_EQ(faults->size(), 3u);
  EXPECT_EQ((*faults)[0].kind, Fault::Kind::kCrash);
  EXPECT_EQ((*faults)[0].rank, 1);
  EXPECT_EQ((*faults)[0].seq, 3);
  EXPECT_EQ((*faults)[1].kind, Fault::Kind::kCorrupt);
  EXPECT_EQ((*faults)[2].rank, -1);
  EXPECT_TRUE(FindFault(*faults, Fault::Kind::kCrash, 1, 3).has_value());
  EXPECT_FALSE(FindFault(*faults, Fault::Kind::kCrash, 0, 3).has_value());
  EXPECT_FALSE(FindFault(*faults, Fault::Kind::kCrash, 1, 2).has_value());
  EXPECT_TRUE(FindFault(*faults, Fault::Kind::kHang, 7, 0).has_value());
}

TEST(ParseFaults, Errors) {
  EXPECT_FALSE(ParseFaults("explode").ok());
  EXPECT_FALSE(ParseFaults("crash:rank=x").ok());
  EXPECT_FALSE(ParseFaults("crash:colour=1").ok());
  EXPECT_TRUE(ParseFaults("").ok());
  EXPECT_FALSE(ParseFaults("slow:factor=0.5").ok());
  EXPECT_FALSE(ParseFaults("slow:factor=fast").ok());
}

TEST(ParseFaults, Hog) {
  auto faults = ParseFaults("hog:rank=1:seq=2:bytes=8000000000");
  ASSERT_TRUE(faults.ok()) << faults.status();
  auto hog = FindFault(*faults, Fault::Kind::kHog, 1, 2);
  ASSERT_TRUE(hog.has_value());
  EXPECT_EQ(hog->bytes, 8000000000);
  EXPECT_FALSE(ParseFaults("hog:bytes=-1").ok());
}

TEST(ParseFaults, SlowRank) {
  auto faults = ParseFaults("slow:rank=3:factor=1.1");
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_DOUBLE_EQ(SlowFactor(*faults, 3), 1.1);
  EXPECT_DOUBLE_EQ(SlowFactor(*faults, 2), 1.0);
  auto every = ParseFaults("slow");
  ASSERT_TRUE(every.ok());
  EXPECT_DOUBLE_EQ(SlowFactor(*every, 0), 2.0);  // the default factor
}

}  // namespace
}  // namespace ringmaster
