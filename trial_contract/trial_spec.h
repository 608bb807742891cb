// What one rank of one trial runs: the first half of the contract between
// the worker daemon and the trial runner (`autoaccel-trial --spec FILE
// --result FILE`; the second half is trial_contract/trial_result.h). Pure
// C++: the coordinator and the worker link it without LibTorch.
//
// One owner per field. A spec is written by two parties on its way to the
// runner:
//   1. The coordinator fills the fields under "Filled by the coordinator"
//      and sends them, and only them, as RunTrialRequest.spec_json
//      (TrialSpecToRequestJson).
//   2. The worker fills the fields under "Filled by the worker" from the
//      rest of the RunTrialRequest and from its own devices, then writes the
//      whole spec (TrialSpecToJson) for the runner.
// Whatever spec_json says of a worker-filled field is not used: the worker
// refuses a trial_id or attempt that disagrees with the request's (they are
// the RPC's identity), and replaces device, num_threads and model_file.
// Tests and tools that run the runner directly fill both parts.
//
// Thread-compatible value types; the functions are thread-safe.
#ifndef AUTOACCEL_TRIAL_CONTRACT_TRIAL_SPEC_H_
#define AUTOACCEL_TRIAL_CONTRACT_TRIAL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "spec/model_spec.h"
#include "spec/strategy.h"
#include "spec/trial.h"

namespace autoaccel {

struct TrialSpec {
  // ---- Filled by the coordinator (travel in RunTrialRequest.spec_json).

  // Gang position; a single-rank trial has rank 0 of world_size 1.
  int rank = 0;
  int world_size = 1;
  // This rank's neighbours on its worker, as torchrun tells a rank:
  // local_rank is its index among the trial's ranks there (0-based),
  // local_world_size how many of the trial's ranks run there, group_rank
  // which of the trial's workers it is (counted in rank order; a worker's
  // ranks are adjacent), and local_device_indices the worker's device index
  // of each of them by local rank (local_device_indices[local_rank] is this
  // rank's RunTrialRequest.device_index). Computed once, by the coordinator
  // (server/rank_request.cc); empty local_device_indices (a spec written by
  // hand) means the rank is alone on its worker.
  int local_rank = 0;
  int local_world_size = 1;
  int group_rank = 0;
  std::vector<int> local_device_indices;
  // Rendezvous of a multi-rank trial: rank 0 serves a c10d TCPStore on
  // master_port of its host, the others connect to master_addr:master_port.
  // Unused when world_size is 1.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;

  ModelSpec model;
  int seq_len = 0;
  int global_batch_size = 0;
  Strategy strategy;

  int warmup_steps = 2;    // not timed
  int measured_steps = 5;  // timed
  // Timed steps continue past measured_steps until they cover this long (a
  // few milliseconds of steps are mostly noise).
  double min_measured_seconds = 0;
  uint64_t seed = 1234;
  // Data parallelism: target size of a gradient bucket (0: the engine's
  // default, 25 MiB).
  int64_t bucket_bytes = 0;
  // Report a digest of the parameters after the last step (for checks that
  // data-parallel replicas agree); costs a copy of the model.
  bool report_parameter_digest = false;
  // Tensor memory the rank may use; 0 means no limit. Exceeding it is OOM.
  // The coordinator may set a cap; when it leaves 0, the worker puts in its
  // device's memory.
  int64_t memory_limit_bytes = 0;
  // The device's dense peak, for MFU; zeros (unknown) leave mfu at 0. The
  // coordinator may give one; when it leaves zeros, the worker puts in its
  // device's peak.
  PeakTflops peak_tflops;

  // ---- Filled by the worker (not in RunTrialRequest.spec_json).

  // RunTrialRequest.trial_id and .attempt: name the rank's work files and
  // log lines.
  std::string trial_id;
  int attempt = 1;
  std::string device = "cpu";  // "cpu" or "cuda:N": the worker's device
  int num_threads = 1;         // intra-op threads on CPU
  // torchscript models: path of the module file on the trial's machine (the
  // worker stores RunTrialRequest.model_file there).
  std::string model_file;
};

// The most warm-up or measured steps a spec may ask for.
inline constexpr int kMaxTrialSteps = 100000;
// The most ranks of one trial on one worker (a worker has at most 1024
// devices: worker/worker_flags.h).
inline constexpr int kMaxLocalRanks = 1024;

// The JSON keys of the fields the worker fills (see above).
inline constexpr const char* kWorkerFilledTrialSpecKeys[] = {"trial_id", "attempt", "device",
                                                             "num_threads", "model_file"};

// Every field: the spec file the runner reads.
nlohmann::json TrialSpecToJson(const TrialSpec& spec);
// The coordinator's fields only (TrialSpecToJson without
// kWorkerFilledTrialSpecKeys): RunTrialRequest.spec_json.
nlohmann::json TrialSpecToRequestJson(const TrialSpec& spec);
// Reads either form; a key left out keeps the field's default.
// INVALID_ARGUMENT for a missing or mistyped key, or sizes out of range
// (measured_steps 1..kMaxTrialSteps, warmup_steps 0..kMaxTrialSteps,
// 0 <= rank < world_size, 1 <= local_world_size <= world_size,
// 0 <= group_rank <= rank, local_device_indices empty or one per local rank
// with local_rank < local_world_size, ...).
absl::StatusOr<TrialSpec> TrialSpecFromJson(const nlohmann::json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_TRIAL_CONTRACT_TRIAL_SPEC_H_
