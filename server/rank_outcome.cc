#include "server/rank_outcome.h"

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "proto/convert.h"

namespace autoaccel {

namespace {

// A worker's reason is stored and shown: a few lines of log, never a dump.
constexpr size_t kMaxReasonBytes = 4096;

std::string Bounded(absl::string_view reason) { return CutText(reason, kMaxReasonBytes); }

}  // namespace

RankOutcome RankOutcomeOf(const absl::Status& rpc, const v1::RunTrialResponse& response) {
  RankOutcome out;
  if (rpc.ok()) {
    absl::StatusOr<TrialStatus> status = FromProto(response.status());
    if (!status.ok()) {
      out.reason =
          absl::StrCat("worker answered an unknown status: ", static_cast<int>(response.status()));
      return out;
    }
    out.status = *status;
    out.reason = Bounded(response.reason());
    out.infrastructure = out.status == TrialStatus::kFailed && response.infrastructure();
    return out;
  }
  out.reason = Bounded(rpc.message());
  switch (rpc.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      out.status = TrialStatus::kTimeout;
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      break;
    default:
      out.infrastructure = true;
      break;
  }
  return out;
}

}  // namespace autoaccel
