// Handlers that parse their own requests. gRPC 1.51's callback API answers a
// request it cannot parse with UNIMPLEMENTED and no message: a string field
// holding bytes that are not UTF-8 (proto3 refuses them) reads as "this
// method does not exist". Services register every method raw
// (WithRawCallbackMethod_*, stacked with RawMethods) and parse with
// ParseRequest, which answers INVALID_ARGUMENT naming the field.
// Everything here is pure or per call; any thread.
#ifndef AUTOACCEL_COMMON_RAW_CALL_H_
#define AUTOACCEL_COMMON_RAW_CALL_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/grpc_status.h"

namespace autoaccel {

// Parses `request` into `*message` (cleared first). INVALID_ARGUMENT when it
// cannot: naming the first string field that is not UTF-8 as a path from
// the request ("request.model.config_json", "devices[1].name"), or saying
// the request is not a well-formed `message` type.
absl::Status ParseRequest(const grpc::ByteBuffer& request, google::protobuf::Message* message);

// `message` in wire format in `*out` (whatever it held before is dropped).
// INTERNAL if it cannot be serialized.
absl::Status SerializeMessage(const google::protobuf::Message& message, grpc::ByteBuffer* out);

// The path of the first length-delimited field of `type` in `wire` (nested
// messages included, repeated fields with their index) that is a string and
// not UTF-8; nullopt when there is none or `wire` is not well-formed.
std::optional<std::string> FirstNonUtf8Field(const google::protobuf::Descriptor& type,
                                             absl::string_view wire);

// A raw unary method's handler for synchronous work: parses the request as
// Request, calls `handle(Request&, Response*) -> absl::Status` (or with a
// const Request&; a handler may move parts out of it), and finishes the call
// with the response or the error.
template <typename Request, typename Response, typename Handle>
grpc::ServerUnaryReactor* ParsedUnary(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                      Handle handle) {
  Request parsed;
  Response answer;
  absl::Status status = ParseRequest(*request, &parsed);
  if (status.ok()) status = handle(parsed, &answer);
  if (status.ok()) status = SerializeMessage(answer, response);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// ParsedUnary for a caller `admitted` lets in (OK); any other is answered
// with that error before its request is parsed: a caller without
// credentials never costs the copy a parse makes of up to the message limit.
template <typename Request, typename Response, typename Handle>
grpc::ServerUnaryReactor* AdmittedUnary(grpc::CallbackServerContext* ctx, absl::Status admitted,
                                        const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                        Handle handle) {
  if (!admitted.ok()) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(admitted));
    return reactor;
  }
  return ParsedUnary<Request, Response>(ctx, request, response, std::move(handle));
}

// A raw unary method's handler for work that answers later (a call to
// another server): parses the request as Request and calls
// `start(const Request&, Finish)`, where Finish is
// std::function<void(absl::StatusOr<Response>)>; the call ends when
// `finish` runs, exactly once, on any thread. A request that does not parse
// ends at once, `start` never called.
template <typename Request, typename Response, typename Start>
grpc::ServerUnaryReactor* ParsedUnaryLater(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response, Start start) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  Request parsed;
  if (absl::Status status = ParseRequest(*request, &parsed); !status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  start(static_cast<const Request&>(parsed),
        std::function<void(absl::StatusOr<Response>)>(
            [reactor, response](absl::StatusOr<Response> answer) {
              absl::Status status = answer.status();
              if (status.ok()) status = SerializeMessage(*answer, response);
              reactor->Finish(ToGrpcStatus(status));
            }));
  return reactor;
}

// Base with every listed method raw: RawMethods<Service, WithRaw_A, WithRaw_B>
// is WithRaw_A<WithRaw_B<Service>>. List every method of the service: one
// left out stays the generated synchronous stub, which answers UNIMPLEMENTED.
template <typename Base, template <class> class... Methods>
struct RawMethodsOf {
  using type = Base;
};
template <typename Base, template <class> class First, template <class> class... Rest>
struct RawMethodsOf<Base, First, Rest...> {
  using type = First<typename RawMethodsOf<Base, Rest...>::type>;
};
template <typename Base, template <class> class... Methods>
using RawMethods = typename RawMethodsOf<Base, Methods...>::type;

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_RAW_CALL_H_
