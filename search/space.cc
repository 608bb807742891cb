#include "search/space.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

// Preferred order of each enum dimension, best first (see EnumerateSpace()).
constexpr Precision kPrecisionOrder[] = {Precision::kBf16, Precision::kFp32};
constexpr Attention kAttentionOrder[] = {Attention::kSdpa, Attention::kMath};
constexpr Checkpointing kCheckpointingOrder[] = {Checkpointing::kNone, Checkpointing::kFull};

// The values of `order` that are in `given` (all of `order` when `given` is
// empty), in the order of `order`. Fails naming `field` when `given` holds a
// value outside `order`.
template <typename Enum, size_t N>
absl::StatusOr<std::vector<Enum>> Candidates(absl::string_view field,
                                             const std::vector<Enum>& given, const Enum (&order)[N],
                                             absl::string_view (*name)(Enum)) {
  for (Enum v : given) {
    if (std::find(std::begin(order), std::end(order), v) == std::end(order)) {
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

absl::StatusOr<std::vector<Precision>> PrecisionCandidates(const SpaceRequest& r) {
  ASSIGN_OR_RETURN(std::vector<Precision> out,
                   Candidates("precisions", r.precisions, kPrecisionOrder, &PrecisionName));
  if (!r.device_supports_bf16) {
    out.erase(std::remove(out.begin(), out.end(), Precision::kBf16), out.end());
    if (out.empty()) {
      return absl::InvalidArgumentError(
          "precisions: only bf16 was requested and the device does not support bf16 "
          "(allowed on this device: fp32)");
    }
  }
  return out;
}

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
  const auto known = [](auto v, const auto& order) {
    return std::find(std::begin(order), std::end(order), v) != std::end(order);
  };
  if (!known(s.precision, kPrecisionOrder)) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.precision: unknown value ", static_cast<int>(s.precision)));
  }
  if (!known(s.checkpointing, kCheckpointingOrder)) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.checkpointing: unknown value ", static_cast<int>(s.checkpointing)));
  }
  if (!known(s.attention, kAttentionOrder)) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.attention: unknown value ", static_cast<int>(s.attention)));
  }
  return absl::OkStatus();
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
  if (s.precision == Precision::kBf16 && !r.device_supports_bf16) {
    return absl::InvalidArgumentError(
        "strategy.precision: bf16 is not supported by the device (allowed: fp32)");
  }
  return absl::OkStatus();
}

constexpr CompatibilityRule kRules[] = {
    {"positive_sizes", &CheckPositiveSizes},
    {"known_values", &CheckKnownValues},
    {"batch_product", &CheckBatchProduct},
    {"bf16_device", &CheckBf16Device},
};

}  // namespace

absl::Status ValidateSpaceRequest(const SpaceRequest& request) {
  RETURN_IF_ERROR(ValidateShape(request));
  RETURN_IF_ERROR(MicroBatchCandidates(request).status());
  RETURN_IF_ERROR(PrecisionCandidates(request).status());
  RETURN_IF_ERROR(
      Candidates("checkpointings", request.checkpointings, kCheckpointingOrder, &CheckpointingName)
          .status());
  return Candidates("attentions", request.attentions, kAttentionOrder, &AttentionName).status();
}

absl::Span<const CompatibilityRule> CompatibilityRules() { return kRules; }

absl::Status CheckCompatible(const SpaceRequest& request, const Strategy& strategy) {
  for (const CompatibilityRule& rule : CompatibilityRules()) {
    RETURN_IF_ERROR(rule.check(request, strategy));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Strategy>> EnumerateSpace(const SpaceRequest& request) {
  RETURN_IF_ERROR(ValidateShape(request));
  ASSIGN_OR_RETURN(const std::vector<int> micro_batches, MicroBatchCandidates(request));
  ASSIGN_OR_RETURN(const std::vector<Precision> precisions, PrecisionCandidates(request));
  ASSIGN_OR_RETURN(const std::vector<Checkpointing> checkpointings,
                   Candidates("checkpointings", request.checkpointings, kCheckpointingOrder,
                              &CheckpointingName));
  ASSIGN_OR_RETURN(const std::vector<Attention> attentions,
                   Candidates("attentions", request.attentions, kAttentionOrder, &AttentionName));

  const int per_rank = request.global_batch_size / request.world_size;
  std::vector<Strategy> space;
  absl::Status first_rejection;
  for (Precision precision : precisions) {
    for (Attention attention : attentions) {
      for (Checkpointing checkpointing : checkpointings) {
        for (int micro_batch : micro_batches) {
          Strategy s;
          s.micro_batch_size = micro_batch;
          s.grad_accum_steps = per_rank / micro_batch;
          s.precision = precision;
          s.checkpointing = checkpointing;
          s.attention = attention;
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
  if (space.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("space: no compatible strategy (", first_rejection.message(), ")"));
  }
  return space;
}

}  // namespace autoaccel
