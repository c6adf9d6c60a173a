#include "core/safe_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(NormalizeOutputName, CanonicalForms) {
  EXPECT_EQ(*NormalizeOutputName("nightly"), "nightly");
  EXPECT_EQ(*NormalizeOutputName("a//b/./c/"), "a/b/c");
  EXPECT_EQ(*NormalizeOutputName("team_a/h200-pair.v2"), "team_a/h200-pair.v2");
}

TEST(NormalizeOutputName, RejectsWhatCouldLeaveTheRoot) {
  struct Case {
    std::string name, message;
  };
  for (const Case& c : std::vector<Case>{
           {"../x", "'..' is not allowed"},
           {"a/../../x", "'..' is not allowed"},
           {"/etc/passwd", "is absolute"},
           {"", "empty name"},
           {"./", "empty name"},
           {".hidden", "starts with '.'"},
           {"-rf", "starts with '-'"},
           {"a b", "the character ' '"},
           {"a;rm -rf", "the character ';'"},
           {"$(id)", "the character '$'"},
           {std::string("a\0b", 3), "the character '\\x00'"},
           {"a\nb", "the character '\\x0a'"},
           {"a/b/c/d/e/f/g/h/i", "9 levels"},
           {std::string(201, 'a'), "201 bytes"},
       }) {
    auto r = NormalizeOutputName(c.name);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr("output:"));
  }
}

class BeneathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) /
            ("safe_path_" + std::to_string(getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ / "root");
    fs::create_directories(base_ / "outside");
    root_ = (base_ / "root").string();
  }
  void TearDown() override { fs::remove_all(base_); }
  int FilesOutside() {
    int n = 0;
    for (auto& e : fs::recursive_directory_iterator(base_ / "outside")) {
      (void)e;
      ++n;
    }
    return n;
  }
  fs::path base_;
  std::string root_;
};

TEST_F(BeneathTest, CreatesFoldersAndWritesAtomically) {
  auto dir = OpenDirBeneath(root_, "a/b", /*create=*/true);
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE(WriteFileAt(*dir, "results.jsonl", "one\n").ok());
  ASSERT_TRUE(WriteFileAt(*dir, "results.jsonl", "two\n").ok());
  std::ifstream in(fs::path(root_) / "a/b/results.jsonl");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "two\n");
  // No temporary file is left behind.
  int entries = 0;
  for (auto& e : fs::directory_iterator(fs::path(root_) / "a/b")) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(BeneathTest, RefusesASymlinkedFolder) {
  fs::create_directory_symlink(base_ / "outside", fs::path(root_) / "a");
  auto dir = OpenDirBeneath(root_, "a/b", /*create=*/true);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(dir.status().message(), HasSubstr("/a"));
  EXPECT_EQ(FilesOutside(), 0);
}

TEST_F(BeneathTest, ReplacesASymlinkedFileInsteadOfWritingThroughIt) {
  std::ofstream(base_ / "outside/victim") << "keep";
  auto dir = OpenDirBeneath(root_, "a", /*create=*/true);
  ASSERT_TRUE(dir.ok());
  fs::create_symlink(base_ / "outside/victim", fs::path(root_) / "a/report");
  ASSERT_TRUE(WriteFileAt(*dir, "report", "mine").ok());
  std::ifstream victim(base_ / "outside/victim");
  std::string text((std::istreambuf_iterator<char>(victim)), {});
  EXPECT_EQ(text, "keep");
  EXPECT_FALSE(fs::is_symlink(fs::path(root_) / "a/report"));
}

TEST_F(BeneathTest, RejectsDotDotEvenWhenTheCallerDidNotNormalize) {
  auto dir = OpenDirBeneath(root_, "../outside", /*create=*/true);
  EXPECT_FALSE(dir.ok());
  EXPECT_FALSE(
      WriteFileAt(*OpenDirBeneath(root_, "", false), "../x", "y").ok());
  EXPECT_EQ(FilesOutside(), 0);
}

// A second thread swaps "a/b" between a folder and a symlink to the outside
// as fast as it can while this one writes through it: every write either
// lands under the root or is refused; none lands outside.
TEST_F(BeneathTest, SymlinkSwapRaceNeverEscapes) {
  const fs::path a = fs::path(root_) / "a";
  const fs::path b = a / "b";
  fs::create_directories(b);
  std::atomic<bool> stop{false};
  std::atomic<int> swaps{0};
  std::thread swapper([&] {
    // Each round moves whatever "a/b" is to a fresh name, so a folder the
    // writer re-created meanwhile (create=true) never blocks the next round:
    // with one fixed name, a single lost race left the swapper stuck with no
    // swaps at all on a loaded 2-core machine.
    for (int round = 0; !stop; ++round) {
      std::error_code ec;
      const fs::path old = a / ("b.old" + std::to_string(round));
      fs::rename(b, old, ec);
      fs::create_directory_symlink(base_ / "outside", b, ec);
      if (!ec) ++swaps;
      std::this_thread::yield();
      if (fs::is_symlink(b, ec)) fs::remove(b, ec);
      fs::rename(old, b, ec);
    }
  });
  // At least 2000 writes, and on until the swapper has swapped often enough
  // for the race to mean something (a loaded machine may start it late).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int written = 0, refused = 0;
  for (int i = 0; (i < 2000 || swaps.load() < 100) &&
                  std::chrono::steady_clock::now() < deadline;
       ++i) {
    auto dir = OpenDirBeneath(root_, "a/b", /*create=*/true);
    if (!dir.ok()) {
      ++refused;
      continue;
    }
    if (WriteFileAt(*dir, "f" + std::to_string(i), "x").ok()) ++written;
  }
  stop = true;
  swapper.join();
  std::cout << "swap race: " << swaps << " swaps, " << written
            << " files written under the root, " << refused << " refused\n";
  EXPECT_GT(swaps.load(), 0);
  EXPECT_GT(written + refused, 0);
  EXPECT_EQ(FilesOutside(), 0) << written << " written, " << refused
                               << " refused, " << swaps << " swaps";
}

}  // namespace
}  // namespace ringmaster
