// The search space's dimensions as data: one row per list of candidate
// values a tuning request may give (TuneRequest's repeated fields, `autoaccel
// tune`'s flags, the Python client's keywords). Every place that handles
// them walks this table rather than naming them:
//   - the request's lists into the SpaceRequest that EnumerateSpace reads
//     (proto/request_space.cc SpaceFromRequest, by protobuf reflection on
//     the rows' request fields; "precisions: unknown value 'x' ..."),
//   - `autoaccel tune`'s flags (client/main.cc),
//   - what a launcher that cannot be told a dimension runs
//     (server/launcher_job.cc),
//   - the Python client's keywords (python/autoaccel/client.py; the python
//     test checks them against `autoaccel tune --help`).
//
// Adding a searched dimension (context parallelism, say) is: its
// StrategyField (spec/strategy_fields.h), its SpaceRequest list, a row
// here, the TuneRequest field, and its rules (space.cc). Nothing here is
// mutable; any thread.
#ifndef AUTOACCEL_SEARCH_SPACE_DIMENSIONS_H_
#define AUTOACCEL_SEARCH_SPACE_DIMENSIONS_H_

#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "search/space.h"
#include "spec/strategy_fields.h"

namespace autoaccel {

// A flag dimension's values as requests spell them.
inline constexpr std::pair<bool, absl::string_view> kOffOnNames[] = {{false, "off"}, {true, "on"}};

// One dimension. T is int (counts: the request's repeated int32), bool or an
// enumeration (names: the request's repeated string).
template <typename T>
struct SpaceDimension {
  using Value = T;
  absl::string_view key;             // the kStrategyFields row whose values it lists
  absl::string_view request_field;   // TuneRequest's repeated field
  absl::string_view flag;            // `autoaccel tune`'s flag
  absl::string_view python_keyword;  // autoaccel.Client.tune()'s keyword
  absl::string_view help;            // the flag's help
  std::vector<T> SpaceRequest::*member;
  // What the space keeps when a launcher does not honour the key (its script
  // cannot be told it); nullopt: a rule of server/launcher_job.cc decides.
  std::optional<T> launcher_default;
  // bool and enumerations: every value and its name.
  absl::Span<const std::pair<T, absl::string_view>> names = {};
};

inline constexpr std::tuple kSpaceDimensions{
    SpaceDimension<int>{"tensor_parallel", "tensor_parallel_sizes", "--tp-sizes", "tp_sizes",
                        "tensor-parallel sizes to try (default: every divisor of --world-size)",
                        &SpaceRequest::tensor_parallel_sizes, 1},
    SpaceDimension<int>{"pipeline_parallel", "pipeline_parallel_sizes", "--pp-sizes", "pp_sizes",
                        "pipeline-parallel sizes to try (default: every divisor of --world-size)",
                        &SpaceRequest::pipeline_parallel_sizes, 1},
    SpaceDimension<Sharding>{"sharding", "shardings", "--shardings", "shardings",
                             "data-parallel sharding to try: none,zero1,zero2,fsdp (default: all)",
                             &SpaceRequest::shardings, Sharding::kNone, kShardingNames},
    SpaceDimension<bool>{"sequence_parallel", "sequence_parallel", "--sequence-parallel",
                         "sequence_parallel",
                         "sequence parallelism with tensor parallelism: off,on (default: both)",
                         &SpaceRequest::sequence_parallel_modes, false, kOffOnNames},
    SpaceDimension<int>{"context_parallel", "context_parallel_sizes", "--cp-sizes", "cp_sizes",
                        "context-parallel sizes to try, each dividing --world-size with the "
                        "tensor and pipeline sizes (default: 1, no context parallelism)",
                        &SpaceRequest::context_parallel_sizes, 1},
    SpaceDimension<ContextParallelComm>{
        "context_parallel_comm", "context_parallel_comms", "--cp-comms", "cp_comms",
        "how context-parallel ranks exchange keys and values: p2p,all_gather (default: both)",
        &SpaceRequest::context_parallel_comms, ContextParallelComm::kP2p,
        kContextParallelCommNames},
    SpaceDimension<int>{"expert_parallel", "expert_parallel_sizes", "--ep-sizes", "ep_sizes",
                        "expert-parallel sizes to try for a mixture-of-experts model, each "
                        "dividing the data- and context-parallel ranks (default: 1)",
                        &SpaceRequest::expert_parallel_sizes, 1},
    SpaceDimension<PipelineSchedule>{
        "pipeline_schedule", "pipeline_schedules", "--pipeline-schedules", "pipeline_schedules",
        "pipeline schedules to try: 1f1b,interleaved (default: both)",
        &SpaceRequest::pipeline_schedules, PipelineSchedule::k1F1B, kPipelineScheduleNames},
    // Model chunks exist only for the interleaved schedule: a script that
    // cannot be told their number runs 1f1b (launcher_job.cc).
    SpaceDimension<int>{"virtual_stages", "virtual_stages", "--virtual-stages", "virtual_stages",
                        "model chunks per rank for interleaved, each >= 2 (default: 2)",
                        &SpaceRequest::virtual_stages, std::nullopt},
    // One choice with grad_accum_steps (launcher_job.cc LauncherFixesMicroBatch).
    SpaceDimension<int>{"micro_batch_size", "micro_batch_sizes", "--micro-batch-sizes",
                        "micro_batch_sizes", "micro-batch sizes to try (default: powers of two)",
                        &SpaceRequest::micro_batch_sizes, std::nullopt},
    SpaceDimension<Precision>{
        "precision", "precisions", "--precisions", "precisions",
        "precisions to try: bf16,pure_bf16,fp16,fp32,fp8 (default: all the device runs but "
        "fp8)",
        &SpaceRequest::precisions, Precision::kFp32, kPrecisionNames},
    SpaceDimension<Checkpointing>{
        "checkpointing", "checkpointings", "--checkpointings", "checkpointings",
        "activation checkpointing to try: none,selective,full (default: all)",
        &SpaceRequest::checkpointings, Checkpointing::kNone, kCheckpointingNames},
    SpaceDimension<int>{"checkpoint_percent", "checkpoint_percents", "--checkpoint-percents",
                        "checkpoint_percents",
                        "share of layers, 1..100, that selective/full checkpoint (default: 50,100)",
                        &SpaceRequest::checkpoint_percents, 100},
    SpaceDimension<Attention>{"attention", "attentions", "--attentions", "attentions",
                              "attention kernels to try: sdpa,math (default: all)",
                              &SpaceRequest::attentions, Attention::kMath, kAttentionNames},
    SpaceDimension<Optimizer>{"optimizer", "optimizers", "--optimizers", "optimizers",
                              "optimizers to try: fused_adamw,adamw (default: all)",
                              &SpaceRequest::optimizers, Optimizer::kAdamW, kOptimizerNames},
    SpaceDimension<Offload>{
        "offload", "offloads", "--offloads", "offloads",
        "optimizer state placement to try: none,cpu (default: none on a cpu device, both on "
        "cuda)",
        &SpaceRequest::offloads, Offload::kNone, kOffloadNames},
};

inline constexpr size_t kNumSpaceDimensions = std::tuple_size_v<decltype(kSpaceDimensions)>;

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_SPACE_DIMENSIONS_H_
