#include "search/space.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

// Preferred order of each enum dimension, best first (see EnumerateSpace()).
// Each lists every enumerator of its dimension: "known_values" relies on it.
constexpr Precision kPrecisionOrder[] = {Precision::kBf16, Precision::kPureBf16, Precision::kFp16,
                                         Precision::kFp32};
constexpr Attention kAttentionOrder[] = {Attention::kSdpa, Attention::kMath};
constexpr Checkpointing kCheckpointingOrder[] = {Checkpointing::kNone, Checkpointing::kSelective,
                                                 Checkpointing::kFull};
constexpr Optimizer kOptimizerOrder[] = {Optimizer::kFusedAdamW, Optimizer::kAdamW};
constexpr Offload kOffloadOrder[] = {Offload::kNone, Offload::kCpu};
constexpr int kDefaultCheckpointPercents[] = {50, 100};

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

// Micro-batch sizes to try, largest first. REQUIRES: the batch fields of `r`
// are valid (world_size > 0, global_batch_size a positive multiple of it).
absl::StatusOr<std::vector<int>> MicroBatchCandidates(const SpaceRequest& r) {
  const int per_rank = r.global_batch_size / r.world_size;
  std::vector<int> out;
  if (r.micro_batch_sizes.empty()) {
    for (int64_t m = 1; m <= per_rank; m *= 2) {
      if (per_rank % m == 0) out.push_back(static_cast<int>(m));
    }
  } else {
    for (int m : r.micro_batch_sizes) {
      if (m <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("micro_batch_sizes: expected positive integers, got ", m));
      }
    }
    for (int m : r.micro_batch_sizes) {
      if (per_rank % m == 0) out.push_back(m);
    }
    if (out.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("global_batch_size: not divisible by any micro-batch size (",
                       absl::StrJoin(r.micro_batch_sizes, ", "), "): ", r.global_batch_size,
                       " samples over world_size ", r.world_size, " is ", per_rank, " per rank"));
    }
  }
  std::sort(out.begin(), out.end(), [](int a, int b) { return a > b; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
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
  if (r.seq_len <= 0 || r.seq_len > r.model.n_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "seq_len: must be in [1, model n_positions = ", r.model.n_positions, "], got ", r.seq_len));
  }
  if (r.world_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size: must be positive, got ", r.world_size));
  }
  if (r.global_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_batch_size: must be positive, got ", r.global_batch_size));
  }
  if (r.global_batch_size % r.world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("global_batch_size: ", r.global_batch_size,
                                                   " is not divisible by world_size ",
                                                   r.world_size));
  }
  return absl::OkStatus();
}

// Every dimension's candidates, each in its preferred order.
struct Dimensions {
  std::vector<int> micro_batches;
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
  ASSIGN_OR_RETURN(d.micro_batches, MicroBatchCandidates(r));
  ASSIGN_OR_RETURN(d.precisions,
                   Candidates("precisions", r.precisions, kPrecisionOrder, &PrecisionName));
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

absl::Status CheckPositiveSizes(const SpaceRequest&, const Strategy& s) {
  if (s.micro_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.micro_batch_size: must be positive, got ", s.micro_batch_size));
  }
  if (s.grad_accum_steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.grad_accum_steps: must be positive, got ", s.grad_accum_steps));
  }
  return absl::OkStatus();
}

absl::Status CheckKnownValues(const SpaceRequest&, const Strategy& s) {
  const auto unknown = [](absl::string_view field, auto v) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.", field, ": unknown value ", static_cast<int>(v)));
  };
  if (!Contains(kPrecisionOrder, s.precision)) return unknown("precision", s.precision);
  if (!Contains(kCheckpointingOrder, s.checkpointing)) {
    return unknown("checkpointing", s.checkpointing);
  }
  if (!Contains(kAttentionOrder, s.attention)) return unknown("attention", s.attention);
  if (!Contains(kOptimizerOrder, s.optimizer)) return unknown("optimizer", s.optimizer);
  if (!Contains(kOffloadOrder, s.offload)) return unknown("offload", s.offload);
  return absl::OkStatus();
}

absl::Status CheckCheckpointRule(const SpaceRequest&, const Strategy& s) {
  return CheckCheckpointPercent(s);
}

absl::Status CheckBatchProduct(const SpaceRequest& r, const Strategy& s) {
  // A strategy from a user may carry sizes whose product overflows even 64
  // bits; world * mbs fits, and times ga it fits once it is <= the batch.
  const int64_t ranks_times_mbs = int64_t{r.world_size} * s.micro_batch_size;
  if (ranks_times_mbs > r.global_batch_size ||
      ranks_times_mbs * s.grad_accum_steps != r.global_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy.grad_accum_steps: world_size (", r.world_size, ") * micro_batch_size (",
        s.micro_batch_size, ") * grad_accum_steps (", s.grad_accum_steps,
        ") must equal global_batch_size (", r.global_batch_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckBf16Device(const SpaceRequest& r, const Strategy& s) {
  if (UsesBf16(s.precision) && !r.device_supports_bf16) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.precision: ", PrecisionName(s.precision),
                     " computes in bf16, which the device does not support (allowed: fp16, fp32)"));
  }
  return absl::OkStatus();
}

absl::Status CheckOffloadDevice(const SpaceRequest& r, const Strategy& s) {
  if (s.offload == Offload::kCpu && !r.device_is_accelerator) {
    return absl::InvalidArgumentError(
        "strategy.offload: cpu needs an accelerator device; on a CPU device the optimizer state "
        "already lives in host memory (allowed: none)");
  }
  return absl::OkStatus();
}

absl::Status CheckFixedGraph(const SpaceRequest& r, const Strategy& s) {
  if (!r.model.IsTorchScript()) return absl::OkStatus();
  if (s.checkpointing != Checkpointing::kNone) {
    return absl::InvalidArgumentError(
        "strategy.checkpointing: a TorchScript model's layers are not known to the trial runner, "
        "so it cannot checkpoint them (allowed: none)");
  }
  if (s.attention != Attention::kMath) {
    return absl::InvalidArgumentError(
        "strategy.attention: a TorchScript model runs its own attention code (allowed: math, "
        "meaning the model's own)");
  }
  return absl::OkStatus();
}

constexpr CompatibilityRule kRules[] = {
    {"positive_sizes", &CheckPositiveSizes},
    {"known_values", &CheckKnownValues},
    {"checkpoint_percent", &CheckCheckpointRule},
    {"batch_product", &CheckBatchProduct},
    {"bf16_device", &CheckBf16Device},
    {"offload_device", &CheckOffloadDevice},
    {"fixed_graph", &CheckFixedGraph},
};

}  // namespace

absl::Status ValidateSpaceRequest(const SpaceRequest& request) {
  return ResolveDimensions(request).status();
}

absl::Span<const CompatibilityRule> CompatibilityRules() { return kRules; }

absl::Status CheckCompatible(const SpaceRequest& request, const Strategy& strategy) {
  for (const CompatibilityRule& rule : CompatibilityRules()) {
    RETURN_IF_ERROR(rule.check(request, strategy));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Strategy>> EnumerateSpace(const SpaceRequest& request) {
  ASSIGN_OR_RETURN(const Dimensions d, ResolveDimensions(request));
  const int per_rank = request.global_batch_size / request.world_size;
  std::vector<Strategy> space;
  absl::Status first_rejection;
  for (Precision precision : d.precisions) {
    for (Attention attention : d.attentions) {
      for (const CheckpointChoice& checkpoint : d.checkpoints) {
        for (Optimizer optimizer : d.optimizers) {
          for (Offload offload : d.offloads) {
            for (int micro_batch : d.micro_batches) {
              Strategy s;
              s.micro_batch_size = micro_batch;
              s.grad_accum_steps = per_rank / micro_batch;
              s.precision = precision;
              s.checkpointing = checkpoint.checkpointing;
              s.checkpoint_percent = checkpoint.percent;
              s.attention = attention;
              s.optimizer = optimizer;
              s.offload = offload;
              absl::Status compatible = CheckCompatible(request, s);
              if (compatible.ok()) {
                space.push_back(s);
              } else if (first_rejection.ok()) {
                first_rejection = compatible;
              }
            }
          }
        }
      }
    }
  }
  if (space.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("space: no compatible strategy (", first_rejection.message(), ")"));
  }
  return space;
}

}  // namespace autoaccel
