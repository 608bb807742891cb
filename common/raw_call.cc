#include "common/raw_call.h"

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace autoaccel {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Nested messages deeper than this are not searched (protobuf's own
// recursion limit is 100; the requests nest a few levels).
constexpr int kMaxDepth = 100;

std::optional<std::string> FirstNonUtf8FieldAt(const Descriptor& type, absl::string_view wire,
                                               const std::string& prefix, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  UnknownFieldSet fields;
  if (!fields.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return std::nullopt;
  std::map<int, int> seen;  // field number -> occurrences so far (a repeated field's index)
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& field = fields.field(i);
    const int index = seen[field.number()]++;
    if (field.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const FieldDescriptor* described = type.FindFieldByNumber(field.number());
    if (described == nullptr) continue;
    std::string path = absl::StrCat(prefix, described->name());
    if (described->is_repeated() && !described->is_map()) absl::StrAppend(&path, "[", index, "]");
    if (described->type() == FieldDescriptor::TYPE_STRING &&
        !IsValidUtf8(field.length_delimited())) {
      return path;
    }
    if (described->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (auto inner = FirstNonUtf8FieldAt(*described->message_type(), field.length_delimited(),
                                           path + ".", depth + 1)) {
        return inner;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> FirstNonUtf8Field(const Descriptor& type, absl::string_view wire) {
  return FirstNonUtf8FieldAt(type, wire, "", 0);
}

absl::Status ParseRequest(const grpc::ByteBuffer& request, google::protobuf::Message* message) {
  message->Clear();
  grpc::ByteBuffer copy(request);  // the reader consumes; a copy shares the slices
  {
    grpc::ProtoBufferReader reader(&copy);
    if (message->ParseFromZeroCopyStream(&reader)) return absl::OkStatus();
  }
  message->Clear();
  std::vector<grpc::Slice> slices;
  std::string wire;
  if (request.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices)
      wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  const std::string type = message->GetDescriptor()->full_name();
  if (auto field = FirstNonUtf8Field(*message->GetDescriptor(), wire)) {
    return absl::InvalidArgumentError(
        absl::StrCat(*field, ": not valid UTF-8 (every string in ", type, " must be)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a well-formed ", type, " message"));
}

absl::Status SerializeMessage(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  out->Clear();  // the writer requires an empty buffer (a stream reuses one)
  bool own_buffer = false;
  return FromGrpcStatus(
      grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, out, &own_buffer));
}

}  // namespace autoaccel
