// A YAML document into a protobuf message through the message's
// descriptor: keys are field names, nested mappings are messages, sequences
// are repeated fields, map<string, T> fields are mappings (map reflection
// lives in libprotobuf: Debian's is not built for TSan, so messages read in
// the TSan lane must not use maps). Every error is
// one line "file:line: field.path: what was expected". Unknown keys are
// errors, so a typo never passes silently.
#ifndef RINGMASTER_CORE_YAML_PROTO_H_
#define RINGMASTER_CORE_YAML_PROTO_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace ringmaster {

// Parses `text` (named `file` in messages) into `message` (cleared first).
absl::Status YamlToMessage(const std::string& text, const std::string& file,
                           google::protobuf::Message* message);

// The message as YAML (fields with values only, in declaration order).
std::string MessageToYaml(const google::protobuf::Message& message);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_YAML_PROTO_H_
