#include "cli/progress_display.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace ringmaster {

ProgressDisplay::ProgressDisplay(std::ostream& out, bool tty,
                                 std::vector<double> work, absl::Time start)
    : out_(out),
      tty_(tty),
      total_(std::max<int64_t>(static_cast<int64_t>(work.size()), 1)),
      start_(start),
      last_line_(start) {
  work_done_before_.assign(total_ + 1, 0);
  for (int64_t i = 0; i < total_; ++i) {
    const double w =
        i < static_cast<int64_t>(work.size()) && work[i] > 0 ? work[i] : 1e-3;
    work_done_before_[i + 1] = work_done_before_[i] + w;
  }
}

std::string ProgressDisplay::FormatSeconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = std::llround(s);
  if (t < 60) return absl::StrFormat("%d s", t);
  if (t < 3600) return absl::StrFormat("%d:%02d", t / 60, t % 60);
  return absl::StrFormat("%d:%02d:%02d", t / 3600, (t / 60) % 60, t % 60);
}

void ProgressDisplay::Clear() {
  if (tty_ && drawn_) {
    out_ << "\r\033[K" << std::flush;
    drawn_ = false;
  }
}

void ProgressDisplay::Update(int64_t done, const std::string& current,
                             absl::Time now) {
  done = std::clamp<int64_t>(done, 0, total_);
  const double elapsed = absl::ToDoubleSeconds(now - start_);
  // The ETA: the time the cases done took, scaled by the estimated time of
  // the cases left against theirs (an 8 GiB case weighs what it takes).
  const double done_work = work_done_before_[done];
  const double left_work = work_done_before_[total_] - done_work;
  const double eta =
      done > 0 && done_work > 0 ? elapsed / done_work * left_work : -1;
  const int pct = static_cast<int>(100 * done / total_);
  if (tty_) {
    if (now - last_draw_ < absl::Milliseconds(200) && drawn_) return;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done / total_);
    std::string bar(filled, '#');
    bar.append(kWidth - filled, '-');
    std::string what =
        current.size() > 40 ? current.substr(0, 39) + "~" : current;
    out_ << "\r\033[K"
         << absl::StrFormat("[%s] %d/%d cases %3d%%  %s elapsed  ETA %s  %s",
                            bar, done, total_, pct, FormatSeconds(elapsed),
                            FormatSeconds(eta), what)
         << std::flush;
    drawn_ = true;
    last_draw_ = now;
    return;
  }
  // Plain lines: nothing for runs shorter than 10 s, then at each tenth
  // done or every 30 s.
  const int decile = pct / 10;
  if (elapsed < 10) return;
  if (decile > last_decile_ || now - last_line_ >= absl::Seconds(30)) {
    out_ << absl::StrFormat(
        "ringmaster: progress %d/%d cases (%d%%), %s elapsed, ETA %s\n", done,
        total_, pct, FormatSeconds(elapsed), FormatSeconds(eta));
    last_decile_ = std::max(last_decile_, decile);
    last_line_ = now;
  }
}

void ProgressDisplay::Finish() { Clear(); }

}  // namespace ringmaster
