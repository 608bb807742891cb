#include "search/estimate.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "search/cost_model.h"
#include "search/searcher.h"
#include "search/space.h"
#include "search/step_time.h"

namespace autoaccel {
namespace {

// The device as the cost model sees it: the request's node size, and a
// ROCm GPU ("hip") predicted with the cuda priors at its own datasheet
// figures (the priors are calibrated on NVIDIA runs only: an extrapolation,
// docs/CLI.md says so).
DeviceSpec DeviceFor(const EstimateRequest& r) {
  DeviceSpec device = r.device.spec;
  if (r.devices_per_node > 0) device.devices_per_node = r.devices_per_node;
  if (device.type == "hip") device.type = "cuda";
  return device;
}

SpaceRequest SpaceFor(const EstimateRequest& r) {
  SpaceRequest space;
  space.model = r.model;
  space.seq_len = r.seq_len;
  space.global_batch_size = r.global_batch_size;
  space.world_size = r.world_size;
  const DeviceSpec device = DeviceFor(r);
  const bool cuda = device.type == "cuda";
  SetDeviceFacts(device, &space);
  // Context parallelism is ranked too (a tuning job tries it only when
  // asked): every degree that divides the cluster and splits the sequence
  // into two chunks per rank.
  for (int cp = 1; cp <= r.world_size; ++cp) {
    if (r.world_size % cp == 0 && r.seq_len % (2 * cp) == 0) {
      space.context_parallel_sizes.push_back(cp);
    }
  }
  if (space.context_parallel_sizes.empty()) space.context_parallel_sizes = {1};
  // Values the cost model never ranks above another value of their
  // dimension, left out of the ranking (a 256-device space holds tens of
  // millions of candidates; --top would also list each answer again with
  // only these changed): adamw (fused_adamw's memory, slower), math
  // attention where sdpa runs (more activations and FLOPs), and on a device
  // whose bf16 peak is at least its fp16 and fp32 peaks, fp32 (more
  // activation memory, slower) and fp16 (bf16's memory, plus loss scaling).
  // tests/estimate_test.cc checks the answer against the whole space's.
  space.optimizers = {Optimizer::kFusedAdamW};
  space.attentions = {r.model.SdpaComputes() ? Attention::kSdpa : Attention::kMath};
  const PeakTflops& peak = r.device.spec.peak;
  if (!r.precisions.empty()) {
    space.precisions = r.precisions;
  } else if (cuda && peak.bf16 > 0 && peak.bf16 >= peak.fp16 && peak.bf16 >= peak.fp32) {
    space.precisions = {Precision::kBf16, Precision::kPureBf16};
  }
  return space;
}

absl::Status CheckRequest(const EstimateRequest& r) {
  if (r.model.IsTorchScript()) {
    return absl::InvalidArgumentError(
        "model: a torchscript module's shape is unknown, so it cannot be estimated; give its "
        "Hugging Face family and config instead");
  }
  if (r.devices_per_node < 0) {
    return absl::InvalidArgumentError("devices_per_node: must be >= 1 (0 = the catalog's)");
  }
  const DeviceSpec device = DeviceFor(r);
  if (r.world_size > device.devices_per_node && device.inter_node.bandwidth_bytes_per_s <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world_size: ", r.world_size, " devices span nodes of ", device.devices_per_node,
        ", and the device catalog does not know the network between nodes of \"", r.device.name,
        "\" (inter_node bandwidth 0); give it in a catalog entry (--device-catalog)"));
  }
  return ValidateSpaceRequest(SpaceFor(r));
}

// `explain`: fill why_not when it does not fit (a formatted sentence: the
// ranking of a whole space asks only for each kind's example).
StrategyEstimate Estimate(const EstimateRequest& r, const CostModel& model, const Strategy& s,
                          bool explain = true) {
  StrategyEstimate e;
  e.strategy = s;
  const CostModel::Prediction p = model.Predict(s);
  e.memory = p.memory;
  e.step_time_s = p.step_time_s;
  e.tokens_per_second = p.tokens_per_second;
  e.device_memory_bytes = model.device().memory_bytes;
  e.fits = model.Fits(s, /*margin=*/0, explain ? &e.why_not : nullptr);
  e.margin_bytes = e.device_memory_bytes - e.memory.total();
  if (e.device_memory_bytes > 0) e.margin_fraction = double(e.margin_bytes) / e.device_memory_bytes;
  e.model_flops_per_step =
      r.model.TrainingFlopsPerToken(r.seq_len) * double(r.global_batch_size) * r.seq_len;
  const double peak = model.device().peak.For(s.precision) * 1e12;
  if (peak > 0 && e.step_time_s > 0) {
    e.mfu = e.model_flops_per_step / e.step_time_s / (double(r.world_size) * peak);
  }
  return e;
}

// Fills the bytes `e` sends per step (for the answers only: ranking a space
// needs none). On one node: bytes as sent, not weighted by the slower link.
void AddVolumes(const EstimateRequest& r, StrategyEstimate& e) {
  const StepTimeFeaturizer features(r.model, r.seq_len, LinkTopology{});
  const TimeFeatures volumes = features(e.strategy);
  e.data_parallel_bytes = volumes[kDataParallelBytes];
  e.model_parallel_bytes = volumes[kModelParallelBytes];
  e.model_parallel = features.ModelParallelByDimension(e.strategy);
}

}  // namespace

StrategyGroup StrategyGroup::Of(const Strategy& s) {
  return {s.data_parallel,    s.tensor_parallel, s.pipeline_parallel,
          s.context_parallel, s.expert_parallel, s.virtual_stages,
          s.sharding,         s.checkpointing,   s.checkpoint_percent};
}

bool operator<(const StrategyGroup& a, const StrategyGroup& b) {
  const auto key = [](const StrategyGroup& g) {
    return std::make_tuple(g.data_parallel, g.tensor_parallel, g.pipeline_parallel,
                           g.context_parallel, g.expert_parallel, g.virtual_stages, g.sharding,
                           g.checkpointing, g.checkpoint_percent);
  };
  return key(a) < key(b);
}

absl::StatusOr<StrategyEstimate> EstimateStrategy(const EstimateRequest& request,
                                                  const Strategy& strategy) {
  RETURN_IF_ERROR(CheckRequest(request));
  RETURN_IF_ERROR(CheckCompatible(SpaceFor(request), strategy));
  const CostModel model(request.model, request.seq_len, request.global_batch_size,
                        DeviceFor(request));
  StrategyEstimate e = Estimate(request, model, strategy);
  AddVolumes(request, e);
  return e;
}

absl::StatusOr<TopEstimate> EstimateTop(const EstimateRequest& request, int k) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("top: must be >= 1, got ", k));
  if (!(request.safe_margin >= 0 && request.safe_margin < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "safe_margin: a fraction of the device's memory in [0, 1), got ", request.safe_margin));
  }
  RETURN_IF_ERROR(CheckRequest(request));
  const CostModel model(request.model, request.seq_len, request.global_batch_size,
                        DeviceFor(request));
  TopEstimate top;
  // What ranks fitting candidates: fastest first, ties to less memory, then
  // the space's order (a space can hold millions; only the answers get
  // their whole estimate).
  struct Ranked {
    double tokens_per_second;
    int64_t memory;
    int64_t index;  // in the space's order
    Strategy strategy;
  };
  const auto better = [](const Ranked& a, const Ranked& b) {
    if (a.tokens_per_second != b.tokens_per_second) {
      return a.tokens_per_second > b.tokens_per_second;
    }
    if (a.memory != b.memory) return a.memory < b.memory;
    return a.index < b.index;
  };
  const int64_t device_memory = model.device().memory_bytes;
  const double safe_bytes = request.safe_margin * double(device_memory);
  std::map<StrategyGroup, Ranked> best_of_group;
  std::optional<Ranked> safe;
  std::map<std::string, RuledOut> by_kind;
  int64_t index = 0;
  RETURN_IF_ERROR(ForEachInSpace(SpaceFor(request), [&](const Strategy& s) {
    ++index;
    const CostModel::Prediction p = model.Predict(s);
    if (model.Fits(p.memory, /*margin=*/0)) {
      ++top.fitting;
      Ranked r{p.tokens_per_second, p.memory.total(), index, s};
      if (double(device_memory - r.memory) >= safe_bytes && (!safe || better(r, *safe))) safe = r;
      const auto [it, added] = best_of_group.try_emplace(StrategyGroup::Of(s), r);
      if (!added && better(r, it->second)) it->second = std::move(r);
      return;
    }
    RuledOut& r = by_kind[kPrunedNotFitting];
    if (r.count++ == 0) {
      r.kind = kPrunedNotFitting;
      r.example = s;
      r.example_reason = Estimate(request, model, s).why_not;
    }
  }));
  top.candidates = static_cast<int>(index);
  top.groups = static_cast<int>(best_of_group.size());
  std::vector<Ranked> ranked;
  ranked.reserve(best_of_group.size());
  for (auto& [group, r] : best_of_group) ranked.push_back(std::move(r));
  const size_t n = std::min(ranked.size(), static_cast<size_t>(k));
  std::partial_sort(ranked.begin(), ranked.begin() + n, ranked.end(), better);
  for (size_t i = 0; i < n; ++i) {
    top.best.push_back(Estimate(request, model, ranked[i].strategy));
    AddVolumes(request, top.best.back());
  }
  if (safe) {
    top.safe = Estimate(request, model, safe->strategy);
    AddVolumes(request, *top.safe);
  }
  for (auto& [kind, r] : by_kind) top.ruled_out.push_back(std::move(r));
  std::stable_sort(top.ruled_out.begin(), top.ruled_out.end(),
                   [](const RuledOut& a, const RuledOut& b) { return a.count > b.count; });
  return top;
}

}  // namespace autoaccel
