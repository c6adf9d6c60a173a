// Data-parallel training on the host backend: float32 GEMMs through
// OpenBLAS, gradient buckets all-reduced with MPI_Iallreduce while backward
// goes on (progressed between layers), or after it (no overlap).
#ifndef RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_
#define RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <vector>

#include "backends/trainer.h"

namespace ringmaster {

class HostTrainer : public Trainer {
 public:
  explicit HostTrainer(MPI_Comm comm);
  absl::Status Prepare(const v1::Case& c, int64_t batch,
                       int64_t first_sample) override;
  absl::StatusOr<StepTiming> Step() override;
  std::string Describe() const override { return describe_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  v1::TrainSpec spec_;
  int64_t batch_ = 0;
  int step_ = 0;
  std::vector<float> w_, grad_, m_, v_;    // [L][H][H] (out, in)
  std::vector<std::vector<float>> a_, z_;  // activations [B][H]
  std::vector<float> da_, dz_;
  std::vector<std::vector<int>> buckets_;
  std::string describe_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_
