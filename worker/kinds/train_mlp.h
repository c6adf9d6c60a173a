// Data-parallel training of a Linear + GELU stack (bench: train): the
// numerical check against a float64 reference, warm-up, timed steps, and
// each step split into compute, exposed communication and skew.
#ifndef RINGMASTER_WORKER_KINDS_TRAIN_MLP_H_
#define RINGMASTER_WORKER_KINDS_TRAIN_MLP_H_

#include "backends/trainer.h"
#include "comm/control.h"
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

#endif  // RINGMASTER_WORKER_KINDS_TRAIN_MLP_H_
