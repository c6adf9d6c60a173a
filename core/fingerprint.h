// Comparison of rank fingerprints before the first collective.
//
// Ranks that disagree on what they run (plan, build, library versions, GPU
// model, NCCL_* environment, backend) would measure nonsense or hang; the
// worker compares fingerprints and fails fast with config_mismatch.
#ifndef RINGMASTER_CORE_FINGERPRINT_H_
#define RINGMASTER_CORE_FINGERPRINT_H_

#include <optional>
#include <string>
#include <vector>

#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster {

struct FingerprintMismatch {
  std::vector<std::string> fields;  // names of differing fields
  std::vector<int> ranks;           // ranks that differ from rank 0
  std::string detail;               // one line naming fields, ranks, values
};

// Compares every rank's fingerprint with rank 0's. Host, pid, local rank
// and bus id may differ; everything else must match. nullopt when all agree.
std::optional<FingerprintMismatch> CompareFingerprints(
    const std::vector<v1::Fingerprint>& fingerprints);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_FINGERPRINT_H_
