// Data-parallel training on the host backend: float32 GEMMs through
// OpenBLAS, gradient buckets all-reduced in the background
// (HostComm::StartAllReduce: MPI_Iallreduce progressed between layers, or
// TCP's own thread) while backward goes on, or after it (no overlap); or
// pipelined into the next step's forward (schedule: pipelined).
#ifndef RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_
#define RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_

#include <vector>

#include "backends/trainer.h"
#include "comm/host_comm.h"

namespace ringmaster {

class HostTrainer : public Trainer {
 public:
  explicit HostTrainer(HostComm& comm);  // `comm` must outlive this
  absl::Status Prepare(const v1::Case& c, int64_t batch,
                       int64_t first_sample) override;
  absl::StatusOr<StepTiming> Step() override;
  absl::Status Drain() override;
  absl::StatusOr<double> GradientZeroFraction() override;
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

  // The step's arithmetic, shared by both schedules (B samples x H
  // features, row-major): z = a W^T, a' = GELU(z) for layer l; the mean
  // loss of the output; its gradient into da_; dW = dz^T a into layer l's
  // gradient; da = dz W.
  void ForwardLayer(int l);
  double Loss() const;
  void SeedGradient();
  void WeightGradient(int l, const float* dz);
  void InputGradient(int l, const float* dz);

  // schedule: pipelined: the same order as the GPU trainer's; a bucket's
  // all-reduce stays in flight into the next step, whose forward waits for
  // it (and applies its update) just before the bucket's first layer.
  absl::StatusOr<StepTiming> StepPipelined();
  // Completes bucket b's reduction (if in flight) and applies its update.
  absl::Status Settle(size_t b);
  void UpdateRange(int64_t off, int64_t count, int step);
  bool pipelined_ = false;
  int deferred_ = 0;
  std::vector<int> bucket_of_;
  struct Pending {
    std::unique_ptr<HostComm::Request> request;  // null: nothing in flight
    bool done = false;
    int step = 0;  // the step whose gradients it reduces
  };
  std::vector<Pending> pending_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_HOST_TRAINER_H_
