// `ringmaster topo` (what this machine is, and each path's speed of light)
// and `ringmaster predict` (the model: calibrate it on measurements, predict
// a plan on a described system).
#ifndef RINGMASTER_CLI_MODEL_COMMANDS_H_
#define RINGMASTER_CLI_MODEL_COMMANDS_H_

#include <string>
#include <vector>

namespace ringmaster {

struct TopoOptions {
  std::string format = "text";  // text or yaml
  std::string worker;           // ringmaster-worker, for the GPU probe
};
int TopoCommand(const TopoOptions& options);

struct PredictOptions {
  std::string topology;                // topologies/*.yaml
  int nodes = 0;                       // 0: the topology's
  std::string plan;                    // predict this plan
  std::string sizes;                   // "MIN:MAX" overrides the sweeps
  std::vector<std::string> calibrate;  // results (JSON Lines) to fit on
  std::string min_size = "1MiB";       // calibration uses sizes >= this
  int holdout = 0;                     // every k-th size left out (0: none)
  std::string params_out;              // write the fitted parameters here
  std::string summary_out;             // figures as JSON
  std::string format = "text";         // text or json
  // Training steps: one rank's measured step (results JSON Lines), else
  // the GPU's peak at this GEMM efficiency.
  std::vector<std::string> compute_from;
  double gemm_efficiency = 0.7;
  // Side by side: the plan's collectives on these topologies too (same
  // --nodes), and measured busbw from these results where they exist.
  std::vector<std::string> compare;
  std::vector<std::string> measured;
  // USD per GPU-hour for the cost columns; < 0: the topology's
  // price_per_gpu_hour (0 there: no cost shown).
  double price_per_gpu_hour = -1;
};
int PredictCommand(const PredictOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CLI_MODEL_COMMANDS_H_
