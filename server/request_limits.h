// The bounds on what a client or a worker may ask of the coordinator: one
// table (kRequestLimits) of every limit, its bound, the field it applies to
// and why the bound is where it is, and the checks that read it.
//
// What passes these checks is cheap to validate, search, store and show:
// no request makes the coordinator parse, enumerate or hold more than the
// table allows. The bounds are far above every real model and cluster of
// today (each row says what it leaves room for), so a refusal means a
// mistaken or hostile request, not a big model.
//
// Error codes, by row: RESOURCE_EXHAUSTED for a size or a count over its
// bound (bytes, entries, nesting, combinations, devices), INVALID_ARGUMENT
// for a value outside its range (a negative number, a model dimension no
// model has). The message starts with the field as the request names it and
// says the value and the bound:
//   "model_config: 300000 bytes, at most 262144 allowed"
//   "devices[3].memory_bytes: -1 bytes, must be between 0 and 70368744177664"
//
// Pure functions of their argument; any thread.
#ifndef AUTOACCEL_SERVER_REQUEST_LIMITS_H_
#define AUTOACCEL_SERVER_REQUEST_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/untrusted_json.h"
#include "proto/autoaccel.pb.h"
#include "proto/convert.h"
#include "spec/model_spec.h"

namespace autoaccel {

// The rows of kRequestLimits, in its order.
enum class Limit {
  // Messages (gRPC) and the tuning request's sizes.
  kMessageBytes,
  kModelConfigBytes,
  kJsonDepth,
  kOverrides,
  kOverrideBytes,
  kModelFileBytes,
  kTextBytes,
  kListEntries,
  kLauncherNameBytes,
  kDeviceTypeBytes,
  kSpaceCombinations,
  kEstimateClusters,
  // The tuning request's numbers.
  kTimeLimitSeconds,
  kTrialTimeoutSeconds,
  kSteps,
  kMinMeasuredSeconds,
  kConfirmTolerance,
  kMaxTrials,
  kWorldSize,
  kSeqLen,
  kGlobalBatchSize,
  // The model, once its config is read.
  kLayers,
  kHidden,
  kHeads,
  kHeadDim,
  kMlpWidth,
  kVocabulary,
  kPositions,
  kExperts,
  kExpertWidth,
  kLatentRank,
  // A worker's registration.
  kWorkerIdBytes,
  kIdentityKeyBytes,
  kAddressBytes,
  kDevices,
  kDeviceIndex,
  kDeviceNameBytes,
  kDeviceMemoryBytes,
  kDevicePeakTflops,
  kRendezvousPort,
  kHostCores,
  kHostMemoryBytes,
  kLaunchers,
  kLauncherFormatBytes,
  kLauncherDimensions,
  // Per user: for the coordinator's user identity (not checked here yet).
  kJobsPerUser,
  kWatchStreamsPerUser,
};

struct RequestLimit {
  Limit limit;
  // The field as errors name it; "[i]" marks a per-entry bound.
  const char* field;
  int64_t min;       // smallest value allowed (sizes and counts: 0)
  int64_t max;       // largest value allowed
  const char* unit;  // "bytes", "entries", "s", ... or ""
  // The code of a value over `max` (below `min` is always INVALID_ARGUMENT).
  absl::StatusCode over;
  // Which function enforces it.
  const char* checked_by;
  // Why the bound is where it is.
  const char* why;
};

inline constexpr int64_t kKiB = 1024;
inline constexpr int64_t kMiB = 1024 * kKiB;
inline constexpr int64_t kTiB = kMiB * kMiB;

inline constexpr absl::StatusCode kTooBig = absl::StatusCode::kResourceExhausted;
inline constexpr absl::StatusCode kOutOfRange = absl::StatusCode::kInvalidArgument;

inline constexpr char kByTune[] = "CheckTuneRequestLimits";
inline constexpr char kByModel[] = "CheckModelLimits";
inline constexpr char kByRegister[] = "CheckRegisterRequestLimits";

// clang-format off
inline constexpr RequestLimit kRequestLimits[] = {
    {Limit::kMessageBytes, "message", 0, kMaxMessageBytes, "bytes", kTooBig,
     "gRPC (server/main.cc: SetMaxReceiveMessageSize(kMaxMessageBytes))",
     "a TorchScript file of kMaxModelFileBytes plus 16 MiB for the rest of the request"},
    {Limit::kModelConfigBytes, "model_config", 0, 256 * kKiB, "bytes", kTooBig, kByTune,
     "a Hugging Face config.json is a few KiB; the largest (with layer_types lists) under 20 KiB"},
    {Limit::kJsonDepth, "model_config", 0, kMaxJsonDepth, "levels of nesting", kTooBig, kByTune,
     "configs nest 3 deep; nlohmann::json recurses once per level (common/untrusted_json.h)"},
    {Limit::kOverrides, "override", 0, 64, "entries", kTooBig, kByTune,
     "--override edits a few keys of the config"},
    {Limit::kOverrideBytes, "override[i]", 0, 4 * kKiB, "bytes", kTooBig, kByTune,
     "KEY=VALUE, the value a JSON number, string or short list"},
    {Limit::kModelFileBytes, "model_file", 0, kMaxModelFileBytes, "bytes", kTooBig, kByTune,
     "proto/convert.h kMaxModelFileBytes: the CLI reads no more; each trial sends it to a worker"},
    {Limit::kTextBytes, "(every other string field)", 0, 16 * kKiB, "bytes", kTooBig, kByTune,
     "input_spec, load_strategy, algorithm, include/exclude entries: a line each"},
    {Limit::kListEntries, "(every repeated field)", 0, 256, "entries", kTooBig, kByTune,
     "a candidate list names a few values of one dimension (micro-batch sizes: powers of two)"},
    {Limit::kLauncherNameBytes, "launcher", 0, 64, "bytes", kTooBig, kByTune,
     "worker/launchers.cc refuses launcher names longer than 64"},
    {Limit::kDeviceTypeBytes, "device_type", 0, 32, "bytes", kTooBig, kByTune,
     "cpu, cuda, musa, xpu, ...: a short lower-case word"},
    {Limit::kSpaceCombinations, "space", 0, 250000, "combinations", kTooBig,
     "EnumerateSpace (search/space.h), counted before it allocates",
     "a 7B model on 8 ranks spans ~42,000; each candidate costs ~200 bytes while the job runs"},
    {Limit::kEstimateClusters, "world_sizes x devices", 0, 32, "clusters", kTooBig,
     "CheckEstimateRequestLimits",
     "each cluster ranks a whole space: 0.2-0.5 s for a 70B on 256-4096 GPUs on the build "
     "machine, so a sweep stays under ~16 s of the coordinator's CPU"},
    {Limit::kTimeLimitSeconds, "time_limit_seconds", 0, 30 * 24 * 3600, "s", kOutOfRange, kByTune,
     "30 days; a tuning job takes minutes to hours"},
    {Limit::kTrialTimeoutSeconds, "trial_timeout_seconds", 0, 24 * 3600, "s", kOutOfRange,
     kByTune, "one day; a dry run takes seconds to minutes"},
    {Limit::kSteps, "warmup_steps, measured_steps", 0, 10000, "", kOutOfRange, kByTune,
     "each; a dry run measures tens of steps"},
    {Limit::kMinMeasuredSeconds, "min_measured_seconds", 0, 600, "s", kOutOfRange, kByTune,
     "ten minutes of timed steps per trial"},
    {Limit::kConfirmTolerance, "confirm_tolerance", 0, 1, "", kOutOfRange, kByTune,
     "a fraction (1: measurements twice as fast as each other agree); repeats differ by a few "
     "percent"},
    {Limit::kMaxTrials, "max_trials", 0, 1000000, "", kOutOfRange, kByTune,
     "four times the largest space (kSpaceCombinations), so any space can be run in full"},
    {Limit::kWorldSize, "world_size", 0, 65536, "ranks", kOutOfRange, kByTune,
     "the largest training clusters today have ~32,000 GPUs"},
    {Limit::kSeqLen, "seq_len", 0, 1 << 24, "tokens", kOutOfRange, kByTune,
     "16M; the longest contexts trained today are 1M-10M tokens"},
    {Limit::kGlobalBatchSize, "global_batch_size", 0, 1 << 24, "samples", kOutOfRange, kByTune,
     "16M samples per step; large runs use a few thousand"},
    {Limit::kLayers, "model_config.num_hidden_layers", 0, 1024, "", kOutOfRange, kByModel,
     "the deepest models today have ~130 layers (Llama 3.1 405B: 126)"},
    {Limit::kHidden, "model_config.hidden_size", 0, 131072, "", kOutOfRange, kByModel,
     "the widest today are ~20,000 (PaLM 540B: 18,432; Llama 3.1 405B: 16,384)"},
    {Limit::kHeads, "model_config.num_attention_heads", 0, 4096, "", kOutOfRange, kByModel,
     "hidden_size / 32 at the largest hidden size; 128 heads is today's most"},
    {Limit::kHeadDim, "model_config.head_dim", 0, 4096, "", kOutOfRange, kByModel,
     "heads are 64 to 256 wide today"},
    {Limit::kMlpWidth, "model_config.intermediate_size", 0, 1 << 19, "", kOutOfRange, kByModel,
     "4 x the largest hidden size; the widest today ~74,000 (PaLM 540B: 73,728)"},
    {Limit::kVocabulary, "model_config.vocab_size", 0, 1 << 22, "", kOutOfRange, kByModel,
     "4M tokens; the largest vocabularies today are ~260,000 (Gemma: 256,000)"},
    {Limit::kPositions, "model_config.max_position_embeddings", 0, 1 << 24, "", kOutOfRange,
     kByModel, "as seq_len; Llama 4 Scout declares 10,485,760"},
    {Limit::kExperts, "model_config.num_local_experts", 0, 1024, "", kOutOfRange, kByModel,
     "mixture-of-experts models today have up to 384 experts"},
    {Limit::kExpertWidth, "model_config.moe_intermediate_size", 0, 1 << 19, "", kOutOfRange,
     kByModel, "as intermediate_size; experts today are 768 to 2,048 wide"},
    {Limit::kLatentRank, "model_config.kv_lora_rank", 0, 1 << 16, "", kOutOfRange, kByModel,
     "q_lora_rank too; DeepSeek-V3's are 512 and 1,536"},
    {Limit::kWorkerIdBytes, "worker_id", 0, 256, "bytes", kTooBig, kByRegister,
     "defaults to the worker's HOST:PORT"},
    {Limit::kIdentityKeyBytes, "identity_key", 0, 256, "bytes", kTooBig, kByRegister,
     "the worker's key is 64 hex digits (common/secret_token.h)"},
    {Limit::kAddressBytes, "address", 0, 512, "bytes", kTooBig, kByRegister,
     "HOST:PORT; a DNS name has at most 253 characters"},
    {Limit::kDevices, "devices", 0, 1024, "entries", kTooBig, kByRegister,
     "one node's devices: 8 GPUs, or a CPU's cores as cpu slots (the largest hosts: ~800)"},
    {Limit::kDeviceIndex, "devices[i].index", 0, 1023, "", kOutOfRange, kByRegister,
     "an index among the node's devices (kDevices)"},
    {Limit::kDeviceNameBytes, "devices[i].name", 0, 256, "bytes", kTooBig, kByRegister,
     "a product name (\"NVIDIA H100 80GB HBM3\"); types are bounded by kDeviceTypeBytes"},
    {Limit::kDeviceMemoryBytes, "devices[i].memory_bytes", 0, 64 * kTiB, "bytes", kOutOfRange,
     kByRegister, "a GPU has at most 288 GB today; a cpu slot may own its host (kHostMemoryBytes)"},
    {Limit::kDevicePeakTflops, "devices[i].peak_tflops", 0, 100000, "TFLOP/s", kOutOfRange,
     kByRegister, "the fastest GPU today peaks at ~5,000 TFLOP/s (dense FP8/FP4)"},
    {Limit::kRendezvousPort, "rendezvous_port_min, rendezvous_port_max", 0, 65535, "",
     kOutOfRange, kByRegister, "a TCP port; WorkerPool::Register checks min <= max"},
    {Limit::kHostCores, "host_cpu_cores", 0, 16384, "", kOutOfRange, kByRegister,
     "the largest single hosts today have ~2,000 hardware threads"},
    {Limit::kHostMemoryBytes, "host_memory_bytes", 0, 64 * kTiB, "bytes", kOutOfRange,
     kByRegister, "the largest single hosts today have 32-48 TiB"},
    {Limit::kLaunchers, "launchers", 0, 256, "entries", kTooBig, kByRegister,
     "an operator registers a few training scripts per worker"},
    {Limit::kLauncherFormatBytes, "launchers[i].format, launchers[i].dimensions[j]", 0, 64,
     "bytes", kTooBig, kByRegister, "an export format or strategy key name"},
    {Limit::kLauncherDimensions, "launchers[i].dimensions", 0, 64, "entries", kTooBig,
     kByRegister, "the strategy has ~15 dimensions (spec/strategy_fields.h)"},
    {Limit::kJobsPerUser, "jobs per user", 0, 64, "jobs", kTooBig,
     "JobManager::SubmitJob (users authenticated)",
     "unfinished jobs one user may have at once; each holds its space (kSpaceCombinations)"},
    {Limit::kWatchStreamsPerUser, "watch streams per user", 0, 256, "streams", kTooBig,
     "TuningServiceImpl::WatchJob (users authenticated)",
     "WatchJob streams one user may hold open at once"},
};
// clang-format on

constexpr bool LimitsInEnumOrder() {
  for (size_t i = 0; i < std::size(kRequestLimits); ++i) {
    if (static_cast<size_t>(kRequestLimits[i].limit) != i) return false;
  }
  return static_cast<size_t>(Limit::kWatchStreamsPerUser) + 1 == std::size(kRequestLimits);
}
static_assert(LimitsInEnumOrder(), "kRequestLimits: one row per Limit, in the enum's order");

constexpr const RequestLimit& LimitRow(Limit limit) {
  return kRequestLimits[static_cast<size_t>(limit)];
}
constexpr int64_t LimitMax(Limit limit) { return LimitRow(limit).max; }

// OK when min <= value <= max of `limit`'s row (and `value` is finite), else
// the row's error naming `field` (the row's own field when empty):
//   "world_size: 70000 ranks, at most 65536 allowed".
absl::Status CheckLimit(Limit limit, double value, absl::string_view field = "");

// Every size, count and number of a tuning request, before anything is
// parsed: the config's bytes and nesting, the overrides, the model file,
// every string and repeated field (walked by reflection, so a field added to
// the message is bounded too), the launcher and device type names, and the
// numbers (time limit, steps, world size, sequence length, batch, budget).
absl::Status CheckTuneRequestLimits(const v1::TuneRequest& request);

// What Export and Estimate (offline/, computed on the coordinator) parse:
// the model as a tuning request's (config bytes and nesting, overrides),
// an Estimate's device catalog JSON as a model config, every other string
// and list (walked by reflection), the sizes (world_size, devices_per_node,
// seq_len, global_batch_size, each of world_sizes) and an Estimate's `top`
// (a list of at most kListEntries strategies) and its clusters
// (world_sizes x devices, kEstimateClusters).
absl::Status CheckExportRequestLimits(const v1::ExportRequest& request);
absl::Status CheckEstimateRequestLimits(const v1::EstimateRequest& request);
// What QueryStrategies parses: the model as a tuning request's, the device
// type, every other string and list, and the sizes (world_size, seq_len,
// global_batch_size).
absl::Status CheckQueryRequestLimits(const v1::QueryStrategiesRequest& request);

// The model's dimensions once its config is read (layers, hidden size,
// heads, head width, MLP width, vocabulary, positions, experts). The field
// is named as the family's config names it ("model_config.n_layer" for
// gpt2, "model_config.num_hidden_layers" for the others).
absl::Status CheckModelLimits(const ModelSpec& model);

// A worker's registration: id and address lengths, device count, each
// device's type, name, index, memory and peak, the rendezvous ports, the
// host's cores and memory, and the launchers. Then no string of it (worker
// id, address, device types and names, launchers, ...: every string field,
// found by reflection) may hold a control character (C0, DEL, C1):
// INVALID_ARGUMENT "devices[0].name: control character U+001B at byte 3; ...".
// The coordinator logs these strings and `autoaccel workers` prints them, so
// a newline would forge a log line and an escape sequence would drive the
// terminal of whoever lists the workers.
absl::Status CheckRegisterRequestLimits(const v1::RegisterRequest& request);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_REQUEST_LIMITS_H_
