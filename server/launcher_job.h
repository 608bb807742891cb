// What a launcher changes in a tuning job (TuneRequest.launcher: the trials
// run the user's own training script through a command the workers'
// operator defined, docs/LAUNCHERS.md): the model when the request describes
// none, the search space (only the dimensions the script honours, only the
// combinations its export format accepts), and which workers may run it.
// The coordinator learns a launcher from the workers' registrations
// (v1::Launcher: name, format, dimensions); the command line never leaves
// the worker.
//
// Pure functions (the export library is pure too); any thread.
#ifndef AUTOACCEL_SERVER_LAUNCHER_JOB_H_
#define AUTOACCEL_SERVER_LAUNCHER_JOB_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/autoaccel.pb.h"
#include "search/space.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

// The model of a launcher job whose request gives no model config: one the
// coordinator cannot see inside. It is the torchscript family's shape-less
// spec without a file or inputs, which every part of the search already
// treats as opaque: no memory estimate (out-of-memory pruning learns from
// OOM trials alone), a step-time model of one step and its micro-batches
// calibrated by the measurements, no FLOPs (the script's `model` event
// gives the worker a parameter count for MFU instead).
ModelSpec UnknownLauncherModel();

// True when `model` is UnknownLauncherModel()'s (no config was given).
bool IsUnknownLauncherModel(const ModelSpec& model);

// Restricts `space` to what `launcher`'s script honours: each strategy
// dimension its `dimensions` do not list keeps its default value (Strategy{}:
// fp32, no checkpointing, the model's own attention, adamw, no offload, no
// sharding, tensor and pipeline parallel 1, ...; micro_batch_size and
// grad_accum_steps are one choice and vary together when either is listed,
// else the whole per-rank batch is one micro-batch). An empty list honours
// every dimension. Call before EnumerateSpace; when LauncherFixesMicroBatch,
// drop the enumerated strategies with grad_accum_steps > 1 afterwards.
//
// INVALID_ARGUMENT naming the request field when the request gives
// candidates for a dimension the launcher does not honour (e.g.
// "precisions: launcher 'hf' does not honour precision (it honours:
// micro_batch_size, sharding); leave the candidates out"), or when the
// launcher names a dimension that is no strategy field.
absl::Status RestrictSpaceToLauncher(const v1::Launcher& launcher, const v1::TuneRequest& request,
                                     SpaceRequest* space);

// Whether the launcher leaves the micro-batch split to the script (neither
// micro_batch_size nor grad_accum_steps honoured): the space then keeps
// only strategies with grad_accum_steps 1.
bool LauncherFixesMicroBatch(const v1::Launcher& launcher);

// Drops from `space` the strategies `launcher`'s export format rejects
// (export/exporter.h: the framework refuses the combination, e.g.
// accelerate with tensor parallelism on replicated data parallelism); a
// launcher without a format keeps all. `model`: the job's, or
// UnknownLauncherModel(). INVALID_ARGUMENT when none is left (with the
// format's reason for the first), or when the format is unknown.
absl::Status KeepExportable(const v1::Launcher& launcher, const ModelSpec& model, int world_size,
                            int global_batch_size, int seq_len, std::vector<Strategy>* space);

// The strategy dimensions' JSON keys in kStrategyFields' order that a
// launcher may list (every field of the strategy).
std::vector<std::string> LauncherDimensionKeys();

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_LAUNCHER_JOB_H_
