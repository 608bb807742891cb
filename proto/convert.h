// Conversions between the wire messages (autoaccel.v1) and the C++ value
// types of spec/. The public messages carry enum values as their names, so
// FromProto validates them; the internal wire's trial status is a proto enum.
#ifndef AUTOACCEL_PROTO_CONVERT_H_
#define AUTOACCEL_PROTO_CONVERT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"
#include "spec/trial.h"

namespace autoaccel {

// The largest torchscript model file a job may carry, and the gRPC message
// size the coordinator and the workers accept so that it fits.
inline constexpr int64_t kMaxModelFileBytes = int64_t{512} << 20;
inline constexpr int kMaxMessageBytes = static_cast<int>(kMaxModelFileBytes + (int64_t{16} << 20));

v1::Strategy ToProto(const Strategy& s);  // fills `text` with the canonical form
absl::StatusOr<Strategy> FromProto(const v1::Strategy& s);

// The model of a request's spec: its config with the overrides applied
// (spec/model_overrides.h); nullopt for a TorchScript model, whose
// architecture its file holds, or a spec without a config.
// INVALID_ARGUMENT naming the field for a config that is not JSON or that
// the family refuses.
absl::StatusOr<std::optional<ModelSpec>> ModelOfSpec(const v1::ModelSpec& model);

// The internal wire's status (RunTrialResponse). FromProto: INVALID_ARGUMENT
// naming the value for TRIAL_STATUS_UNSPECIFIED or a value this build does
// not know.
v1::TrialStatus ToProto(TrialStatus s);
absl::StatusOr<TrialStatus> FromProto(v1::TrialStatus s);
// A public Trial's status (its name, Trial.status); nullopt for a name this
// build does not know (a newer server's).
std::optional<TrialStatus> TrialStatusOf(const v1::Trial& t);

v1::TrialMetrics ToProto(const TrialMetrics& m);
TrialMetrics FromProto(const v1::TrialMetrics& m);

v1::PeakTflops ToProto(const PeakTflops& p);
PeakTflops FromProto(const v1::PeakTflops& p);

v1::ProxyMeasurement ToProto(const ProxyMeasurement& p);
v1::Prediction ToProto(const TrialPrediction& p);
TrialPrediction FromProto(const v1::Prediction& p);

// The proto3 JSON form of `m` with the .proto field names (as stored in the
// database and printed by the CLI); fields at their zero value are left out.
std::string ProtoToJson(const google::protobuf::Message& m);

// Unix seconds; InfinitePast/InfiniteFuture map to 0.
double UnixSecondsOrZero(absl::Time t);

}  // namespace autoaccel

#endif  // AUTOACCEL_PROTO_CONVERT_H_
