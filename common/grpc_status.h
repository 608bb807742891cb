// The one pair of functions that converts between absl::Status and
// grpc::Status. Codes map one to one (both use the canonical code space).
// A message going out is cut to kMaxStatusMessageBytes (at a character
// boundary, saying how much was left out): an error that quotes its input
// never sends a caller's megabytes back.
#ifndef AUTOACCEL_COMMON_GRPC_STATUS_H_
#define AUTOACCEL_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace autoaccel {

inline constexpr size_t kMaxStatusMessageBytes = 2048;

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_GRPC_STATUS_H_
