// Progress of a run on the terminal: a live bar with ETA on a TTY, plain
// lines (from 10 s on, at every tenth done or every 30 s) when stderr is a
// file or pipe.
#ifndef RINGMASTER_CLI_PROGRESS_DISPLAY_H_
#define RINGMASTER_CLI_PROGRESS_DISPLAY_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster {

class ProgressDisplay {
 public:
  // `out` is where the bar or lines go (stderr); `tty` whether it is a
  // terminal (the bar is redrawn in place) or not (plain lines). `work`
  // holds each case's estimated time (core/case_work.h), in the order the
  // cases run: the ETA is the time the cases done took, scaled by the
  // estimates of those left to those done.
  ProgressDisplay(std::ostream& out, bool tty, std::vector<double> work,
                  absl::Time start);

  // Before anything else writes to the terminal: erase the bar.
  void Clear();
  // Cases done so far (and what is running), at `now`; redraws the bar (at
  // most every 200 ms) or prints a plain line when due.
  void Update(int64_t done, const std::string& current, absl::Time now);
  // The end: erase the bar for good.
  void Finish();

  // "1:02:03", "4:05" or "12 s".
  static std::string FormatSeconds(double s);

 private:
  std::ostream& out_;
  const bool tty_;
  const int64_t total_;
  std::vector<double> work_done_before_;  // prefix sums of `work`, size+1
  const absl::Time start_;
  bool drawn_ = false;
  absl::Time last_draw_ = absl::InfinitePast();
  absl::Time last_line_;
  int last_decile_ = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_CLI_PROGRESS_DISPLAY_H_
