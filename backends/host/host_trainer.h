// Data-parallel training on the host backend: float32 GEMMs through
// OpenBLAS, gradient buckets all-reduced in the background
// (HostComm::StartAllReduce: MPI_Iallreduce progressed between layers, or
// TCP's own thread) while backward goes on, or after it (no overlap).
#ifndef RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_
#define RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_

#include <vector>

#include "backends/host/host_comm.h"
#include "backends/trainer.h"

namespace ringmaster {

class HostTrainer : public Trainer {
 public:
  explicit HostTrainer(HostComm& comm);  // `comm` must outlive this
  absl::Status Prepare(const v1::Case& c, int64_t batch,
                       int64_t first_sample) override;
  absl::StatusOr<StepTiming> Step() override;
  std::string Describe() const override { return describe_; }

 private:
  HostComm& comm_;
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
