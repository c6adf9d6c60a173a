// Matrix multiplication (bench: gemm): cuBLASLt on GPUs (fp32, tf32, bf16,
// fp16, fp8) or OpenBLAS on the host, checked against a float64 reference.
#include "absl/strings/str_format.h"
#include "worker/kinds/node_bench_kind.h"

namespace ringmaster {
namespace {

std::string GemmWrong(int64_t /*wrong*/, double rel_error, int first_bad) {
  return absl::StrFormat(
      "GEMM result off the float64 reference: relative error %.3g (first on "
      "rank %d)",
      rel_error, first_bad);
}

class GemmKind : public NodeBenchKind {
 protected:
  WrongDetail wrong_detail() const override { return GemmWrong; }
};

RINGMASTER_REGISTER_KIND("gemm", GemmKind);

}  // namespace
}  // namespace ringmaster
