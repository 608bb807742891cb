#include "search/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

namespace autoaccel {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes per element of the activations kept for backward.
double ActivationBytes(Precision p) { return p == Precision::kFp32 ? 2.0 : 1.0; }

using MlpActivations = MemoryEstimator::MlpUnits;

MlpActivations MlpActivationUnits(const ModelSpec& m) {
  const double f_over_h = double(m.n_inner) / m.n_embd;
  // gpt2, bert: GELU; gated: gate, up, act(gate), product. The second
  // linear's input is 2·f/h of either.
  if (!m.IsDecoder()) return {4.0 * f_over_h, 0.0, 2.0 * f_over_h};
  if (!m.Info().experts) return {8.0 * f_over_h, 0.0, 2.0 * f_over_h};
  // The layers' average: dense layers (qwen3_moe, deepseek_v3) are gated
  // MLPs of n_inner, expert layers k experts of ExpertWidth() and the
  // shared experts' n_shared_experts x ExpertWidth().
  const double expert_over_h = double(m.ExpertWidth()) / m.n_embd;
  MlpActivations sum;
  for (int layer = 0; layer < m.n_layer; ++layer) {
    if (m.ExpertLayer(layer)) {
      sum.wide += m.num_experts_per_tok * (8.0 * expert_over_h + 4.0) +
                  8.0 * expert_over_h * m.n_shared_experts;
      sum.narrow += 6.0 * m.num_local_experts / double(m.n_embd);
      sum.down_inputs += 2.0 * expert_over_h * (m.num_experts_per_tok + m.n_shared_experts);
    } else {
      sum.wide += 8.0 * f_over_h;
      sum.down_inputs += 2.0 * f_over_h;
    }
  }
  const double L = std::max(1, m.n_layer);
  return {sum.wide / L, sum.narrow / L, sum.down_inputs / L};
}

// Korthikanti et al.'s bytes for one layer and micro-batch (16-bit), for
// this rank's seq_len / cp tokens of each sequence.
double LayerActivationBytes(const ModelSpec& m, const MlpActivations& mlp, int seq_len,
                            const Strategy& s, Checkpointing checkpointing) {
  const int64_t cp = std::max(1, s.context_parallel);
  const double sbh = double(seq_len) / cp * s.micro_batch_size * m.n_embd;
  const double t = s.tensor_parallel;
  const bool sp = s.sequence_parallel && s.tensor_parallel > 1;
  if (checkpointing == Checkpointing::kFull) return 2.0 * sbh / (sp ? t : 1.0);
  // The scores of the rank's queries against the whole sequence's keys; the
  // context-parallel ring keeps none (it recomputes its blocks in backward).
  const bool ring = cp > 1 && s.context_parallel_comm == ContextParallelComm::kP2p;
  const double attention_core = 5.0 * m.n_head * seq_len / (double(m.n_embd) * t);
  const bool keeps_core =
      checkpointing == Checkpointing::kNone && s.attention == Attention::kMath && !ring;
  // 10: norms' inputs 4, the attention's and the MLP's replicated inputs 2 + 2,
  // two dropout masks; 8/t: Q, K, V and the attention projection's input, at
  // the attention width n_head * head_dim (h unless head_dim says otherwise).
  // (Latent attention: q and k of QkHeadDim(), v and the projection's
  // input of VHeadDim(), their mean.)
  const double width =
      m.IsDecoder() ? double(m.n_head) * (m.QkHeadDim() + m.VHeadDim()) / (2.0 * m.n_embd) : 1.0;
  double narrow = 10.0 + mlp.narrow, wide = 8.0 * width + mlp.wide;
  if (m.IsDecoder() && m.Info().sandwich_norm) narrow += 4.0;  // two more norms' inputs
  if (m.IsDecoder() && m.Info().qk_norm) wide += 4.0 * width;  // the q and k norms' inputs
  if (s.precision == Precision::kFp8) {
    // Each fp8 linear layer keeps its own 1-byte copy of its input instead
    // of the shared 16-bit one: the attention's input once per projection
    // reading it (q, k, v; one fused; latent attention's query and key-value
    // down-projections), the MLP's once per first linear (gate and up; one
    // fused or GELU), the output and down projections' inputs at half.
    const bool fused = !m.IsDecoder() ? m.family == "gpt2" : m.Info().fused_projections;
    const bool gated = m.IsDecoder();
    const double readers = fused ? 1.0 : m.IsDecoder() && m.Info().latent_attention ? 2.0 : 3.0;
    narrow += readers - 2.0;
    narrow += (fused || !gated ? 1.0 : 2.0) - 2.0;
    wide -= width + mlp.down_inputs / 2.0;
  }
  if (cp > 1 && !ring) {
    // all_gather keeps the other ranks' keys and values for backward.
    const double kv_width =
        m.IsDecoder() ? double(m.n_kv_head) * (m.QkHeadDim() + m.VHeadDim()) / (2.0 * m.n_embd)
                      : 1.0;
    wide += 4.0 * kv_width * (cp - 1);
  }
  const double rest = sp ? (narrow + wide) / t : narrow + wide / t;
  return sbh * (rest + (keeps_core ? attention_core : 0.0));
}

}  // namespace

MemoryEstimate EstimateMemory(const ModelSpec& m, int seq_len, const Strategy& s,
                              const MemoryCoefficients& c) {
  return MemoryEstimator(m, seq_len)(s, c);
}

MemoryEstimator::MemoryEstimator(ModelSpec model, int seq_len)
    : model_(std::move(model)), seq_len_(seq_len) {
  const ModelSpec& m = model_;
  if (m.IsTorchScript() || m.n_layer <= 0) return;
  ModelSpec no_layers = m;
  no_layers.n_layer = 0;
  outside_ = no_layers.ParameterCount();
  per_layer_ = (m.ParameterCount() - outside_) / m.n_layer;
  experts_per_layer_ = m.ExpertParameterCount() / m.n_layer;
  mlp_ = MlpActivationUnits(m);
}

MemoryEstimate MemoryEstimator::operator()(const Strategy& s, const MemoryCoefficients& c) const {
  const ModelSpec& m = model_;
  const int seq_len = seq_len_;
  MemoryEstimate e;
  if (m.IsTorchScript() || m.n_layer <= 0) return e;
  const int64_t L = m.n_layer;
  const int64_t pp = std::max(1, s.pipeline_parallel), tp = std::max(1, s.tensor_parallel);
  // Sharding divides the model state over the data- and context-parallel
  // ranks, which hold the same weights.
  const int64_t dp = std::max(1, s.weight_replicas());
  const int64_t vpp = pp > 1 ? std::max(1, s.virtual_stages) : 1;

  // Parameters of the worst rank: its stage's layers (the chunking of
  // pipeline.h: ceil per chunk) and everything outside the layers
  // (embeddings, head; the first and last stage each hold the big part).
  const int64_t outside = outside_, per_layer = per_layer_;
  const int64_t stage_layers = CeilDiv(L, pp * vpp) * vpp;
  // Expert parallelism: each rank holds 1/ep of the routed experts, which
  // are replicated over (and sharded over) dp / ep ranks only.
  const int64_t ep = s.expert_parallel > 1 ? s.expert_parallel : 1;
  const int64_t expert_per_layer = ep > 1 ? experts_per_layer_ : 0;
  const int64_t rank_dense =
      CeilDiv(std::min(stage_layers, L) * (per_layer - expert_per_layer) + outside, tp);
  const int64_t rank_experts = CeilDiv(std::min(stage_layers, L) * expert_per_layer, tp * ep);

  // Model state by precision, then sharding and offload, for the weights
  // held by `replicas` ranks.
  const bool pure = KeepsBf16Weights(s.precision);
  const int64_t weight_bytes = pure ? 2 : 4;
  const int64_t optimizer_bytes = pure ? 12 : 8;
  const auto add_state = [&](int64_t params, int64_t replicas) {
    int64_t parameters = params * weight_bytes, gradients = params * weight_bytes;
    int64_t optimizer = s.offload == Offload::kCpu ? 0 : params * optimizer_bytes;
    if (s.sharding != Sharding::kNone && replicas > 1) optimizer = CeilDiv(optimizer, replicas);
    if ((s.sharding == Sharding::kZero2 || s.sharding == Sharding::kFsdp) && replicas > 1) {
      gradients = CeilDiv(gradients, replicas);
    }
    if (s.sharding == Sharding::kFsdp && replicas > 1) parameters = CeilDiv(parameters, replicas);
    e.parameters += parameters, e.gradients += gradients, e.optimizer += optimizer;
  };
  add_state(rank_dense, dp);
  add_state(rank_experts, dp / ep);
  if (s.sharding == Sharding::kFsdp && dp > 1) {
    // A layer's weights + gradients (its experts only where they are sharded).
    const int64_t experts = dp / ep > 1 ? CeilDiv(expert_per_layer, tp * ep) : 0;
    e.gathered = 2 * (CeilDiv(per_layer - expert_per_layer, tp) + experts) * weight_bytes;
  }

  // Activations: the checkpointed share of the stage's layers recomputes.
  // (The MLP's share, a loop over the layers, once for both kinds of layer.)
  const MlpActivations& mlp = mlp_;
  const int64_t checkpointed =
      s.checkpointing == Checkpointing::kNone
          ? 0
          : std::min<int64_t>(stage_layers, CeilDiv(stage_layers * s.checkpoint_percent, 100));
  const double per_micro_batch =
      checkpointed * LayerActivationBytes(m, mlp, seq_len, s, s.checkpointing) +
      (std::min(stage_layers, L) - checkpointed) *
          LayerActivationBytes(m, mlp, seq_len, s, Checkpointing::kNone);
  // Micro-batches in flight on the first stage, in units of a whole
  // stage's activations: 1F1B's pp; interleaved, Megatron's warm-up of
  // 2(pp - 1) + (vpp - 1)·pp chunk micro-batches plus the one computing,
  // each 1/vpp of the stage: pp + (pp - 1)/vpp; at most ga either way.
  double in_flight = 1;
  if (pp > 1) {
    const double ga = std::max(1, s.grad_accum_steps);
    in_flight = s.pipeline_schedule == PipelineSchedule::kInterleaved
                    ? std::min(ga, pp + double(pp - 1) / vpp)
                    : std::min(ga, double(pp));
  }
  // A fully recomputed layer's backward first rebuilds its whole forward:
  // one layer's activations of one micro-batch at a time, on top of the
  // checkpoints.
  const double recompute_working_set =
      s.checkpointing == Checkpointing::kFull && checkpointed > 0
          ? LayerActivationBytes(m, mlp, seq_len, s, Checkpointing::kNone) -
                LayerActivationBytes(m, mlp, seq_len, s, Checkpointing::kFull)
          : 0.0;
  e.activations =
      static_cast<int64_t>(std::llround((per_micro_batch * in_flight + recompute_working_set) *
                                        ActivationBytes(s.precision) * c.activation_factor));
  if (s.precision == Precision::kFp8) {
    // Every linear layer that keeps its inputs for backward keeps its
    // weight's 1-byte copy too (whole, as gathered); a fully recomputed
    // layer only while it recomputes. The copy is cast once per step and
    // every micro-batch in flight refers to the same one (Transformer
    // Engine's fp8 weight caching across micro-batches).
    const int64_t layer_weights =
        CeilDiv(per_layer - expert_per_layer, tp) + CeilDiv(expert_per_layer, tp * ep);
    const int64_t layers = std::min(stage_layers, L);
    const int64_t keeping = layers - (s.checkpointing == Checkpointing::kFull ? checkpointed : 0);
    e.fp8_weights = layer_weights * (keeping + (keeping < layers ? 1 : 0));
  }
  // Logits [b, s / cp, V / tp] in fp32 for the loss, and their gradient.
  e.logits = int64_t{s.micro_batch_size} * (seq_len / std::max(1, s.context_parallel)) *
             CeilDiv(m.vocab_size, tp) * 4 * 2;
  e.overhead = c.overhead_bytes;
  return e;
}

}  // namespace autoaccel
