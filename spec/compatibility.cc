#include "spec/compatibility.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "spec/model_families.h"
#include "spec/strategy_fields.h"

namespace autoaccel {
namespace {

absl::Status CheckPositiveSizes(const TrainingSetup&, const Strategy& s) {
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

absl::Status CheckKnownValues(const TrainingSetup&, const Strategy& s) {
  // Every enumeration of the field table: a value cast from a number need
  // not be one of its enumerators.
  absl::Status status;
  AnyRow(kStrategyFields, [&](const auto& field) {
    using T = RowValue<decltype(field)>;
    if constexpr (std::is_enum_v<T>) {
      const T value = s.*field.member;
      const bool known = std::any_of(field.names.begin(), field.names.end(),
                                     [&](const auto& entry) { return entry.first == value; });
      if (!known) {
        status = absl::InvalidArgumentError(
            absl::StrCat("strategy.", field.name, ": unknown value ", static_cast<int>(value)));
        return true;
      }
    }
    return false;
  });
  return status;
}

absl::Status CheckCheckpointRule(const TrainingSetup&, const Strategy& s) {
  return CheckCheckpointPercent(s);
}

absl::Status CheckLayoutRule(const TrainingSetup&, const Strategy& s) { return CheckLayout(s); }

absl::Status CheckLayoutProduct(const TrainingSetup& r, const Strategy& s) {
  // Degrees from a user may be anything: each product of two fits 64 bits and
  // stays below world_size before the next factor joins it.
  bool fits = true;
  int64_t ranks = 1;
  for (int degree : {s.tensor_parallel, s.pipeline_parallel, s.context_parallel, s.data_parallel}) {
    fits = fits && degree > 0 && ranks * degree <= r.world_size;
    if (fits) ranks *= degree;
  }
  if (!fits || ranks != r.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy.data_parallel: data_parallel (", s.data_parallel, ") * context_parallel (",
        s.context_parallel, ") * tensor_parallel (", s.tensor_parallel, ") * pipeline_parallel (",
        s.pipeline_parallel, ") must equal world_size (", r.world_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckBatchProduct(const TrainingSetup& r, const Strategy& s) {
  // A strategy from a user may carry sizes whose product overflows even 64
  // bits; dp * mbs fits, and times ga it fits once it is <= the batch.
  const int64_t ranks_times_mbs = int64_t{s.data_parallel} * s.micro_batch_size;
  if (s.data_parallel <= 0 || s.micro_batch_size <= 0 || s.grad_accum_steps <= 0 ||
      ranks_times_mbs > r.global_batch_size ||
      ranks_times_mbs * s.grad_accum_steps != r.global_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy.grad_accum_steps: micro_batch_size (", s.micro_batch_size,
        ") * grad_accum_steps (", s.grad_accum_steps, ") * data_parallel (", s.data_parallel,
        ") must equal global_batch_size (", r.global_batch_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckBf16Device(const TrainingSetup& r, const Strategy& s) {
  if (UsesBf16(s.precision) && !r.device_supports_bf16) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.precision: ", PrecisionName(s.precision),
                     " computes in bf16, which the device does not support (allowed: fp16, fp32)"));
  }
  return absl::OkStatus();
}

absl::Status CheckFp8Device(const TrainingSetup& r, const Strategy& s) {
  if (s.precision == Precision::kFp8 && !r.device_supports_fp8) {
    return absl::InvalidArgumentError(
        "strategy.precision: fp8 needs fp8 tensor cores (CUDA compute capability 8.9 or newer: "
        "Ada, Hopper, Blackwell), which the device does not have (allowed: fp32, bf16, fp16, "
        "pure_bf16)");
  }
  return absl::OkStatus();
}

absl::Status CheckOffloadDevice(const TrainingSetup& r, const Strategy& s) {
  if (s.offload == Offload::kCpu && !r.device_is_accelerator) {
    return absl::InvalidArgumentError(
        "strategy.offload: cpu needs an accelerator device; on a CPU device the optimizer state "
        "already lives in host memory (allowed: none)");
  }
  return absl::OkStatus();
}

absl::Status CheckFixedGraph(const TrainingSetup& r, const Strategy& s) {
  if (!r.engine_runs_trials || !r.model.IsTorchScript()) return absl::OkStatus();
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
  if (s.precision == Precision::kFp8) {
    return absl::InvalidArgumentError(
        "strategy.precision: a TorchScript model runs its own linear layers, which the trial "
        "runner cannot compute in fp8 (allowed: fp32, bf16, fp16, pure_bf16)");
  }
  return absl::OkStatus();
}

absl::Status CheckParallelFamily(const TrainingSetup& r, const Strategy& s) {
  if (!r.engine_runs_trials) return absl::OkStatus();
  if (s.tensor_parallel == 1 && s.pipeline_parallel == 1) return absl::OkStatus();
  absl::StatusOr<const ModelFamilyInfo*> family = r.model.Family();
  const bool tp_ok = s.tensor_parallel == 1 || (family.ok() && (*family)->tensor_parallel);
  const bool pp_ok = s.pipeline_parallel == 1 || (family.ok() && (*family)->pipeline_parallel);
  if (tp_ok && pp_ok) return absl::OkStatus();
  // Joined once: a search space refuses this for most of a big cluster's
  // layouts of such a family.
  static const std::string* const parallel = [] {
    std::vector<std::string> names;
    for (const ModelFamilyInfo& f : ModelFamilies()) {
      if (f.tensor_parallel && f.pipeline_parallel) names.push_back(f.name);
    }
    return new std::string(absl::StrJoin(names, ", "));
  }();
  return absl::InvalidArgumentError(absl::StrCat(
      "strategy.", !tp_ok ? "tensor_parallel" : "pipeline_parallel", ": ", r.model.family,
      " models run data parallel only (any sharding); tensor and pipeline parallelism need ",
      *parallel, " (allowed: tensor_parallel 1, pipeline_parallel 1)"));
}

// What the model's attention needs of the kernel: soft-capped scores and
// attention sinks are computed by the math kernel only
// (scaled_dot_product_attention has neither a soft-cap nor an extra softmax
// column; transformers refuses SDPA for gemma2 and gpt_oss as well).
absl::Status CheckAttentionKernel(const TrainingSetup& r, const Strategy& s) {
  if (s.attention != Attention::kSdpa || r.model.SdpaComputes()) return absl::OkStatus();
  if (r.model.attn_logit_softcapping > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy.attention: ", r.model.family,
        " soft-caps its attention scores (attn_logit_softcapping ", r.model.attn_logit_softcapping,
        "), which the sdpa kernel cannot do (allowed: math)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("strategy.attention: ", r.model.family,
                   " adds attention sinks (self_attn.sinks) to its softmax, which the sdpa kernel "
                   "cannot do (allowed: math)"));
}

absl::Status CheckTensorParallelModel(const TrainingSetup& r, const Strategy& s) {
  // tp < 1 is the "layout" rule's; a torchscript model is "parallel_family"'s.
  const int tp = s.tensor_parallel;
  if (tp <= 1 || r.model.IsTorchScript()) return absl::OkStatus();
  // Each rank takes an equal share of the heads and of the MLP's inner
  // columns; the vocabulary is padded by the engine, so it need not divide.
  const auto share = [tp](absl::string_view what, int n) {
    if (n % tp == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.tensor_parallel: ", tp, " does not divide the model's ", what, " (",
                     n, "); each tensor-parallel rank takes an equal share"));
  };
  // (Biases of split projections split with their rows; per-head norms
  // such as qwen3's q_norm and k_norm are replicated.)
  RETURN_IF_ERROR(share("attention heads", r.model.n_head));
  // Latent attention (deepseek_v3) has no key-value heads of its own: its
  // keys and values come per head from the shared latent.
  if (r.model.IsDecoder() && !r.model.Info().latent_attention) {
    RETURN_IF_ERROR(share("key-value heads", r.model.n_kv_head));
  }
  if (r.model.IsDecoder() && r.model.Info().experts) {
    RETURN_IF_ERROR(share("expert width", static_cast<int>(r.model.ExpertWidth())));
  }
  return share("MLP inner size", r.model.n_inner);
}

absl::Status CheckPipelineLayers(const TrainingSetup& r, const Strategy& s) {
  // Degrees below 1 are the "layout" rule's.
  const int pp = s.pipeline_parallel;
  const int vpp = s.virtual_stages;
  const int layers = r.model.n_layer;
  if (pp <= 1 || vpp < 1 || (!r.engine_runs_trials && layers <= 0)) return absl::OkStatus();
  const int64_t chunks = int64_t{pp} * vpp;
  if (chunks > layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.", vpp > 1 ? "virtual_stages" : "pipeline_parallel",
                     ": pipeline_parallel (", pp, ") * virtual_stages (", vpp, ") = ", chunks,
                     " model chunks need at least as many layers; the model has ", layers));
  }
  if (s.pipeline_schedule == PipelineSchedule::kInterleaved) {
    if (layers % chunks != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy.virtual_stages: interleaved splits the ", layers,
                       " layers into pipeline_parallel (", pp, ") * virtual_stages (", vpp,
                       ") = ", chunks, " equal chunks, which does not divide them"));
    }
    if (s.grad_accum_steps % pp != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy.grad_accum_steps: interleaved runs the micro-batches in groups of "
          "pipeline_parallel (",
          pp, "); grad_accum_steps (", s.grad_accum_steps, ") must be a multiple of it"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPipelineSharding(const TrainingSetup&, const Strategy& s) {
  if (s.pipeline_parallel <= 1 ||
      (s.sharding != Sharding::kZero2 && s.sharding != Sharding::kFsdp)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "strategy.sharding: ", ShardingName(s.sharding),
      " reduces gradients per micro-batch and does not combine with pipeline stages (allowed "
      "with pipeline_parallel > 1: none, zero1)"));
}

absl::Status CheckContextParallelFamily(const TrainingSetup& r, const Strategy& s) {
  if (!r.engine_runs_trials || s.context_parallel == 1) return absl::OkStatus();
  absl::StatusOr<const ModelFamilyInfo*> family = r.model.Family();
  if (family.ok() && (*family)->context_parallel) return absl::OkStatus();
  std::vector<std::string> sharded;
  for (const ModelFamilyInfo& f : ModelFamilies()) {
    if (f.context_parallel) sharded.push_back(f.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "strategy.context_parallel: the trial runner splits the sequence of causal decoders only (",
      absl::StrJoin(sharded, ", "), "), not ", r.model.family, " (allowed: context_parallel 1)"));
}

absl::Status CheckContextParallelSequence(const TrainingSetup& r, const Strategy& s) {
  const int cp = s.context_parallel;
  if (cp <= 1 || r.seq_len % (2 * int64_t{cp}) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "strategy.context_parallel: splits the sequence into 2 * context_parallel (", 2 * cp,
      ") load-balanced chunks, which does not divide seq_len (", r.seq_len, ")"));
}

absl::Status CheckContextParallelKernel(const TrainingSetup& r, const Strategy& s) {
  if (!r.engine_runs_trials || s.context_parallel == 1 ||
      s.context_parallel_comm != ContextParallelComm::kP2p || s.attention != Attention::kSdpa) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "strategy.attention: the trial runner's p2p ring merges its blocks by their log-sum-exp, "
      "which it computes with the math kernel (allowed with context_parallel_comm p2p: math; "
      "sdpa with all_gather)");
}

absl::Status CheckExpertParallelModel(const TrainingSetup& r, const Strategy& s) {
  const int ep = s.expert_parallel;
  if (ep <= 1 || !r.engine_runs_trials) return absl::OkStatus();
  absl::StatusOr<const ModelFamilyInfo*> family = r.model.Family();
  if (!family.ok() || !(*family)->experts) {
    std::vector<std::string> moe;
    for (const ModelFamilyInfo& f : ModelFamilies()) {
      if (f.experts) moe.push_back(f.name);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.expert_parallel: spreads the experts of mixture-of-experts models (",
                     absl::StrJoin(moe, ", "), ") over ranks; ", r.model.family,
                     " has none (allowed: expert_parallel 1)"));
  }
  if (r.model.num_local_experts % ep == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "strategy.expert_parallel: each of the ", ep, " ranks holds an equal share of the ",
      r.model.num_local_experts, " experts, which does not divide"));
}

absl::Status CheckSequenceParallel(const TrainingSetup& r, const Strategy& s) {
  // Each context-parallel rank's share of the sequence is split further.
  const int64_t local = s.context_parallel > 0 ? r.seq_len / s.context_parallel : r.seq_len;
  if (!s.sequence_parallel || s.tensor_parallel <= 1 || local % s.tensor_parallel == 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("strategy.sequence_parallel: splits the sequence over the tensor_parallel (",
                   s.tensor_parallel, ") ranks, which does not divide ",
                   s.context_parallel > 1 ? "each context-parallel rank's share of " : "",
                   "seq_len (", local, ")"));
}

constexpr CompatibilityRule kRules[] = {
    {"positive_sizes", &CheckPositiveSizes},
    {"known_values", &CheckKnownValues},
    {"checkpoint_percent", &CheckCheckpointRule},
    {"layout", &CheckLayoutRule},
    {"layout_product", &CheckLayoutProduct},
    {"batch_product", &CheckBatchProduct},
    {"bf16_device", &CheckBf16Device, /*device=*/true},
    {"fp8_device", &CheckFp8Device, /*device=*/true},
    {"offload_device", &CheckOffloadDevice, /*device=*/true},
    {"fixed_graph", &CheckFixedGraph},
    {"parallel_family", &CheckParallelFamily},
    {"attention_kernel", &CheckAttentionKernel},
    {"tensor_parallel_model", &CheckTensorParallelModel},
    {"pipeline_layers", &CheckPipelineLayers},
    {"pipeline_sharding", &CheckPipelineSharding},
    {"sequence_parallel", &CheckSequenceParallel},
    {"context_parallel_family", &CheckContextParallelFamily},
    {"context_parallel_sequence", &CheckContextParallelSequence},
    {"context_parallel_kernel", &CheckContextParallelKernel},
    {"expert_parallel_model", &CheckExpertParallelModel},
};

}  // namespace

absl::Span<const CompatibilityRule> CompatibilityRules() { return kRules; }

absl::Status CheckCompatible(const TrainingSetup& setup, const Strategy& strategy) {
  for (const CompatibilityRule& rule : CompatibilityRules()) {
    RETURN_IF_ERROR(rule.check(setup, strategy));
  }
  return absl::OkStatus();
}

absl::Status CheckDeviceRules(const TrainingSetup& setup, const Strategy& strategy) {
  for (const CompatibilityRule& rule : CompatibilityRules()) {
    if (rule.device) RETURN_IF_ERROR(rule.check(setup, strategy));
  }
  return absl::OkStatus();
}

}  // namespace autoaccel
