#include "core/yaml_proto.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/yaml_read.h"

namespace ringmaster {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Walks the document beside the message's descriptor; errors through the
// shared YAML reading layer.
class Reader : public YamlReader {
 public:
  explicit Reader(std::string file) : YamlReader(std::move(file)) {}

  absl::Status ReadMessage(const YAML::Node& node, const std::string& path,
                           Message* msg) const {
    const Descriptor* d = msg->GetDescriptor();
    if (!node.IsMap()) {
      return Error(node, path.empty() ? "(document)" : path,
                   "expected a mapping of " + d->name() + " fields");
    }
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      const std::string field_path = path.empty() ? key : path + "." + key;
      const FieldDescriptor* f = d->FindFieldByName(key);
      if (f == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < d->field_count(); ++i)
          names.push_back(d->field(i)->name());
        return Error(kv.first, field_path,
                     "unknown key (expected one of: " +
                         absl::StrJoin(names, ", ") + ")");
      }
      absl::Status s = ReadField(kv.second, field_path, f, msg);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status ReadField(const YAML::Node& node, const std::string& path,
                         const FieldDescriptor* f, Message* msg) const {
    const Reflection* r = msg->GetReflection();
    if (f->is_map()) {
      if (!node.IsMap()) return Error(node, path, "expected a mapping");
      const FieldDescriptor* key_f = f->message_type()->map_key();
      const FieldDescriptor* value_f = f->message_type()->map_value();
      for (const auto& kv : node) {
        Message* entry = r->AddMessage(msg, f);
        absl::Status s = ReadScalar(kv.first, path, key_f, entry);
        if (s.ok()) {
          s = ReadScalar(kv.second, path + "." + kv.first.Scalar(), value_f,
                         entry);
        }
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    if (f->is_repeated()) {
      if (!node.IsSequence()) return Error(node, path, "expected a list");
      for (size_t i = 0; i < node.size(); ++i) {
        const std::string item = absl::StrFormat("%s[%d]", path, i);
        absl::Status s = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE
                             ? ReadMessage(node[i], item, r->AddMessage(msg, f))
                             : AddScalar(node[i], item, f, msg);
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
      return ReadMessage(node, path, r->MutableMessage(msg, f));
    return ReadScalar(node, path, f, msg);
  }

  // One scalar value of field `f`, set (or added, when `add`).
  absl::Status Scalar(const YAML::Node& node, const std::string& path,
                      const FieldDescriptor* f, Message* msg, bool add) const {
    if (!node.IsScalar()) return Error(node, path, "expected a single value");
    const Reflection* r = msg->GetReflection();
    const std::string& text = node.Scalar();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        add ? r->AddString(msg, f, text) : r->SetString(msg, f, text);
        return absl::OkStatus();
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        double v = 0;
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v))
          return Error(node, path, "expected a number, got \"" + text + "\"");
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
          add ? r->AddDouble(msg, f, v) : r->SetDouble(msg, f, v);
        } else {
          add ? r->AddFloat(msg, f, static_cast<float>(v))
              : r->SetFloat(msg, f, static_cast<float>(v));
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64: {
        int64_t v = 0;
        if (!absl::SimpleAtoi(text, &v))
          return Error(node, path, "expected an integer, got \"" + text + "\"");
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
          if (v < INT32_MIN || v > INT32_MAX)
            return Error(node, path, "integer out of range");
          add ? r->AddInt32(msg, f, static_cast<int32_t>(v))
              : r->SetInt32(msg, f, static_cast<int32_t>(v));
        } else {
          add ? r->AddInt64(msg, f, v) : r->SetInt64(msg, f, v);
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        bool v = false;
        if (!absl::SimpleAtob(text, &v))
          return Error(node, path,
                       "expected true or false, got \"" + text + "\"");
        add ? r->AddBool(msg, f, v) : r->SetBool(msg, f, v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_ENUM: {
        const auto* value = f->enum_type()->FindValueByName(text);
        if (value == nullptr)
          return Error(node, path, "unknown value \"" + text + "\"");
        add ? r->AddEnum(msg, f, value) : r->SetEnum(msg, f, value);
        return absl::OkStatus();
      }
      default:
        return Error(node, path, "unsupported field type");
    }
  }
  absl::Status ReadScalar(const YAML::Node& node, const std::string& path,
                          const FieldDescriptor* f, Message* msg) const {
    return Scalar(node, path, f, msg, /*add=*/false);
  }
  absl::Status AddScalar(const YAML::Node& node, const std::string& path,
                         const FieldDescriptor* f, Message* msg) const {
    return Scalar(node, path, f, msg, /*add=*/true);
  }
};

void EmitMessage(YAML::Emitter& out, const Message& msg);

void EmitScalar(YAML::Emitter& out, const Message& msg,
                const FieldDescriptor* f, int index) {
  const Reflection* r = msg.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      out << (rep ? r->GetRepeatedString(msg, f, index) : r->GetString(msg, f));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      out << (rep ? r->GetRepeatedDouble(msg, f, index) : r->GetDouble(msg, f));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      out << (rep ? r->GetRepeatedFloat(msg, f, index) : r->GetFloat(msg, f));
      break;
    case FieldDescriptor::CPPTYPE_INT32:
      out << (rep ? r->GetRepeatedInt32(msg, f, index) : r->GetInt32(msg, f));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      out << (rep ? r->GetRepeatedInt64(msg, f, index) : r->GetInt64(msg, f));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out << (rep ? r->GetRepeatedBool(msg, f, index) : r->GetBool(msg, f));
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      out << (rep ? r->GetRepeatedEnum(msg, f, index) : r->GetEnum(msg, f))
                 ->name();
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      EmitMessage(out, rep ? r->GetRepeatedMessage(msg, f, index)
                           : r->GetMessage(msg, f));
      break;
    default:
      out << YAML::Null;
  }
}

void EmitMessage(YAML::Emitter& out, const Message& msg) {
  const Reflection* r = msg.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(msg, &fields);
  out << YAML::BeginMap;
  for (const FieldDescriptor* f : fields) {
    out << YAML::Key << f->name() << YAML::Value;
    if (f->is_map()) {
      // Entries sorted by key: the same message always reads the same.
      std::vector<const Message*> entries;
      for (int i = 0; i < r->FieldSize(msg, f); ++i)
        entries.push_back(&r->GetRepeatedMessage(msg, f, i));
      auto key_text = [](const Message* e) {
        YAML::Emitter k;
        EmitScalar(k, *e, e->GetDescriptor()->map_key(), -1);
        return std::string(k.c_str());
      };
      std::sort(entries.begin(), entries.end(),
                [&](const Message* a, const Message* b) {
                  return key_text(a) < key_text(b);
                });
      out << YAML::BeginMap;
      for (const Message* e : entries) {
        const Descriptor* d = e->GetDescriptor();
        out << YAML::Key;
        EmitScalar(out, *e, d->map_key(), -1);
        out << YAML::Value;
        EmitScalar(out, *e, d->map_value(), -1);
      }
      out << YAML::EndMap;
    } else if (f->is_repeated()) {
      out << YAML::BeginSeq;
      for (int i = 0; i < r->FieldSize(msg, f); ++i) EmitScalar(out, msg, f, i);
      out << YAML::EndSeq;
    } else {
      EmitScalar(out, msg, f, -1);
    }
  }
  out << YAML::EndMap;
}

}  // namespace

absl::Status YamlToMessage(const std::string& text, const std::string& file,
                           google::protobuf::Message* message) {
  message->Clear();
  auto loaded = LoadYamlDocument(text, file);
  if (!loaded.ok()) return loaded.status();
  YAML::Node root = *loaded;
  return Reader(file).ReadMessage(root, "", message);
}

std::string MessageToYaml(const google::protobuf::Message& message) {
  YAML::Emitter out;
  out.SetDoublePrecision(10);  // 0.779, not 0.77899999999999947
  EmitMessage(out, message);
  return std::string(out.c_str()) + "\n";
}

}  // namespace ringmaster
