// Estimate without running: what the cost model (search/cost_model.h, at its
// priors) predicts for a strategy, or for the whole search space
// (search/space.h), on a cluster of a device type from the device catalog
// (search/device_catalog.h). The engine of `autoaccel estimate`.
//
// For each strategy: whether its per-device memory estimate fits the
// device's memory (strictly: no margin, unlike the tuner's pruning), the
// margin, the breakdown (MemoryEstimate), the predicted step time,
// tokens/s, and MFU = model FLOPs per step / step time / (world size · the
// device's dense peak at the strategy's precision), the model FLOPs being
// ModelSpec::TrainingFlopsPerToken (as a measured trial's MFU counts them).
//
// Pure; thread-safe.
#ifndef AUTOACCEL_SEARCH_ESTIMATE_H_
#define AUTOACCEL_SEARCH_ESTIMATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/device_catalog.h"
#include "search/memory_estimate.h"
#include "search/step_time.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

// The default safe margin: a tenth of the device's memory kept free, for
// what the memory estimate leaves out (the CUDA context, allocator
// fragmentation; the tuner prunes at the same 10%).
inline constexpr double kDefaultSafeMargin = 0.1;

struct EstimateRequest {
  ModelSpec model;  // REQUIRES: Validate() OK and not torchscript (its shape is unknown)
  int seq_len = 0;
  int global_batch_size = 0;
  int world_size = 1;
  CatalogDevice device;
  // Devices per node of the cluster; 0 = the catalog's figure for the device.
  int devices_per_node = 0;
  // EstimateTop's precisions; empty: bf16 and pure_bf16 on a CUDA device
  // whose bf16 peak is at least its fp16 and fp32 ones, else every precision
  // the device runs but fp8 (as a tuning job's default).
  std::vector<Precision> precisions;
  // EstimateTop's safe pick: the fastest strategy whose margin is at least
  // this fraction of the device's memory (0 <= safe_margin < 1).
  double safe_margin = kDefaultSafeMargin;
};

struct StrategyEstimate {
  Strategy strategy;
  bool fits = false;
  int64_t device_memory_bytes = 0;
  // device_memory_bytes - memory.total(): negative when it does not fit.
  int64_t margin_bytes = 0;
  double margin_fraction = 0;  // margin_bytes / device_memory_bytes
  MemoryEstimate memory;       // per device, worst rank
  std::string why_not;         // when !fits: the biggest parts against the device's memory
  double step_time_s = 0;
  double tokens_per_second = 0;
  double model_flops_per_step = 0;
  double mfu = 0;  // 0 when the device's peak at the precision is unknown
  // Bytes one device sends per step (the step-time model's volumes, link
  // speeds aside): data-parallel gradients and shards over the data- and
  // context-parallel ranks, and model-parallel messages (tensor-parallel
  // activations, context-parallel keys and values, pipeline activations).
  double data_parallel_bytes = 0;
  double model_parallel_bytes = 0;
  // model_parallel_bytes by the dimension that sends it.
  ModelParallelBytes model_parallel;
};

// Candidates of the space ruled out for one kind of reason ("predicted not
// to fit", the searcher's kPrunedNotFitting), the first as an example.
struct RuledOut {
  std::string kind;
  int count = 0;
  Strategy example;
  std::string example_reason;
};

// What makes two answers of EstimateTop genuinely different: the layout
// (data, tensor, pipeline, context and expert degrees, the pipeline's
// virtual stages, the sharding) and the recompute choice (checkpointing and
// its share of layers). Strategies alike in these (other micro-batch sizes,
// precisions, sequence parallelism, offload, ...) are one option, shown by
// its fastest member.
struct StrategyGroup {
  int data_parallel, tensor_parallel, pipeline_parallel, context_parallel, expert_parallel;
  int virtual_stages;
  Sharding sharding;
  Checkpointing checkpointing;
  int checkpoint_percent;
  static StrategyGroup Of(const Strategy& s);
  friend bool operator<(const StrategyGroup& a, const StrategyGroup& b);
};

struct TopEstimate {
  int candidates = 0;                  // compatible strategies of the space
  std::vector<StrategyEstimate> best;  // up to k that fit, fastest first, one per StrategyGroup
  std::vector<RuledOut> ruled_out;     // most frequent kind first
  int fitting = 0;                     // candidates that fit
  int groups = 0;                      // StrategyGroups with a strategy that fits
  // The fastest strategy whose margin_fraction >= the request's safe_margin
  // (it may also be in `best`); none when no strategy keeps that margin.
  std::optional<StrategyEstimate> safe;
};

// The estimate of one strategy. Errors: INVALID_ARGUMENT for a bad request
// (ValidateSpaceRequest's messages: seq_len, world_size, global_batch_size;
// a world size over one node of a device whose inter-node network is
// unknown)
// or a strategy the space's rules refuse (CheckCompatible's message, e.g.
// "strategy.data_parallel: ..."), or a torchscript model.
absl::StatusOr<StrategyEstimate> EstimateStrategy(const EstimateRequest& request,
                                                  const Strategy& strategy);

// The k (>= 1) fastest genuinely different options that fit: the fastest
// strategy of each StrategyGroup, the groups ranked by it (predicted
// tokens/s; ties: less memory, then the space's order), over every
// compatible strategy of the space for the request on its device (a cuda
// device offers every value the space has for cuda; bf16 when its bf16 peak
// is known); and the safe pick. Errors: those of EnumerateSpace and
// INVALID_ARGUMENT for k < 1, a safe_margin outside [0, 1) or a torchscript
// model.
absl::StatusOr<TopEstimate> EstimateTop(const EstimateRequest& request, int k);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_ESTIMATE_H_
