// The contract between the worker daemon and the trial runner
// (`autoaccel-trial --spec FILE --result FILE`): a TrialSpec in, a
// TrialResult out, both as JSON files. Pure C++: the worker links this
// without LibTorch.
#ifndef AUTOACCEL_ENGINE_TRIAL_IO_H_
#define AUTOACCEL_ENGINE_TRIAL_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "search/model_spec.h"
#include "search/strategy.h"
#include "search/trial.h"

namespace autoaccel {

struct TrialSpec {
  std::string trial_id;
  int attempt = 1;
  // Gang position; a single-rank trial has rank 0 of world_size 1.
  int rank = 0;
  int world_size = 1;
  // This rank's index among the trial's ranks on its worker (0-based).
  int local_rank = 0;
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
  // Tensor memory the rank may use; 0 means no limit. Exceeding it is OOM.
  int64_t memory_limit_bytes = 0;
  std::string device = "cpu";  // "cpu" or "cuda:N"
  int num_threads = 1;         // intra-op threads on CPU
  uint64_t seed = 1234;
  // The device's dense peak, for MFU; zeros (unknown) leave mfu at 0.
  PeakTflops peak_tflops;
  // Data parallelism: target size of a gradient bucket (0: the engine's
  // default, 25 MiB).
  int64_t bucket_bytes = 0;
  // Report a digest of the parameters after the last step (for checks that
  // data-parallel replicas agree); costs a copy of the model.
  bool report_parameter_digest = false;
  // torchscript models: path of the module file on the trial's machine (the
  // worker writes it there).
  std::string model_file;
};

// The most warm-up or measured steps a spec may ask for.
inline constexpr int kMaxTrialSteps = 100000;

nlohmann::json TrialSpecToJson(const TrialSpec& spec);
// INVALID_ARGUMENT for a missing or mistyped key, or sizes out of range
// (measured_steps 1..kMaxTrialSteps, warmup_steps 0..kMaxTrialSteps, ...).
absl::StatusOr<TrialSpec> TrialSpecFromJson(const nlohmann::json& j);

struct TrialResult {
  TrialStatus status = TrialStatus::kFailed;  // SUCCEEDED, OOM or FAILED
  std::string error;                          // why, when not SUCCEEDED
  // FAILED for a reason outside the strategy: the rendezvous could not be
  // set up (port taken, a peer never came), a peer rank vanished, the rank
  // was killed from outside or could not be started. The coordinator retries
  // such a trial and never counts it as a measurement of the strategy.
  bool infrastructure = false;
  TrialMetrics metrics;
  // Loss of every step, warm-up included (the mean over the global batch).
  std::vector<double> step_losses;
  // With report_parameter_digest: "fnv1a64:<hex>" over this rank's
  // parameters in model order (fsdp: gathered), after the last step.
  std::string parameter_digest;
};

nlohmann::json TrialResultToJson(const TrialResult& result);
absl::StatusOr<TrialResult> TrialResultFromJson(const nlohmann::json& j);

// File helpers: whole-file read/write; a write goes to FILE.tmp then renames,
// so a reader never sees half a result.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);
absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_TRIAL_IO_H_
