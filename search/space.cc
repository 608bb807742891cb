#include "search/space.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

// Preferred order of each enum dimension, best first (see EnumerateSpace()).
// Each lists every enumerator of its dimension: "known_values" relies on it.
constexpr Precision kPrecisionOrder[] = {Precision::kBf16, Precision::kPureBf16, Precision::kFp16,
                                         Precision::kFp32, Precision::kFp8};
constexpr Attention kAttentionOrder[] = {Attention::kSdpa, Attention::kMath};
constexpr Checkpointing kCheckpointingOrder[] = {Checkpointing::kNone, Checkpointing::kSelective,
                                                 Checkpointing::kFull};
constexpr Optimizer kOptimizerOrder[] = {Optimizer::kFusedAdamW, Optimizer::kAdamW};
constexpr Offload kOffloadOrder[] = {Offload::kNone, Offload::kCpu};
constexpr Sharding kShardingOrder[] = {Sharding::kNone, Sharding::kZero1, Sharding::kZero2,
                                       Sharding::kFsdp};
constexpr PipelineSchedule kScheduleOrder[] = {PipelineSchedule::k1F1B,
                                               PipelineSchedule::kInterleaved};
// p2p first: it overlaps the exchange with attention.
constexpr ContextParallelComm kContextParallelCommOrder[] = {ContextParallelComm::kP2p,
                                                             ContextParallelComm::kAllGather};
constexpr int kDefaultCheckpointPercents[] = {50, 100};
constexpr int kDefaultVirtualStages[] = {2};

template <typename Enum, size_t N>
bool Contains(const Enum (&order)[N], Enum v) {
  return std::find(std::begin(order), std::end(order), v) != std::end(order);
}

// The values of `order` that are in `given` (all of `order` when `given` is
// empty), in the order of `order`. Fails naming `field` when `given` holds a
// value outside `order`.
template <typename Enum, size_t N>
absl::StatusOr<std::vector<Enum>> Candidates(absl::string_view field,
                                             const std::vector<Enum>& given, const Enum (&order)[N],
                                             absl::string_view (*name)(Enum)) {
  for (Enum v : given) {
    if (!Contains(order, v)) {
      std::vector<std::string> allowed;
      for (Enum o : order) allowed.emplace_back(name(o));
      return absl::InvalidArgumentError(absl::StrCat(field, ": unknown value ", static_cast<int>(v),
                                                     " (allowed: ", absl::StrJoin(allowed, ", "),
                                                     ")"));
    }
  }
  std::vector<Enum> out;
  for (Enum o : order) {
    if (given.empty() || std::find(given.begin(), given.end(), o) != given.end()) {
      out.push_back(o);
    }
  }
  return out;
}

// Drops from `values` what the device cannot run (`unsupported`). Fails
// naming `field` when nothing is left, saying `why` and what the device does
// allow out of `order`.
template <typename Enum, size_t N>
absl::Status DropUnsupported(absl::string_view field, absl::string_view why,
                             bool (*unsupported)(Enum), const Enum (&order)[N],
                             absl::string_view (*name)(Enum), std::vector<Enum>* values) {
  std::vector<std::string> requested, allowed;
  for (Enum v : *values) requested.emplace_back(name(v));
  for (Enum o : order) {
    if (!unsupported(o)) allowed.emplace_back(name(o));
  }
  values->erase(std::remove_if(values->begin(), values->end(), unsupported), values->end());
  if (values->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": only ", absl::StrJoin(requested, ", "), " requested, and ", why,
                     " (allowed on this device: ", absl::StrJoin(allowed, ", "), ")"));
  }
  return absl::OkStatus();
}

bool IsCpuOffload(Offload o) { return o == Offload::kCpu; }
bool IsFp8(Precision p) { return p == Precision::kFp8; }

// Micro-batch sizes to try for a data-parallel size whose per-rank batch is
// `per_rank`, largest first; empty when none of the given sizes divides it.
// REQUIRES: the given sizes are positive.
std::vector<int> MicroBatchCandidates(const SpaceRequest& r, int per_rank) {
  std::vector<int> out;
  if (r.micro_batch_sizes.empty()) {
    for (int64_t m = 1; m <= per_rank; m *= 2) {
      if (per_rank % m == 0) out.push_back(static_cast<int>(m));
    }
  } else {
    for (int m : r.micro_batch_sizes) {
      if (per_rank % m == 0) out.push_back(m);
    }
  }
  std::sort(out.begin(), out.end(), [](int a, int b) { return a > b; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// One parallel layout and the micro-batch sizes its data-parallel size allows.
struct Layout {
  int data_parallel;
  int tensor_parallel;
  int pipeline_parallel;
  int context_parallel;
  std::vector<int> micro_batches;  // largest first

  int64_t model_ranks() const {
    return int64_t{tensor_parallel} * pipeline_parallel * context_parallel;
  }
  // Ranks that hold the same weights, which sharding divides the state over.
  bool shards() const { return data_parallel * context_parallel > 1; }
  // Whether the experts can be spread over `ep` of those ranks.
  bool expert_parallel_fits(int ep) const { return data_parallel * context_parallel % ep == 0; }
};

// Sizes to try for one parallel degree, ascending: the given ones
// (deduplicated) or every divisor of world_size. Fails naming `field` when a
// given size is not positive.
absl::StatusOr<std::vector<int>> DegreeCandidates(absl::string_view field,
                                                  const std::vector<int>& given, int world_size) {
  std::vector<int> out;
  if (given.empty()) {
    for (int64_t d = 1; d * d <= world_size; ++d) {
      if (world_size % d != 0) continue;
      out.push_back(static_cast<int>(d));
      out.push_back(static_cast<int>(world_size / d));
    }
  } else {
    for (int v : given) {
      if (v <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": expected positive integers, got ", v));
      }
    }
    out = given;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The layouts of the request in their preferred order (see EnumerateSpace()),
// each with its micro-batch sizes; layouts whose data-parallel size the
// global batch does not allow are left out. REQUIRES: ValidateShape() passed.
absl::StatusOr<std::vector<Layout>> LayoutCandidates(const SpaceRequest& r) {
  ASSIGN_OR_RETURN(
      const std::vector<int> tps,
      DegreeCandidates("tensor_parallel_sizes", r.tensor_parallel_sizes, r.world_size));
  ASSIGN_OR_RETURN(
      const std::vector<int> pps,
      DegreeCandidates("pipeline_parallel_sizes", r.pipeline_parallel_sizes, r.world_size));
  ASSIGN_OR_RETURN(const std::vector<int> cps,
                   DegreeCandidates("context_parallel_sizes",
                                    r.context_parallel_sizes.empty() ? std::vector<int>{1}
                                                                     : r.context_parallel_sizes,
                                    r.world_size));
  for (int m : r.micro_batch_sizes) {
    if (m <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("micro_batch_sizes: expected positive integers, got ", m));
    }
  }
  const auto divides_world = [&](int64_t n) { return r.world_size % n == 0; };
  if (std::none_of(tps.begin(), tps.end(), divides_world)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor_parallel_sizes: none of (",
                                                   absl::StrJoin(tps, ", "),
                                                   ") divides world_size ", r.world_size));
  }
  if (std::none_of(pps.begin(), pps.end(), divides_world)) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline_parallel_sizes: none of (",
                                                   absl::StrJoin(pps, ", "),
                                                   ") divides world_size ", r.world_size));
  }
  if (std::none_of(cps.begin(), cps.end(), divides_world)) {
    return absl::InvalidArgumentError(absl::StrCat("context_parallel_sizes: none of (",
                                                   absl::StrJoin(cps, ", "),
                                                   ") divides world_size ", r.world_size));
  }
  std::vector<Layout> layouts;
  for (int tp : tps) {
    for (int pp : pps) {
      for (int cp : cps) {
        const Layout layout{0, tp, pp, cp, {}};
        if (layout.model_ranks() > r.world_size || !divides_world(layout.model_ranks())) continue;
        layouts.push_back(layout);
        layouts.back().data_parallel = static_cast<int>(r.world_size / layout.model_ranks());
      }
    }
  }
  if (layouts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        cps.size() == 1 && cps[0] == 1 ? "pipeline_parallel_sizes" : "context_parallel_sizes",
        ": no product of a tensor-parallel size (", absl::StrJoin(tps, ", "),
        "), a pipeline-parallel size (", absl::StrJoin(pps, ", "),
        ") and a context-parallel size (", absl::StrJoin(cps, ", "), ") divides world_size ",
        r.world_size));
  }
  // Fewest model-parallel ranks first (most data parallelism), then tensor
  // before context before pipeline parallelism.
  std::sort(layouts.begin(), layouts.end(), [](const Layout& a, const Layout& b) {
    if (a.model_ranks() != b.model_ranks()) return a.model_ranks() < b.model_ranks();
    if (a.pipeline_parallel != b.pipeline_parallel) {
      return a.pipeline_parallel < b.pipeline_parallel;
    }
    return a.context_parallel < b.context_parallel;
  });
  std::vector<int> data_parallel_sizes;  // of the layouts, for the messages below
  for (const Layout& l : layouts) {
    if (std::find(data_parallel_sizes.begin(), data_parallel_sizes.end(), l.data_parallel) ==
        data_parallel_sizes.end()) {
      data_parallel_sizes.push_back(l.data_parallel);
    }
  }
  const auto batch_fits = [&](const Layout& l) {
    return r.global_batch_size % l.data_parallel == 0;
  };
  if (std::none_of(layouts.begin(), layouts.end(), batch_fits)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch_size: ", r.global_batch_size,
        " is not divisible by the data-parallel size of any layout (data_parallel ",
        absl::StrJoin(data_parallel_sizes, ", "), " with world_size ", r.world_size, ")"));
  }
  std::vector<Layout> out;
  std::vector<std::string> per_rank;  // for the message below
  for (Layout& l : layouts) {
    if (!batch_fits(l)) continue;
    const int per_rank_batch = r.global_batch_size / l.data_parallel;
    l.micro_batches = MicroBatchCandidates(r, per_rank_batch);
    if (!l.micro_batches.empty()) {
      out.push_back(std::move(l));
    } else {
      const std::string text =
          absl::StrCat(per_rank_batch, " (data_parallel ", l.data_parallel, ")");
      if (std::find(per_rank.begin(), per_rank.end(), text) == per_rank.end()) {
        per_rank.push_back(text);
      }
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch_size: not divisible by any micro-batch size (",
        absl::StrJoin(r.micro_batch_sizes, ", "), "): ", r.global_batch_size,
        " samples per step is ", absl::StrJoin(per_rank, " or "), " per data-parallel rank"));
  }
  return out;
}

// One value of the pipeline-schedule dimension: the schedule and its model
// chunks per rank.
struct ScheduleChoice {
  PipelineSchedule schedule;
  int virtual_stages;
};

// For layouts with pipeline_parallel > 1: 1f1b, then interleaved at each
// virtual-stage count ascending.
absl::StatusOr<std::vector<ScheduleChoice>> ScheduleCandidates(const SpaceRequest& r) {
  ASSIGN_OR_RETURN(const std::vector<PipelineSchedule> schedules,
                   Candidates("pipeline_schedules", r.pipeline_schedules, kScheduleOrder,
                              &PipelineScheduleName));
  std::vector<int> stages = r.virtual_stages;
  if (stages.empty()) {
    stages.assign(std::begin(kDefaultVirtualStages), std::end(kDefaultVirtualStages));
  }
  for (int v : stages) {
    if (v < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "virtual_stages: expected integers >= 2 (model chunks per rank with interleaved), got ",
          v));
    }
  }
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  std::vector<ScheduleChoice> out;
  for (PipelineSchedule schedule : schedules) {
    if (schedule == PipelineSchedule::k1F1B) {
      out.push_back({schedule, 1});
    } else {
      for (int v : stages) out.push_back({schedule, v});
    }
  }
  return out;
}

// One value of the checkpointing dimension: the mode and its share of layers.
struct CheckpointChoice {
  Checkpointing checkpointing;
  int percent;
};

// Least recompute first: none (at 100), then selective at each percent
// ascending, then full at each percent ascending.
absl::StatusOr<std::vector<CheckpointChoice>> CheckpointCandidates(const SpaceRequest& r) {
  ASSIGN_OR_RETURN(
      const std::vector<Checkpointing> modes,
      Candidates("checkpointings", r.checkpointings, kCheckpointingOrder, &CheckpointingName));
  std::vector<int> percents = r.checkpoint_percents;
  if (percents.empty()) {
    percents.assign(std::begin(kDefaultCheckpointPercents), std::end(kDefaultCheckpointPercents));
  }
  for (int p : percents) {
    if (p < 1 || p > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint_percents: expected percentages in 1..100, got ", p));
    }
  }
  std::sort(percents.begin(), percents.end());
  percents.erase(std::unique(percents.begin(), percents.end()), percents.end());
  std::vector<CheckpointChoice> out;
  for (Checkpointing mode : modes) {
    if (mode == Checkpointing::kNone) {
      out.push_back({mode, 100});
    } else {
      for (int p : percents) out.push_back({mode, p});
    }
  }
  return out;
}

absl::Status ValidateShape(const SpaceRequest& r) {
  if (r.seq_len <= 0 || r.seq_len > r.model.MaxSeqLen()) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len: must be in [1, ", r.model.MaxSeqLen(), "] (the model's ",
                     r.model.MaxPositionsKey(), " is ", r.model.n_positions, "), got ", r.seq_len));
  }
  if (r.world_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size: must be positive, got ", r.world_size));
  }
  if (r.global_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_batch_size: must be positive, got ", r.global_batch_size));
  }
  return absl::OkStatus();
}

// The expert-parallel sizes of the request, ascending: the given ones, or
// every size that divides the model's experts and the world (1 only for a
// model without experts). Fails when a given size is not positive or none
// divides the data- and context-parallel ranks of any layout.
absl::StatusOr<std::vector<int>> ExpertParallelCandidates(const SpaceRequest& r,
                                                          const std::vector<Layout>& layouts) {
  std::vector<int> given = r.expert_parallel_sizes;
  if (given.empty()) {
    given.push_back(1);
    for (int ep = 2; ep <= r.model.num_local_experts && ep <= r.world_size; ++ep) {
      if (r.model.num_local_experts % ep == 0 && r.world_size % ep == 0) given.push_back(ep);
    }
  }
  ASSIGN_OR_RETURN(std::vector<int> out,
                   DegreeCandidates("expert_parallel_sizes", given, r.world_size));
  const auto fits_a_layout = [&](int ep) {
    return std::any_of(layouts.begin(), layouts.end(),
                       [ep](const Layout& l) { return l.expert_parallel_fits(ep); });
  };
  if (std::none_of(out.begin(), out.end(), fits_a_layout)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert_parallel_sizes: none of (", absl::StrJoin(out, ", "),
        ") divides the data- and context-parallel ranks of a layout (expert parallelism spreads "
        "the experts over the ranks that hold the same other weights)"));
  }
  return out;
}

// Every dimension's candidates, each in its preferred order.
struct Dimensions {
  std::vector<Layout> layouts;
  std::vector<Sharding> shardings;        // for layouts with data_parallel * context_parallel > 1
  std::vector<ScheduleChoice> schedules;  // for layouts with pipeline_parallel > 1
  std::vector<bool> sequence_parallel;    // for layouts with tensor_parallel > 1
  std::vector<ContextParallelComm> context_parallel_comms;  // for layouts with context_parallel > 1
  std::vector<int> expert_parallel_sizes;  // ascending; per layout, those dividing dp * cp
  std::vector<Precision> precisions;
  std::vector<Attention> attentions;
  std::vector<CheckpointChoice> checkpoints;
  std::vector<Optimizer> optimizers;
  std::vector<Offload> offloads;
};

// The request's dimensions, or the first error of ValidateSpaceRequest().
absl::StatusOr<Dimensions> ResolveDimensions(const SpaceRequest& r) {
  RETURN_IF_ERROR(ValidateShape(r));
  Dimensions d;
  ASSIGN_OR_RETURN(d.layouts, LayoutCandidates(r));
  ASSIGN_OR_RETURN(d.shardings,
                   Candidates("shardings", r.shardings, kShardingOrder, &ShardingName));
  ASSIGN_OR_RETURN(d.schedules, ScheduleCandidates(r));
  ASSIGN_OR_RETURN(d.context_parallel_comms,
                   Candidates("context_parallel_comms", r.context_parallel_comms,
                              kContextParallelCommOrder, &ContextParallelCommName));
  ASSIGN_OR_RETURN(d.expert_parallel_sizes, ExpertParallelCandidates(r, d.layouts));
  for (bool on : {false, true}) {
    if (r.sequence_parallel_modes.empty() ||
        std::find(r.sequence_parallel_modes.begin(), r.sequence_parallel_modes.end(), on) !=
            r.sequence_parallel_modes.end()) {
      d.sequence_parallel.push_back(on);
    }
  }
  ASSIGN_OR_RETURN(d.precisions,
                   Candidates("precisions", r.precisions, kPrecisionOrder, &PrecisionName));
  if (r.precisions.empty()) {
    // fp8 changes the numerics of training (what converges in bf16 may not
    // in fp8): tried only when asked for.
    d.precisions.erase(std::remove_if(d.precisions.begin(), d.precisions.end(), &IsFp8),
                       d.precisions.end());
  }
  if (!r.device_supports_fp8) {
    RETURN_IF_ERROR(DropUnsupported<Precision>(
        "precisions",
        "the device has no fp8 tensor cores (CUDA compute capability 8.9 or newer: Ada, Hopper, "
        "Blackwell)",
        &IsFp8, kPrecisionOrder, &PrecisionName, &d.precisions));
  }
  if (!r.device_supports_bf16) {
    RETURN_IF_ERROR(DropUnsupported<Precision>("precisions", "the device does not support bf16",
                                               &UsesBf16, kPrecisionOrder, &PrecisionName,
                                               &d.precisions));
  }
  ASSIGN_OR_RETURN(d.checkpoints, CheckpointCandidates(r));
  ASSIGN_OR_RETURN(d.attentions,
                   Candidates("attentions", r.attentions, kAttentionOrder, &AttentionName));
  ASSIGN_OR_RETURN(d.optimizers,
                   Candidates("optimizers", r.optimizers, kOptimizerOrder, &OptimizerName));
  ASSIGN_OR_RETURN(d.offloads, Candidates("offloads", r.offloads, kOffloadOrder, &OffloadName));
  if (!r.device_is_accelerator) {
    RETURN_IF_ERROR(DropUnsupported<Offload>(
        "offloads",
        "offload=cpu needs an accelerator device (on a CPU device the optimizer state already "
        "lives in host memory)",
        &IsCpuOffload, kOffloadOrder, &OffloadName, &d.offloads));
  }
  return d;
}

}  // namespace

absl::Status ValidateSpaceRequest(const SpaceRequest& request) {
  return ResolveDimensions(request).status();
}

absl::Status ForEachInSpace(const SpaceRequest& request,
                            const std::function<void(const Strategy&)>& visit) {
  ASSIGN_OR_RETURN(const Dimensions d, ResolveDimensions(request));
  if (request.max_combinations > 0) {
    // Counted before anything is built: a request may multiply out to
    // millions (a large world size times many checkpoint percents).
    const double flags = double(d.precisions.size()) * d.attentions.size() * d.checkpoints.size() *
                         d.optimizers.size() * d.offloads.size();
    double combinations = 0;
    for (const Layout& layout : d.layouts) {
      combinations += flags * (layout.shards() ? d.shardings.size() : 1) *
                      (layout.pipeline_parallel > 1 ? d.schedules.size() : 1) *
                      (layout.tensor_parallel > 1 ? d.sequence_parallel.size() : 1) *
                      (layout.context_parallel > 1 ? d.context_parallel_comms.size() : 1) *
                      std::count_if(d.expert_parallel_sizes.begin(), d.expert_parallel_sizes.end(),
                                    [&](int ep) { return layout.expert_parallel_fits(ep); }) *
                      layout.micro_batches.size();
    }
    if (combinations > double(request.max_combinations)) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "space: %.0f combinations, more than the %d searched (%d tensor/pipeline layouts x "
          "%d precisions x %d attentions x %d checkpointings x %d optimizers x %d offloads, "
          "each layout x its shardings, schedules and micro-batch sizes; narrow it: fewer "
          "micro_batch_sizes, checkpoint_percents, tensor/pipeline sizes or flag values)",
          combinations, request.max_combinations, d.layouts.size(), d.precisions.size(),
          d.attentions.size(), d.checkpoints.size(), d.optimizers.size(), d.offloads.size()));
    }
  }
  int64_t visited = 0;
  absl::Status first_rejection;
  for (const Layout& layout : d.layouts) {
    // A dimension the layout has no use for takes its only value.
    const std::vector<Sharding> shardings =
        layout.shards() ? d.shardings : std::vector<Sharding>{Sharding::kNone};
    const std::vector<ScheduleChoice> schedules =
        layout.pipeline_parallel > 1 ? d.schedules
                                     : std::vector<ScheduleChoice>{{PipelineSchedule::k1F1B, 1}};
    const std::vector<bool> sequence_parallel =
        layout.tensor_parallel > 1 ? d.sequence_parallel : std::vector<bool>{false};
    const std::vector<ContextParallelComm> comms =
        layout.context_parallel > 1 ? d.context_parallel_comms
                                    : std::vector<ContextParallelComm>{ContextParallelComm::kP2p};
    std::vector<int> expert_parallel;
    for (int ep : d.expert_parallel_sizes) {
      if (layout.expert_parallel_fits(ep)) expert_parallel.push_back(ep);
    }
    // The innermost dimensions, in order: schedule, sequence parallel,
    // context-parallel exchange, expert parallelism, micro batch.
    Strategy inner;
    std::vector<Strategy> inners;
    inner.data_parallel = layout.data_parallel;
    inner.tensor_parallel = layout.tensor_parallel;
    inner.pipeline_parallel = layout.pipeline_parallel;
    inner.context_parallel = layout.context_parallel;
    for (const ScheduleChoice& schedule : schedules) {
      inner.pipeline_schedule = schedule.schedule;
      inner.virtual_stages = schedule.virtual_stages;
      for (bool sp : sequence_parallel) {
        inner.sequence_parallel = sp;
        for (ContextParallelComm comm : comms) {
          inner.context_parallel_comm = comm;
          for (int ep : expert_parallel) {
            inner.expert_parallel = ep;
            for (int micro_batch : layout.micro_batches) {
              inner.micro_batch_size = micro_batch;
              inner.grad_accum_steps =
                  request.global_batch_size / (layout.data_parallel * micro_batch);
              inners.push_back(inner);
            }
          }
        }
      }
    }
    for (Sharding sharding : shardings) {
      for (Precision precision : d.precisions) {
        for (Attention attention : d.attentions) {
          for (const CheckpointChoice& checkpoint : d.checkpoints) {
            for (Optimizer optimizer : d.optimizers) {
              for (Offload offload : d.offloads) {
                for (Strategy s : inners) {
                  s.sharding = sharding;
                  s.precision = precision;
                  s.checkpointing = checkpoint.checkpointing;
                  s.checkpoint_percent = checkpoint.percent;
                  s.attention = attention;
                  s.optimizer = optimizer;
                  s.offload = offload;
                  absl::Status compatible = CheckCompatible(request, s);
                  if (compatible.ok()) {
                    visit(s);
                    ++visited;
                  } else if (first_rejection.ok()) {
                    first_rejection = compatible;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (visited == 0) {
    // The rule that rejected the last layouts may not be the user's problem:
    // say which data-parallel layouts the global batch ruled out first.
    std::vector<int> undividing;
    for (int dp = 2; dp <= request.world_size; ++dp) {
      if (request.world_size % dp == 0 && request.global_batch_size % dp != 0) {
        undividing.push_back(dp);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "space: no compatible strategy (", first_rejection.message(), ")",
        undividing.empty()
            ? std::string()
            : absl::StrCat("; the layouts with data_parallel ", absl::StrJoin(undividing, ", "),
                           " were left out because global_batch_size ", request.global_batch_size,
                           " is not divisible by it (give a global batch that is)")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Strategy>> EnumerateSpace(const SpaceRequest& request) {
  std::vector<Strategy> space;
  RETURN_IF_ERROR(ForEachInSpace(request, [&](const Strategy& s) { space.push_back(s); }));
  return space;
}

}  // namespace autoaccel
