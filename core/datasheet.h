// The datasheet figures of the common datacenter GPUs
// (topologies/datasheets.yaml, built in): what the server card and MFU
// compare measurements with. An unknown GPU has no entry: callers say "no
// datasheet entry" rather than a percentage.
#ifndef RINGMASTER_CORE_DATASHEET_H_
#define RINGMASTER_CORE_DATASHEET_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/topology.pb.h"

namespace ringmaster {

// Parses and checks a datasheet table: every entry names the devices it
// covers (no name twice in the table), its model, memory size and
// bandwidth, fp32 and bf16 peaks, PCIe link, board power and source.
absl::StatusOr<v1::Datasheets> ParseDatasheets(const std::string& text,
                                               const std::string& file);

// The built-in table (parsed once; it is checked by the tests).
const v1::Datasheets& BuiltInDatasheets();

// The entry whose names include `device` as the driver reports it
// (surrounding spaces ignored; a "GPU <bus id> " prefix, as telemetry
// writes it, skipped); null when the table has none.
const v1::Datasheet* FindDatasheet(std::string_view device);

// The dense peak of `dtype` in TFLOP/s (TOP/s for int8); 0 when the
// datasheet gives none.
double DatasheetPeakTflops(const v1::Datasheet& d, v1::DataType dtype);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_DATASHEET_H_
