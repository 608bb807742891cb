// The search space: which strategies a tuning job may try.
//
// EnumerateSpace() takes the cross product of the requested dimension values,
// drops the combinations that a compatibility rule rejects, and returns the
// rest in a fixed order of promise. Compatibility rules are data (a table of
// named checks, spec/compatibility.h's CompatibilityRules()), so a new
// dimension adds rules rather than branches.
//
// Pure functions: no I/O, no global state; safe to call from any thread.
#ifndef AUTOACCEL_SEARCH_SPACE_H_
#define AUTOACCEL_SEARCH_SPACE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spec/compatibility.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

// A search: the setup every strategy must fit (TrainingSetup: model, batch,
// cluster, device), with the candidate values of each dimension. Of the
// setup's device facts, bf16, pure_bf16 and fp8 are dropped from the space
// without device_supports_bf16, fp8 without device_supports_fp8, offload=cpu
// without device_is_accelerator.
struct SpaceRequest : TrainingSetup {
  // Candidate values per dimension. Empty means every value that applies and
  // the device can run:
  //   tensor_parallel_sizes,
  //   pipeline_parallel_sizes: every divisor of world_size;
  //   context_parallel_sizes: {1}. The layouts are every (tp, pp, cp) of
  //                        the three lists with tp * pp * cp dividing
  //                        world_size, data_parallel = world_size /
  //                        (tp * pp * cp);
  //   context_parallel_comms: p2p and all_gather; a layout with
  //                        context_parallel 1 runs p2p only;
  //   expert_parallel_sizes: 1 and every size dividing both the model's
  //                        experts and world_size (1 only without
  //                        experts); a layout runs those dividing its
  //                        data_parallel * context_parallel;
  //   shardings:           all four; a layout with data_parallel *
  //                        context_parallel 1 has nothing to shard over
  //                        and runs none only;
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
  //   precisions:          every precision the device supports but fp8
  //                        (it changes the numerics of training: tried
  //                        only when listed);
  //   the other enum lists: every enumerator the device supports (see
  //                        device_supports_bf16, device_supports_fp8 and
  //                        device_is_accelerator).
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
  std::vector<int> context_parallel_sizes;
  std::vector<ContextParallelComm> context_parallel_comms;
  std::vector<int> expert_parallel_sizes;
  std::vector<int> micro_batch_sizes;
  std::vector<Precision> precisions;
  std::vector<Checkpointing> checkpointings;
  std::vector<int> checkpoint_percents;  // each in 1..100
  std::vector<Attention> attentions;
  std::vector<Optimizer> optimizers;
  std::vector<Offload> offloads;
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
//                             (precisions: only bf16/pure_bf16/fp8 without
//                             device_supports_bf16, only fp8 without
//                             device_supports_fp8; offloads: only cpu
//                             without device_is_accelerator)
absl::Status ValidateSpaceRequest(const SpaceRequest& request);

// Every compatible strategy of the request, each once, with
// grad_accum_steps = global_batch_size / (data_parallel * micro_batch_size).
//
// Order (deterministic; likely-best first, so a job cut short by its time
// limit has already tried the promising strategies). Nested loops, outermost
// first, each dimension in its preferred order:
//   layout         (tensor_parallel, pipeline_parallel, context_parallel) by
//                  tp * pp * cp ascending, then pp ascending, then cp
//                  ascending: (1,1), (2,1), (1,2), (4,1), (2,2), (1,4), ...
//                  without context parallelism (most data parallelism
//                  first: it communicates least per step; tensor before
//                  pipeline parallelism, which idles in its bubble)
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
//   cp exchange    p2p, all_gather        (p2p overlaps with attention)
//   expert par.    ascending              (no all-to-all first)
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

// The same strategies in the same order, each passed to `visit` as it is
// made instead of collected (a space can hold millions); the same errors,
// returned after the visits (none for an invalid request).
absl::Status ForEachInSpace(const SpaceRequest& request,
                            const std::function<void(const Strategy&)>& visit);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_SPACE_H_
