// Data-parallel training on GPUs: fp32, tf32, fp16 or bf16 storage (fp32
// master weights optional), cuBLASLt GEMMs with fp32
// accumulation, erf GELU kernels, and gradient buckets all-reduced by NCCL
// on their own high-priority stream as soon as backward has produced them
// (or after backward, without overlap). One GPU per rank.
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_TRAINER_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_TRAINER_H_

#include <memory>

#include "backends/backend.h"
#include "backends/trainer.h"

namespace ringmaster {

class CudaTrainer : public Trainer {
 public:
  // Uses GPU `device`; creates an NCCL communicator over `control`'s ranks
  // (collective).
  static absl::StatusOr<std::unique_ptr<CudaTrainer>> Create(Control& control,
                                                             int device);
  ~CudaTrainer() override;
  absl::Status Prepare(const v1::Case& c, int64_t batch,
                       int64_t first_sample) override;
  absl::StatusOr<StepTiming> Step() override;
  absl::StatusOr<double> GradientZeroFraction() override;
  std::string Describe() const override;

 private:
  struct Impl;
  explicit CudaTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_TRAINER_H_
