// The search space: which strategies a tuning job may try.
//
// EnumerateSpace() takes the cross product of the requested dimension values,
// drops the combinations that a compatibility rule rejects, and returns the
// rest in a fixed order of promise. Compatibility rules are data (a table of
// named checks, see CompatibilityRules()), so a new dimension adds rules
// rather than branches.
//
// Pure functions: no I/O, no global state; safe to call from any thread.
#ifndef AUTOACCEL_SEARCH_SPACE_H_
#define AUTOACCEL_SEARCH_SPACE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "search/model_spec.h"
#include "search/strategy.h"

namespace autoaccel {

struct SpaceRequest {
  ModelSpec model;
  int seq_len = 0;            // tokens per sample; 0 < seq_len <= model.MaxSeqLen()
  int global_batch_size = 0;  // samples per optimizer step, summed over data-parallel ranks
  // Ranks of every trial: each strategy's data_parallel * tensor_parallel *
  // pipeline_parallel (the size of the cluster the user will train on).
  int world_size = 1;
  // Candidate values per dimension. Empty means every value that applies and
  // the device can run:
  //   tensor_parallel_sizes,
  //   pipeline_parallel_sizes: every divisor of world_size. The layouts are
  //                        every (tp, pp) of the two lists with tp * pp
  //                        dividing world_size, data_parallel =
  //                        world_size / (tp * pp);
  //   shardings:           all four; a layout with data_parallel 1 has
  //                        nothing to shard over and runs none only;
  //   pipeline_schedules:  1f1b and interleaved; a layout with
  //                        pipeline_parallel 1 runs 1f1b only;
  //   virtual_stages:      {2} (model chunks per rank, for interleaved only;
  //                        each >= 2);
  //   sequence_parallel_modes: {false, true}; a layout with tensor_parallel 1
  //                        runs false only;
  //   micro_batch_sizes:   per layout, every power of two (1, 2, 4, ...) that
  //                        divides global_batch_size / data_parallel;
  //   checkpoint_percents: {50, 100} (applied to selective and full; none
  //                        always runs at 100);
  //   the other enum lists: every enumerator the device supports (see
  //                        device_supports_bf16 and device_is_accelerator).
  // Given values may come in any order and may repeat; the output order does
  // not depend on it. Given sizes that do not fit are skipped: parallel
  // sizes whose product does not divide world_size, layouts whose
  // data_parallel does not divide the global batch, micro-batch sizes that do
  // not divide a layout's per-rank batch.
  std::vector<int> tensor_parallel_sizes;
  std::vector<int> pipeline_parallel_sizes;
  std::vector<Sharding> shardings;
  std::vector<PipelineSchedule> pipeline_schedules;
  std::vector<int> virtual_stages;
  std::vector<bool> sequence_parallel_modes;
  std::vector<int> micro_batch_sizes;
  std::vector<Precision> precisions;
  std::vector<Checkpointing> checkpointings;
  std::vector<int> checkpoint_percents;  // each in 1..100
  std::vector<Attention> attentions;
  std::vector<Optimizer> optimizers;
  std::vector<Offload> offloads;
  // bf16 and pure_bf16 are dropped from the space when false.
  bool device_supports_bf16 = true;
  // True for an accelerator (cuda), false for a CPU device. offload=cpu is
  // dropped from the space when false: on a CPU device the optimizer state
  // already lives in host memory.
  bool device_is_accelerator = false;
  // True when autoaccel's engine runs the trials; false for a launcher's
  // (the user's own training script, TuneRequest.launcher): then the rules
  // about what the engine can build ("fixed_graph", "parallel_family") do
  // not apply (the user's framework decides, and the export format says
  // what it refuses), and a model whose layers are unknown (no config
  // given) has no layer count to check ("pipeline_layers").
  bool engine_runs_trials = true;
  // When > 0: the most combinations (the cross product of the dimension
  // values, before compatibility rules) EnumerateSpace will look at; a bigger
  // space is refused before it is built.
  int64_t max_combinations = 0;
};

// Checks the request itself (not any strategy). Returns OK or
// INVALID_ARGUMENT whose message starts with the offending field:
//   "seq_len: ..."            seq_len <= 0 or > model.MaxSeqLen()
//   "world_size: ..."         world_size <= 0
//   "tensor_parallel_sizes: ..." / "pipeline_parallel_sizes: ..."
//                             a given size <= 0, none of the given sizes
//                             divides world_size, or no tp * pp does
//   "global_batch_size: ..."  <= 0, not divisible by the data_parallel of
//                             any layout, or no layout's per-rank batch is
//                             divisible by any of the given micro-batch sizes
//   "micro_batch_sizes: ..."  a given size <= 0
//   "virtual_stages: ..."     a given count < 2
//   "checkpoint_percents: ..." a given percent outside 1..100
//   "precisions: ..." / "checkpointings: ..." / "attentions: ..." /
//   "optimizers: ..." / "offloads: ..." / "shardings: ..." /
//   "pipeline_schedules: ..."
//                             an unknown enumerator, or nothing left once the
//                             values the device cannot run are dropped
//                             (precisions: only bf16/pure_bf16 without
//                             device_supports_bf16; offloads: only cpu
//                             without device_is_accelerator)
absl::Status ValidateSpaceRequest(const SpaceRequest& request);

// One compatibility rule. `check` returns OK when the strategy may run under
// the request, else INVALID_ARGUMENT whose message starts with
// "strategy.<field>: " and says why. Rules assume nothing of each other.
struct CompatibilityRule {
  absl::string_view name;  // stable id, e.g. "batch_product"
  absl::Status (*check)(const SpaceRequest& request, const Strategy& strategy);
};

// The rules CheckCompatible() applies, in order:
//   "positive_sizes"      micro_batch_size and grad_accum_steps are positive;
//   "known_values"        precision, checkpointing, attention, optimizer,
//                         offload, sharding and pipeline_schedule are
//                         enumerators;
//   "checkpoint_percent"  checkpoint_percent is in 1..100, and 100 when
//                         checkpointing is none;
//   "layout"              CheckLayout(): degrees >= 1, sharding only with
//                         data_parallel > 1, sequence_parallel only with
//                         tensor_parallel > 1, the schedule and
//                         virtual_stages consistent with pipeline_parallel;
//   "layout_product"      data_parallel * tensor_parallel *
//                         pipeline_parallel == world_size;
//   "batch_product"       micro_batch_size * grad_accum_steps *
//                         data_parallel == global_batch_size;
//   "bf16_device"         bf16 and pure_bf16 need device_supports_bf16;
//   "offload_device"      offload=cpu needs device_is_accelerator;
//   "fixed_graph"         a torchscript model allows checkpointing none and
//                         attention math only (its forward is the user's
//                         code: no layers to checkpoint, its own attention);
//                         not for a launcher's trials (engine_runs_trials);
//   "parallel_family"     tensor_parallel > 1 or pipeline_parallel > 1 only
//                         for gpt2 and llama (torchscript, bert and mixtral
//                         run data parallel only, with any sharding); not
//                         for a launcher's trials;
//   "tensor_parallel_model" tensor_parallel divides the attention heads
//                         (n_head), the key-value heads (n_kv_head, llama
//                         and mixtral) and the MLP inner size (n_inner); the
//                         vocabulary need not divide (the engine pads it);
//   "pipeline_layers"     (when the model's layers are known) with
//                         pipeline_parallel > 1: pipeline_parallel *
//                         virtual_stages <= n_layer; interleaved also needs
//                         n_layer divisible by pipeline_parallel *
//                         virtual_stages and grad_accum_steps divisible by
//                         pipeline_parallel;
//   "pipeline_sharding"   with pipeline_parallel > 1 the sharding is none or
//                         zero1 (zero2 and fsdp reduce gradients per
//                         micro-batch, which pipeline stages interleave; as
//                         DeepSpeed, which allows only ZeRO-1 with pipelines);
//   "sequence_parallel"   sequence parallelism needs seq_len divisible by
//                         tensor_parallel (each rank keeps a slice of it).
// The per-dimension candidate lists of the request are a choice of the user,
// not a compatibility rule: a strategy outside them can still be compatible.
absl::Span<const CompatibilityRule> CompatibilityRules();

// OK, or the first failing rule's INVALID_ARGUMENT. Does not validate the
// request itself (see ValidateSpaceRequest).
absl::Status CheckCompatible(const SpaceRequest& request, const Strategy& strategy);

// Every compatible strategy of the request, each once, with
// grad_accum_steps = global_batch_size / (data_parallel * micro_batch_size).
//
// Order (deterministic; likely-best first, so a job cut short by its time
// limit has already tried the promising strategies). Nested loops, outermost
// first, each dimension in its preferred order:
//   layout         (tensor_parallel, pipeline_parallel) by tp * pp ascending,
//                  then pp ascending: (1,1), (2,1), (1,2), (4,1), (2,2),
//                  (1,4), ... (most data parallelism first: it communicates
//                  least per step; tensor before pipeline parallelism, which
//                  idles in its bubble)
//   sharding       none, zero1, zero2, fsdp (least communication first)
//   precision      bf16, pure_bf16, fp16, fp32
//                  (tensor-core GEMMs and half the bytes first; bf16 needs no
//                  loss scaling; pure_bf16 also keeps weights and gradients
//                  in bf16, with the fp32 master copy in the optimizer; fp16
//                  pays for loss scaling)
//   attention      sdpa, math             (fused kernel, no seq^2 buffer)
//   checkpointing  least recompute first: none, then selective at each
//                  percent ascending, then full at each percent ascending;
//                  with the default percents: none, selective@50,
//                  selective@100, full@50, full@100
//   optimizer      fused_adamw, adamw     (one kernel over all parameters)
//   offload        none, cpu              (no host round trip per step)
//   pp schedule    1f1b, then interleaved at each virtual_stages ascending
//   sequence par.  off, on
//   micro batch    largest to smallest    (fewer, larger GEMMs)
// Micro batch is innermost so that, under the best flags, an OOM at a large
// micro batch is followed straight away by the next smaller one. A
// single-rank request (world_size 1) has the one layout (1,1) and keeps the
// order it had before layouts existed.
//
// Errors: those of ValidateSpaceRequest(); RESOURCE_EXHAUSTED "space: N
// combinations, more than the M searched (the count of each dimension)"
// when max_combinations is exceeded, before anything is allocated; INVALID_ARGUMENT "space: no
// compatible strategy (...)" when every candidate is rejected.
absl::StatusOr<std::vector<Strategy>> EnumerateSpace(const SpaceRequest& request);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_SPACE_H_
