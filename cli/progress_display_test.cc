#include "cli/progress_display.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace ringmaster {
namespace {

TEST(ProgressDisplay, PlainLinesEveryTenthOrThirtySeconds) {
  std::ostringstream out;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ProgressDisplay p(out, /*tty=*/false, std::vector<double>(50, 1.0), t0);
  p.Update(1, "a", t0 + absl::Seconds(1));  // 2%: nothing yet
  p.Update(5, "b", t0 + absl::Seconds(5));  // 10%, but a short run so far
  EXPECT_EQ(out.str(), "");
  p.Update(5, "b", t0 + absl::Seconds(10));  // 10%
  EXPECT_EQ(out.str(),
            "ringmaster: progress 5/50 cases (10%), 10 s elapsed, ETA 1:30\n");
  p.Update(6, "c", t0 + absl::Seconds(12));  // same tenth, too soon
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  p.Update(7, "d", t0 + absl::Seconds(40));  // 30 s since the last line
  EXPECT_NE(out.str().find("7/50 cases (14%), 40 s elapsed, ETA 4:06"),
            std::string::npos);
  p.Clear();  // nothing to erase without a terminal
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

TEST(ProgressDisplay, BarRedrawnInPlaceOnATerminal) {
  std::ostringstream out;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ProgressDisplay p(out, /*tty=*/true, std::vector<double>(4, 1.0), t0);
  p.Update(1, "allreduce 1 MiB", t0 + absl::Seconds(2));
  EXPECT_EQ(out.str(),
            "\r\033[K[######------------------] 1/4 cases  25%  2 s elapsed  "
            "ETA 6 s  allreduce 1 MiB");
  out.str("");
  p.Update(2, "x", t0 + absl::Seconds(2) + absl::Milliseconds(50));
  EXPECT_EQ(out.str(), "");  // at most every 200 ms
  p.Clear();
  EXPECT_EQ(out.str(), "\r\033[K");
  out.str("");
  p.Update(4, "", t0 + absl::Seconds(8));
  EXPECT_NE(out.str().find("4/4 cases 100%"), std::string::npos);
  EXPECT_NE(out.str().find("ETA 0 s"), std::string::npos);
}

// A sweep whose last cases take most of the time: the ETA after the small
// ones follows their estimated time, not their count.
TEST(ProgressDisplay, EtaWeighsCasesByTheirEstimatedTime) {
  std::ostringstream out;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // 9 small cases (1 unit each), then one of 91 units.
  std::vector<double> work(9, 1.0);
  work.push_back(91.0);
  ProgressDisplay p(out, /*tty=*/true, work, t0);
  p.Update(9, "big", t0 + absl::Seconds(9));  // 1 s per unit so far
  // By counts the ETA would be 1 s; by work it is 91 s.
  EXPECT_NE(out.str().find("ETA 1:31"), std::string::npos) << out.str();
}

TEST(ProgressDisplay, FormatSeconds) {
  EXPECT_EQ(ProgressDisplay::FormatSeconds(59.4), "59 s");
  EXPECT_EQ(ProgressDisplay::FormatSeconds(61), "1:01");
  EXPECT_EQ(ProgressDisplay::FormatSeconds(3723), "1:02:03");
  EXPECT_EQ(ProgressDisplay::FormatSeconds(-1), "?");
}

}  // namespace
}  // namespace ringmaster
