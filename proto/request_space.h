// A tuning request's candidate lists (TuneRequest's repeated fields named by
// search/space_dimensions.h's rows), read and written by protobuf reflection
// on the rows' request fields, so that a new dimension is a row, not code
// here. Pure; any thread.
#ifndef AUTOACCEL_PROTO_REQUEST_SPACE_H_
#define AUTOACCEL_PROTO_REQUEST_SPACE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/autoaccel.pb.h"
#include "search/space.h"

namespace autoaccel {

// Every row's candidates of `request` into its SpaceRequest list (the other
// members of `space` are left alone). INVALID_ARGUMENT naming the request
// field for a name the dimension does not know: "precisions: unknown value
// 'fp9' (allowed: fp32, bf16, fp16, pure_bf16)".
absl::Status SpaceListsFromRequest(const v1::TuneRequest& request, SpaceRequest* space);

// How many candidates `request` gives in `request_field` (a row's).
int CandidatesGiven(const v1::TuneRequest& request, absl::string_view request_field);

// Appends `value`, as a command line spells it, to the row's `request_field`:
// a count's number, a name as it is. INVALID_ARGUMENT "<flag>: '<value>' is
// not a whole number" for a count that is not; NOT_FOUND for a field no row
// names.
absl::Status AddCandidate(absl::string_view request_field, absl::string_view value,
                          v1::TuneRequest* request);

}  // namespace autoaccel

#endif  // AUTOACCEL_PROTO_REQUEST_SPACE_H_
