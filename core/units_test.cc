#include "core/units.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(ParseSizeBytes, AcceptsBinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseSizeBytes("8"), 8);
  EXPECT_EQ(*ParseSizeBytes("8B"), 8);
  EXPECT_EQ(*ParseSizeBytes("64KiB"), 65536);
  EXPECT_EQ(*ParseSizeBytes("1 MiB"), 1048576);
  EXPECT_EQ(*ParseSizeBytes("8GiB"), 8589934592LL);
  EXPECT_EQ(*ParseSizeBytes("1GB"), 1000000000LL);
  EXPECT_EQ(*ParseSizeBytes("1.5KiB"), 1536);
  EXPECT_EQ(*ParseSizeBytes("8G"), 8589934592LL);
}

TEST(ParseSizeBytes, RejectsBadInput) {
  EXPECT_FALSE(ParseSizeBytes("-5").ok());
  EXPECT_FALSE(ParseSizeBytes("abc").ok());
  EXPECT_FALSE(ParseSizeBytes("5 parsecs").ok());
  EXPECT_FALSE(ParseSizeBytes("0.5B").ok());
  EXPECT_FALSE(ParseSizeBytes("1e30").ok());
  EXPECT_FALSE(ParseSizeBytes("").ok());
  EXPECT_NE(ParseSizeBytes("-5").status().message().find("negative"),
            std::string::npos);
}

TEST(ParseDurationSeconds, Units) {
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("2s"), 2.0);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("500ms"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("250us"), 250e-6);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1.5"), 1.5);
  EXPECT_FALSE(ParseDurationSeconds("-1s").ok());
  EXPECT_FALSE(ParseDurationSeconds("nan").ok());
  EXPECT_FALSE(ParseDurationSeconds("3 fortnights").ok());
}

TEST(FormatBytes, Binary) {
  EXPECT_EQ(FormatBytes(8), "8 B");
  EXPECT_EQ(FormatBytes(65536), "64 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(8589934592LL), "8 GiB");
}

}  // namespace
}  // namespace ringmaster
