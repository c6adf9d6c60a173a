// Runs one training case (bench: train) on the ranks of a group: the
// numerical check against a float64 reference, warm-up, timed steps, and
// the per-step breakdown into compute, exposed communication and skew.
#ifndef RINGMASTER_WORKER_TRAIN_RUNNER_H_
#define RINGMASTER_WORKER_TRAIN_RUNNER_H_

#include "backends/backend.h"
#include "backends/trainer.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// Every rank of `control` calls it with the same case. Step time is the
// slowest rank's; its breakdown is that rank's: compute (its forward,
// backward and optimizer), skew (from its last gradient to the slowest
// rank's last gradient) and exposed communication (its time inside
// communication calls before its last gradient, plus from the slowest
// rank's last gradient to the end of its all-reduces), of the median step.
v1::Result RunTrain(const v1::Case& c, Trainer& trainer, Control& control);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_TRAIN_RUNNER_H_
