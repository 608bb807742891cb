// What the worker makes of a RunTrialRequest: the TrialSpec one rank's
// runner gets. The coordinator fills part of a spec and the worker the rest
// (trial_contract/trial_spec.h says which field is whose); this is the
// worker's part, kept apart from the RPC plumbing so it can be tested
// without a server.
#ifndef AUTOACCEL_WORKER_RANK_SPEC_H_
#define AUTOACCEL_WORKER_RANK_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/autoaccel.pb.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {

// The highest attempt a RunTrialRequest may name.
inline constexpr int kMaxTrialAttempt = 1000;

// The device a rank runs on, as the worker knows it.
struct RankDevice {
  v1::Device device;          // as registered: memory and peak included
  std::string runner_device;  // "cpu" or "cuda:N" (RunnerDevice, worker/accelerators.h)
  int num_threads = 1;        // WorkerOptions::threads_per_device
};

// The spec for `request`'s rank on `device`: the coordinator's fields from
// request.spec_json, with the worker's filled in: trial_id and attempt from
// the request, device and num_threads from `device` (whatever spec_json says
// of them), memory_limit_bytes and peak_tflops from `device` where
// spec_json leaves them 0. model_file stays empty: the caller stores
// request.model_file (worker/model_file_cache.h) and names it.
//
// INVALID_ARGUMENT naming the field for a trial_id that cannot name a file
// (CheckFileNamePart), an attempt outside 1..kMaxTrialAttempt, a spec_json
// that is not a spec (TrialSpecFromJson, common/untrusted_json.h), or one
// that names a trial_id or attempt other than the request's (the request's
// name the trial; a spec that disagrees comes from a confused coordinator).
// Pure; thread-safe.
absl::StatusOr<TrialSpec> RankSpecFromRequest(const v1::RunTrialRequest& request,
                                              const RankDevice& device);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_RANK_SPEC_H_
