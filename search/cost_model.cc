#include "search/cost_model.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace autoaccel {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes per element of the activations kept for backward.
double ActivationBytes(Precision p) { return p == Precision::kFp32 ? 2.0 : 1.0; }

// The MLP's activations in units of s·b·h 16-bit elements' bytes, split as
// Korthikanti's are: `wide` is divided by t, `narrow` only under sequence
// parallelism. See the header for the figures.
struct MlpActivations {
  double wide = 0;
  double narrow = 0;
};
MlpActivations MlpActivationUnits(const ModelSpec& m) {
  const double f_over_h = double(m.n_inner) / m.n_embd;
  if (!m.IsDecoder()) return {4.0 * f_over_h, 0.0};  // gpt2, bert: GELU
  const ModelFamilyInfo& info = m.Info();
  if (info.experts) {
    return {m.num_experts_per_tok * (8.0 * f_over_h + 4.0),
            6.0 * m.num_local_experts / double(m.n_embd)};
  }
  return {8.0 * f_over_h, 0.0};  // gated: gate, up, act(gate), their product
}

// Korthikanti et al.'s bytes for one layer and micro-batch (16-bit).
double LayerActivationBytes(const ModelSpec& m, int seq_len, const Strategy& s,
                            Checkpointing checkpointing) {
  const double sbh = double(seq_len) * s.micro_batch_size * m.n_embd;
  const double t = s.tensor_parallel;
  const bool sp = s.sequence_parallel && s.tensor_parallel > 1;
  if (checkpointing == Checkpointing::kFull) return 2.0 * sbh / (sp ? t : 1.0);
  const double attention_core = 5.0 * m.n_head * seq_len / (double(m.n_embd) * t);
  const bool keeps_core = checkpointing == Checkpointing::kNone && s.attention == Attention::kMath;
  // 10: norms' inputs 4, the attention's and the MLP's replicated inputs 2 + 2,
  // two dropout masks; 8/t: Q, K, V and the attention projection's input, at
  // the attention width n_head * head_dim (h unless head_dim says otherwise).
  const double width = m.IsDecoder() ? double(m.n_head) * m.HeadDim() / m.n_embd : 1.0;
  const MlpActivations mlp = MlpActivationUnits(m);
  double narrow = 10.0 + mlp.narrow, wide = 8.0 * width + mlp.wide;
  if (m.IsDecoder() && m.Info().sandwich_norm) narrow += 4.0;  // two more norms' inputs
  if (m.IsDecoder() && m.Info().qk_norm) wide += 4.0 * width;  // the q and k norms' inputs
  const double rest = sp ? (narrow + wide) / t : narrow + wide / t;
  return sbh * (rest + (keeps_core ? attention_core : 0.0));
}

}  // namespace

MemoryEstimate EstimateMemory(const ModelSpec& m, int seq_len, const Strategy& s,
                              const MemoryCoefficients& c) {
  MemoryEstimate e;
  if (m.IsTorchScript() || m.n_layer <= 0) return e;
  const int64_t L = m.n_layer;
  const int64_t pp = std::max(1, s.pipeline_parallel), tp = std::max(1, s.tensor_parallel);
  const int64_t dp = std::max(1, s.data_parallel);
  const int64_t vpp = pp > 1 ? std::max(1, s.virtual_stages) : 1;

  // Parameters of the worst rank: its stage's layers (the chunking of
  // pipeline.h: ceil per chunk) and everything outside the layers
  // (embeddings, head; the first and last stage each hold the big part).
  ModelSpec no_layers = m;
  no_layers.n_layer = 0;
  const int64_t outside = no_layers.ParameterCount();
  const int64_t per_layer = (m.ParameterCount() - outside) / L;
  const int64_t stage_layers = CeilDiv(L, pp * vpp) * vpp;
  const int64_t rank_params = CeilDiv(std::min(stage_layers, L) * per_layer + outside, tp);

  // Model state by precision, then sharding and offload.
  const bool pure = s.precision == Precision::kPureBf16;
  const int64_t weight_bytes = pure ? 2 : 4;
  const int64_t optimizer_bytes = pure ? 12 : 8;
  e.parameters = rank_params * weight_bytes;
  e.gradients = rank_params * weight_bytes;
  e.optimizer = s.offload == Offload::kCpu ? 0 : rank_params * optimizer_bytes;
  if (s.sharding != Sharding::kNone && dp > 1) e.optimizer = CeilDiv(e.optimizer, dp);
  if ((s.sharding == Sharding::kZero2 || s.sharding == Sharding::kFsdp) && dp > 1) {
    e.gradients = CeilDiv(e.gradients, dp);
  }
  if (s.sharding == Sharding::kFsdp && dp > 1) {
    e.parameters = CeilDiv(e.parameters, dp);
    e.gathered = 2 * CeilDiv(per_layer, tp) * weight_bytes;  // a layer's weights + gradients
  }

  // Activations: the checkpointed share of the stage's layers recomputes.
  const int64_t checkpointed =
      s.checkpointing == Checkpointing::kNone
          ? 0
          : std::min<int64_t>(stage_layers, CeilDiv(stage_layers * s.checkpoint_percent, 100));
  const double per_micro_batch =
      checkpointed * LayerActivationBytes(m, seq_len, s, s.checkpointing) +
      (std::min(stage_layers, L) - checkpointed) *
          LayerActivationBytes(m, seq_len, s, Checkpointing::kNone);
  int64_t in_flight = 1;
  if (pp > 1) {
    const int64_t ga = std::max(1, s.grad_accum_steps);
    in_flight = s.pipeline_schedule == PipelineSchedule::kInterleaved
                    ? std::min(ga, pp + CeilDiv(pp - 1, vpp))
                    : std::min(ga, pp);
  }
  e.activations = static_cast<int64_t>(std::llround(
      per_micro_batch * in_flight * ActivationBytes(s.precision) * c.activation_factor));
  // Logits [b, s, V / tp] in fp32 for the loss, and their gradient.
  e.logits = int64_t{s.micro_batch_size} * seq_len * CeilDiv(m.vocab_size, tp) * 4 * 2;
  e.overhead = c.overhead_bytes;
  return e;
}

// ---------------------------------------------------------------------------
// Time.

namespace {

// One pipeline stage (the whole model when pp == 1), as engine/pipeline.h
// splits the layers: pp · vpp chunks of consecutive layers, the first
// L % chunks one longer, chunk k on stage k % pp; the first
// ceil(L · percent / 100) layers of the model checkpoint.
struct StageShape {
  int layers = 0;
  int full_recompute = 0;       // layers recomputing their whole forward
  int selective_recompute = 0;  // layers recomputing their attention core
  bool first = true;            // embeds the tokens
  bool last = true;             // final norm, LM head, loss
};

std::vector<StageShape> Stages(const ModelSpec& m, const Strategy& s) {
  const int L = m.n_layer;
  const int pp = std::max(1, s.pipeline_parallel);
  const int vpp = pp > 1 ? std::max(1, s.virtual_stages) : 1;
  const int chunks = pp * vpp;
  const int checkpointed =
      s.checkpointing == Checkpointing::kNone
          ? 0
          : static_cast<int>((int64_t{L} * std::clamp(s.checkpoint_percent, 0, 100) + 99) / 100);
  std::vector<StageShape> stages(pp);
  for (int stage = 0; stage < pp; ++stage) {
    StageShape& shape = stages[stage];
    shape.first = stage == 0;
    shape.last = stage == pp - 1;
    for (int c = 0; c < vpp; ++c) {
      const int chunk = c * pp + stage;
      const int base = L / chunks, extra = L % chunks;
      const int begin = chunk * base + std::min(chunk, extra);
      const int end = begin + base + (chunk < extra ? 1 : 0);
      for (int layer = begin; layer < end; ++layer) {
        ++shape.layers;
        if (layer >= checkpointed) continue;
        if (s.checkpointing == Checkpointing::kFull) {
          ++shape.full_recompute;
        } else {
          ++shape.selective_recompute;
        }
      }
    }
  }
  return stages;
}

// The model's parameters and FLOPs split into the layers and the rest.
struct ModelParts {
  double layer_params = 0;      // one layer
  double outside_params = 0;    // everything else, tied weights once
  double embedding_params = 0;  // the first stage's share of outside_params
  double head_params = 0;       // the last stage's (with pp > 1 a tied head is a copy)
  double layer_flops = 0;       // per token, forward + backward, one layer
  double head_flops = 0;        // per token, forward + backward, LM head / MLM head
  double attention_flops = 0;   // per token, one layer's QK^T and AV forward as model FLOPs
  bool tied = true;             // the LM head is the token embedding
  // Sequence parallelism: weights tensor parallelism does not split, whose
  // gradients are all-reduced per micro-batch (count, elements).
  int replicated_layer_tensors = 0;
  double replicated_layer_elements = 0;
  int replicated_first_tensors = 0;
  double replicated_first_elements = 0;
  int replicated_last_tensors = 0;
  double replicated_last_elements = 0;
};

ModelParts Parts(const ModelSpec& m, int seq_len) {
  ModelParts p;
  ModelSpec no_layers = m;
  no_layers.n_layer = 0;
  const double h = m.n_embd, V = m.vocab_size, L = std::max(1, m.n_layer);
  p.outside_params = static_cast<double>(no_layers.ParameterCount());
  p.layer_params = (static_cast<double>(m.ParameterCount()) - p.outside_params) / L;
  p.head_flops = no_layers.TrainingFlopsPerToken(seq_len);
  p.layer_flops = (m.TrainingFlopsPerToken(seq_len) - p.head_flops) / L;
  // The attention core's forward products per token and layer (what
  // selective recomputation repeats): 4 * keys attended * attention width.
  double attended = 0;
  for (int layer = 0; layer < m.n_layer; ++layer) attended += m.AttendedKeys(layer, seq_len);
  const double attention_width = m.IsDecoder() ? double(m.n_head) * m.HeadDim() : h;
  p.attention_flops = 4.0 * attention_width * attended / L;
  p.tied = !m.IsDecoder() || m.tie_word_embeddings;
  if (m.family == "gpt2") {
    p.embedding_params = (V + m.n_positions) * h;
    p.replicated_layer_tensors = 6;  // ln_1, ln_2 (weight, bias); both c_proj biases
    p.replicated_layer_elements = 6 * h;
    p.replicated_first_tensors = 1;  // wpe
    p.replicated_first_elements = double(m.n_positions) * h;
    p.replicated_last_tensors = 2;  // ln_f
    p.replicated_last_elements = 2 * h;
  } else if (m.family == "bert") {
    p.embedding_params = (V + m.n_positions + m.type_vocab_size) * h + 2 * h;
    p.replicated_layer_tensors = 6;
    p.replicated_layer_elements = 6 * h;
  } else {
    // Replicated under tensor parallelism: the norms (and the router, the
    // per-head q/k norms, the o and down projections' biases).
    const ModelFamilyInfo& info = m.Info();
    const int norms = info.sandwich_norm ? 4 : 2;
    p.embedding_params = V * h;
    p.replicated_layer_tensors = norms + (info.experts ? 1 : 0) + (info.qk_norm ? 2 : 0) +
                                 (m.attention_bias ? 1 : 0) + (m.mlp_bias ? 1 : 0);
    p.replicated_layer_elements = norms * h + (info.experts ? h * m.num_local_experts : 0) +
                                  (info.qk_norm ? 2.0 * m.HeadDim() : 0) +
                                  (m.attention_bias ? h : 0) + (m.mlp_bias ? h : 0);
    p.replicated_last_tensors = 1;
    p.replicated_last_elements = h;
  }
  p.head_params = p.outside_params - p.embedding_params;
  return p;
}

// Number of gradient buckets of `bytes` (DataParallelOptions::bucket_bytes).
double Buckets(double bytes) {
  constexpr double kBucketBytes = 25.0 * (1 << 20);
  return std::max(1.0, std::ceil(bytes / kBucketBytes));
}

TimeFeatures StageFeatures(const ModelSpec& m, int seq_len, const Strategy& s,
                           const ModelParts& parts, const StageShape& stage) {
  TimeFeatures x{};
  const double h = m.n_embd, S = seq_len;
  const double T = double(s.micro_batch_size) * S;  // tokens of a micro-batch
  const double ga = std::max(1, s.grad_accum_steps);
  const double t = std::max(1, s.tensor_parallel), n = std::max(1, s.data_parallel);
  const int pp = std::max(1, s.pipeline_parallel);
  const double vpp = pp > 1 ? std::max(1, s.virtual_stages) : 1;
  const bool sp = s.sequence_parallel && t > 1;
  const bool pure = s.precision == Precision::kPureBf16;
  const bool fp32 = s.precision == Precision::kFp32;
  const double weight_bytes = pure ? 2 : 4;  // also gradients, pipeline messages
  // Tensor-parallel messages: a column-parallel layer's input is a norm's
  // output (fp32 under autocast); a row-parallel one's output is the
  // matmul's (16-bit under autocast).
  const double column_bytes = pure ? 2 : 4;
  const double row_bytes = fp32 ? 4 : 2;
  const double layers = stage.layers;
  const double full = stage.full_recompute, selective = stage.selective_recompute;

  // Compute.
  const double bubble = pp > 1 ? 1.0 + (pp - 1) / (vpp * ga) : 1.0;
  const double flops_per_token = layers * parts.layer_flops + full * parts.layer_flops / 3.0 +
                                 selective * parts.attention_flops +
                                 (stage.last ? parts.head_flops : 0.0);
  const double flops = ga * T * flops_per_token / t * bubble;
  switch (s.precision) {
    case Precision::kFp32:
      x[kFlopsFp32] = flops;
      break;
    case Precision::kBf16:
      x[kFlopsBf16] = flops;
      break;
    case Precision::kFp16:
      x[kFlopsFp16] = flops;
      break;
    case Precision::kPureBf16:
      x[kFlopsPureBf16] = flops;
      break;
  }
  if (s.attention == Attention::kMath) {
    x[kMathAttentionFlops] =
        ga * T * (layers * 12.0 + (full + selective) * 4.0) * h * S / t * bubble;
  }
  x[kLayerPasses] = ga * (layers + full / 3.0) * bubble;

  // Optimizer and offload.
  double stage_params = layers * parts.layer_params;
  double rest_params = pp == 1 ? parts.outside_params
                               : (stage.first ? parts.embedding_params : 0.0) +
                                     (stage.last ? parts.head_params : 0.0);
  if (pp > 1 && stage.last && parts.tied) rest_params += double(m.vocab_size) * h;
  stage_params += rest_params;
  const double rank_params = stage_params / t;
  const bool sharded = s.sharding != Sharding::kNone && n > 1;
  const double updated = sharded ? rank_params / n : rank_params;
  if (s.offload == Offload::kCpu) {
    x[kOffloadBytes] = 2.0 * weight_bytes * updated;
  } else if (s.optimizer == Optimizer::kFusedAdamW) {
    x[kFusedOptimizerParams] = updated;
  } else {
    x[kOptimizerParams] = updated;
  }

  double collectives = 0;
  // Data parallelism.
  if (n > 1) {
    const double all_reduce = 2.0 * (n - 1) / n, scatter = (n - 1) / n;
    const double G = rank_params * weight_bytes, W = G;
    const double buckets = Buckets(G);
    double bytes = 0;
    switch (s.sharding) {
      case Sharding::kNone:
        bytes = all_reduce * G;
        collectives += buckets;
        break;
      case Sharding::kZero1:
        bytes = all_reduce * G + scatter * W;
        collectives += 2 * buckets;
        break;
      case Sharding::kZero2:
        bytes = ga * scatter * G + scatter * W;
        collectives += (ga + 1) * buckets;
        break;
      case Sharding::kFsdp: {
        const double W_layers = layers * parts.layer_params / t * weight_bytes;
        const double W_rest = rest_params / t * weight_bytes;
        bytes = ga * scatter * (2 * W_layers + W_rest + G);
        collectives += ga * (3 * layers + 2);  // gathers 2L + 1, reduce-scatters L + 1
        break;
      }
    }
    x[kDataParallelBytes] = bytes;
    collectives += 1;                                                             // the step's loss
    if (s.precision == Precision::kFp16 && sharded && pp == 1) collectives += 1;  // found_inf
  }

  // Tensor parallelism, per micro-batch.
  double model_bytes = 0, per_micro_batch_calls = 0;
  if (t > 1) {
    const double all_reduce = 2.0 * (t - 1) / t, scatter = (t - 1) / t;
    const double A = T * h;  // elements of one [b, s, h] activation
    const double recomputed = full;
    if (!sp) {
      // Forward: 2 row-parallel outputs; backward: 2 column-parallel inputs.
      model_bytes += layers * all_reduce * A * (2 * row_bytes + 2 * column_bytes);
      model_bytes += recomputed * all_reduce * A * 2 * row_bytes;
      per_micro_batch_calls += 4 * layers + 2 * recomputed;
    } else {
      // Each all-reduce becomes an all-gather and a reduce-scatter.
      model_bytes += layers * scatter * A * 2 * (2 * row_bytes + 2 * column_bytes);
      model_bytes += recomputed * scatter * A * (2 * row_bytes + 2 * column_bytes);
      per_micro_batch_calls += 8 * layers + 4 * recomputed;
      // Replicated weights' gradients.
      double tensors = layers * parts.replicated_layer_tensors;
      double elements = layers * parts.replicated_layer_elements;
      if (stage.first) {
        tensors += parts.replicated_first_tensors;
        elements += parts.replicated_first_elements;
      }
      if (stage.last) {
        tensors += parts.replicated_last_tensors;
        elements += parts.replicated_last_elements;
      }
      model_bytes += all_reduce * elements * weight_bytes;
      per_micro_batch_calls += tensors;
    }
    const double calls_per_all_reduce = sp ? 2 : 1;
    if (stage.first) {  // the vocabulary-parallel embedding's output
      model_bytes += all_reduce * A * weight_bytes;
      per_micro_batch_calls += calls_per_all_reduce;
    }
    if (stage.last) {  // the LM head's input gradient; the cross-entropy's 3 reductions
      model_bytes += all_reduce * A * column_bytes + 3 * all_reduce * T * 4;
      per_micro_batch_calls += calls_per_all_reduce + 3;
    }
  }
  // Pipeline parallelism, per micro-batch.
  if (pp > 1) {
    const double message = T * h / (sp ? t : 1.0) * weight_bytes;
    const double sends = (vpp - (stage.last ? 1 : 0)) + (vpp - (stage.first ? 1 : 0));
    model_bytes += sends * message;
    per_micro_batch_calls += 4 * vpp - 2;  // sends and receives
  }
  model_bytes *= ga;
  collectives += ga * per_micro_batch_calls;
  if (pp > 1) {
    if (parts.tied && (stage.first || stage.last)) {
      // The tied embedding's gradient, all-reduced between the first and
      // the last stage (ring of 2: the buffer once).
      model_bytes += double(m.vocab_size) * h / t * weight_bytes;
      collectives += 1;
    }
    collectives += 1;                                       // the loss over the stages
    if (s.precision == Precision::kFp16) collectives += 1;  // found_inf over the world
  }
  x[kModelParallelBytes] = model_bytes;
  x[kCollectives] = collectives;
  x[kStep] = 1;
  return x;
}

double ComputeFlops(const TimeFeatures& x) {
  return x[kFlopsFp32] + x[kFlopsBf16] + x[kFlopsFp16] + x[kFlopsPureBf16];
}

}  // namespace

absl::string_view TimeFeatureName(int feature) {
  switch (feature) {
    case kFlopsFp32:
      return "flops_fp32";
    case kFlopsBf16:
      return "flops_bf16";
    case kFlopsFp16:
      return "flops_fp16";
    case kFlopsPureBf16:
      return "flops_pure_bf16";
    case kMathAttentionFlops:
      return "math_attention_flops";
    case kLayerPasses:
      return "layer_passes";
    case kOptimizerParams:
      return "optimizer_params";
    case kFusedOptimizerParams:
      return "fused_optimizer_params";
    case kOffloadBytes:
      return "offload_bytes";
    case kDataParallelBytes:
      return "data_parallel_bytes";
    case kModelParallelBytes:
      return "model_parallel_bytes";
    case kCollectives:
      return "collectives";
    case kStep:
      return "step";
    default:
      return "unknown";
  }
}

TimeFeatures StepTimeFeatures(const ModelSpec& m, int seq_len, const Strategy& s) {
  if (m.IsTorchScript() || m.n_layer <= 0) {
    TimeFeatures x{};
    x[kStep] = 1;
    x[kLayerPasses] = std::max(1, s.grad_accum_steps);
    return x;
  }
  const ModelParts parts = Parts(m, seq_len);
  TimeFeatures slowest{};
  bool any = false;
  for (const StageShape& stage : Stages(m, s)) {
    const TimeFeatures x = StageFeatures(m, seq_len, s, parts, stage);
    if (!any || ComputeFlops(x) > ComputeFlops(slowest)) slowest = x;
    any = true;
  }
  return slowest;
}

TimeCoefficients PriorTimeCoefficients(const DeviceSpec& device) {
  const bool cuda = device.type == "cuda";
  const PeakTflops& peak = device.peak;
  const double fp32 = peak.fp32 > 0 ? peak.fp32 : (cuda ? 20.0 : 0.2);
  const auto half = [&](double known) {
    if (known > 0) return known;
    if (!cuda) return 0.5 * fp32;
    return peak.fp32 > 0 ? fp32 : 100.0;
  };
  const double bf16 = half(peak.bf16), fp16 = half(peak.fp16);
  const auto per_flop = [](double tflops) { return 1.0 / (0.4 * tflops * 1e12); };

  TimeCoefficients c;
  auto& k = c.seconds_per_unit;
  k[kFlopsFp32] = per_flop(fp32);
  k[kFlopsBf16] = per_flop(bf16);
  k[kFlopsFp16] = per_flop(fp16);
  k[kFlopsPureBf16] = per_flop(bf16);
  k[kMathAttentionFlops] = per_flop(fp32);
  k[kLayerPasses] = cuda ? 300e-6 : 500e-6;
  k[kFusedOptimizerParams] = cuda ? 3e-11 : 2e-9;
  k[kOptimizerParams] = 3 * k[kFusedOptimizerParams];
  k[kOffloadBytes] = 8e-10;
  k[kDataParallelBytes] = cuda ? 1.0 / 50e9 : 1.0 / 2e9;
  k[kModelParallelBytes] = k[kDataParallelBytes];
  k[kCollectives] = cuda ? 20e-6 : 50e-6;
  k[kStep] = 2e-3;
  return c;
}

double PredictStepTime(const TimeFeatures& x, const TimeCoefficients& c) {
  double seconds = 0;
  for (int k = 0; k < kNumTimeFeatures; ++k) seconds += x[k] * c.seconds_per_unit[k];
  return seconds;
}

// ---------------------------------------------------------------------------
// Calibration.

namespace {

// Lawson and Hanson's active-set method: argmin ||A x - b|| subject to
// x >= 0. A must have full column rank (the callers' prior rows see to it).
Eigen::VectorXd SolveNonNegativeLeastSquares(const Eigen::MatrixXd& A, const Eigen::VectorXd& b) {
  const Eigen::Index n = A.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(n, false);
  const double tolerance = 1e-12 * std::max(1.0, A.norm() * b.norm());
  for (int outer = 0; outer < 3 * n + 10; ++outer) {
    const Eigen::VectorXd w = A.transpose() * (b - A * x);
    Eigen::Index best = -1;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!passive[j] && w[j] > tolerance && (best < 0 || w[j] > w[best])) best = j;
    }
    if (best < 0) break;  // Kuhn-Tucker conditions hold
    passive[best] = true;
    for (int inner = 0; inner < 3 * n + 10; ++inner) {
      std::vector<Eigen::Index> columns;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[j]) columns.push_back(j);
      }
      Eigen::MatrixXd sub(A.rows(), static_cast<Eigen::Index>(columns.size()));
      for (size_t i = 0; i < columns.size(); ++i) sub.col(i) = A.col(columns[i]);
      const Eigen::VectorXd z = sub.colPivHouseholderQr().solve(b);
      if ((z.array() > 0).all()) {
        x.setZero();
        for (size_t i = 0; i < columns.size(); ++i) x[columns[i]] = z[i];
        break;
      }
      // Step from x towards z until the first passive variable reaches 0,
      // and let it go.
      double alpha = 1.0;
      for (size_t i = 0; i < columns.size(); ++i) {
        if (z[i] <= 0) {
          const double xi = x[columns[i]];
          alpha = std::min(alpha, xi / (xi - z[i]));
        }
      }
      for (size_t i = 0; i < columns.size(); ++i) {
        double& xi = x[columns[i]];
        xi += alpha * (z[i] - xi);
        if (xi <= 1e-15) {
          xi = 0;
          passive[columns[i]] = false;
        }
      }
      if (std::none_of(passive.begin(), passive.end(), [](bool p) { return p; })) break;
    }
  }
  return x;
}

// Time calibration. Row i of `relative` is p_k x_ik / t_i: observation i's
// time shares under the prior, so that u = 1 is the prior and a u with
// relative · u = 1 fits every observation. Returns argmin over u >= 0 of
// |relative · u - 1|^2 + lambda |u - 1|^2.
Eigen::VectorXd FitRelativeToPrior(const Eigen::MatrixXd& relative, double lambda) {
  const Eigen::Index rows = relative.rows(), cols = relative.cols();
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(rows + cols, cols);
  A.topRows(rows) = relative;
  const double root_lambda = std::sqrt(lambda);
  for (Eigen::Index j = 0; j < cols; ++j) A(rows + j, j) = root_lambda;
  Eigen::VectorXd b = Eigen::VectorXd::Ones(rows + cols);
  b.tail(cols).setConstant(root_lambda);
  return SolveNonNegativeLeastSquares(A, b);
}

// The prior's weight lambda. Too strong, it holds on to the prior where the
// observations say otherwise (a feature that takes a small share of every
// observed step barely moves, and the big ones make up for it); too weak,
// it lets measurement noise drive the coefficients the data pins down
// poorly. With enough observations the weight is chosen among a few by
// cross-validation (leave-one-out, or 10-fold past 10 observations; ties go
// to the stronger prior); before that, kDefaultPriorWeight: a prior worth
// about one observation's 3% noise on coefficients known within 2x.
constexpr double kDefaultPriorWeight = 1e-3;
constexpr int kMinObservationsToValidate = 6;
double ChoosePriorWeight(const Eigen::MatrixXd& relative) {
  const Eigen::Index n = relative.rows();
  if (n < kMinObservationsToValidate) return kDefaultPriorWeight;
  const Eigen::Index folds = std::min<Eigen::Index>(n, 10);
  double best = kDefaultPriorWeight, best_error = std::numeric_limits<double>::infinity();
  for (double lambda : {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6}) {
    double error = 0;
    for (Eigen::Index fold = 0; fold < folds; ++fold) {
      Eigen::MatrixXd train(n - (n - fold + folds - 1) / folds, relative.cols());
      Eigen::Index r = 0;
      for (Eigen::Index i = 0; i < n; ++i) {
        if (i % folds != fold) train.row(r++) = relative.row(i);
      }
      const Eigen::VectorXd u = FitRelativeToPrior(train, lambda);
      for (Eigen::Index i = fold; i < n; i += folds) {
        const double residual = relative.row(i).dot(u) - 1;
        error += residual * residual;
      }
    }
    if (error < best_error) {
      best = lambda;
      best_error = error;
    }
  }
  return best;
}

// Memory calibration: the weight of the pull towards f = 1, o = 0.
constexpr double kMemoryPriorWeight = 1e-3;

std::string FormatBytes(double bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  if (std::abs(bytes) >= kGiB) return absl::StrFormat("%.1f GiB", bytes / kGiB);
  if (std::abs(bytes) >= kMiB) return absl::StrFormat("%.1f MiB", bytes / kMiB);
  if (std::abs(bytes) >= kKiB) return absl::StrFormat("%.1f KiB", bytes / kKiB);
  return absl::StrFormat("%.0f bytes", bytes);
}

}  // namespace

CostModel::CostModel(ModelSpec model, int seq_len, int global_batch_size, DeviceSpec device)
    : model_(std::move(model)),
      seq_len_(seq_len),
      global_batch_size_(global_batch_size),
      device_(std::move(device)),
      time_prior_(PriorTimeCoefficients(device_)),
      time_(time_prior_) {}

CostModel::Prediction CostModel::Predict(const Strategy& s) const {
  Prediction p;
  p.memory = EstimateMemory(model_, seq_len_, s, memory_);
  p.step_time_s = PredictStepTime(StepTimeFeatures(model_, seq_len_, s), time_);
  if (p.step_time_s > 0) {
    p.tokens_per_second = double(global_batch_size_) * seq_len_ / p.step_time_s;
  }
  return p;
}

bool CostModel::Fits(const Strategy& s, double margin, std::string* reason) const {
  if (model_.IsTorchScript() || device_.memory_bytes <= 0) return true;
  const MemoryEstimate e = EstimateMemory(model_, seq_len_, s, memory_);
  const double limit = double(device_.memory_bytes) * (1.0 + margin);
  if (double(e.total()) <= limit) return true;
  if (reason != nullptr) {
    std::vector<std::pair<int64_t, absl::string_view>> parts = {{e.activations, "activations"},
                                                                {e.model_state(), "model state"},
                                                                {e.gathered, "gathered layer"},
                                                                {e.logits, "logits"},
                                                                {e.overhead, "overhead"}};
    std::stable_sort(parts.begin(), parts.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> named;
    for (const auto& [bytes, name] : parts) {
      if (bytes <= 0 || named.size() == 3) break;  // sorted: the three biggest
      named.push_back(absl::StrCat(name, " ", FormatBytes(bytes)));
    }
    *reason = absl::StrCat("predicted ", FormatBytes(double(e.total())), " per device (",
                           absl::StrJoin(named, ", "), ") exceeds the device's ",
                           FormatBytes(double(device_.memory_bytes)));
    if (margin != 0) {
      absl::StrAppend(reason, " (", FormatBytes(limit), " with the ",
                      absl::StrFormat("%g", margin * 100), "% margin)");
    }
  }
  return false;
}

void CostModel::Observe(const Strategy& s, const TrialMetrics& measured, TrialStatus status) {
  if (status == TrialStatus::kOom && device_.memory_bytes > 0 && !model_.IsTorchScript()) {
    const MemoryEstimate e = EstimateMemory(model_, seq_len_, s);  // factor 1, no overhead
    oom_observations_.push_back({double(e.total() - e.activations - e.overhead),
                                 double(e.activations), double(device_.memory_bytes)});
    RefitMemory();
    ++observations_;
    return;
  }
  if (status != TrialStatus::kSucceeded) return;
  bool used = false;
  if (measured.step_time_median_s > 0 && std::isfinite(measured.step_time_median_s)) {
    time_observations_.push_back(
        {StepTimeFeatures(model_, seq_len_, s), measured.step_time_median_s});
    RefitTime();
    used = true;
  }
  if (measured.peak_memory_bytes > 0 && !model_.IsTorchScript()) {
    const MemoryEstimate e = EstimateMemory(model_, seq_len_, s);  // factor 1, no overhead
    memory_observations_.push_back({double(e.total() - e.activations - e.overhead),
                                    double(e.activations), double(measured.peak_memory_bytes)});
    RefitMemory();
    used = true;
  }
  if (used) ++observations_;
}

void CostModel::RefitTime() {
  // u_k = c_k / p_k over the features the data exercises; the others keep
  // u_k = 1 (their prior).
  std::vector<int> columns;
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    for (const TimeObservation& o : time_observations_) {
      if (o.x[k] != 0) {
        columns.push_back(k);
        break;
      }
    }
  }
  time_ = time_prior_;
  if (columns.empty()) return;
  Eigen::MatrixXd relative(static_cast<Eigen::Index>(time_observations_.size()),
                           static_cast<Eigen::Index>(columns.size()));
  for (Eigen::Index i = 0; i < relative.rows(); ++i) {
    const TimeObservation& o = time_observations_[i];
    for (Eigen::Index j = 0; j < relative.cols(); ++j) {
      const int k = columns[j];
      relative(i, j) = time_prior_.seconds_per_unit[k] * o.x[k] / o.seconds;
    }
  }
  const Eigen::VectorXd u = FitRelativeToPrior(relative, ChoosePriorWeight(relative));
  for (Eigen::Index j = 0; j < relative.cols(); ++j) {
    time_.seconds_per_unit[columns[j]] = time_prior_.seconds_per_unit[columns[j]] * u[j];
  }
}

void CostModel::RefitMemory() {
  memory_ = MemoryCoefficients{};
  // The rows: the measured peaks once there are two (one cannot tell
  // activations from overhead), and the out-of-memory lower bounds the fit
  // would otherwise violate, added a round at a time (with one of them, a
  // single measured peak counts too).
  std::vector<const MemoryObservation*> rows;
  bool peaks_in = false;
  const auto add_peaks = [&] {
    if (peaks_in) return;
    for (const MemoryObservation& o : memory_observations_) rows.push_back(&o);
    peaks_in = true;
  };
  if (memory_observations_.size() >= 2) add_peaks();
  std::vector<bool> bound(oom_observations_.size(), false);
  while (true) {
    if (!rows.empty()) {
      double scale = 0;
      for (const MemoryObservation* o : rows) scale += o->peak;
      scale /= double(rows.size());
      // v = (f, o / scale): rows (activations_i, scale) / peak_i against
      // (peak_i - fixed_i) / peak_i, then the priors f = 1, o = 0.
      const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
      Eigen::MatrixXd A = Eigen::MatrixXd::Zero(n + 2, 2);
      Eigen::VectorXd b = Eigen::VectorXd::Zero(n + 2);
      for (Eigen::Index i = 0; i < n; ++i) {
        const MemoryObservation& o = *rows[i];
        A(i, 0) = o.activations / o.peak;
        A(i, 1) = scale / o.peak;
        b[i] = (o.peak - o.fixed) / o.peak;
      }
      const double root_lambda = std::sqrt(kMemoryPriorWeight);
      A(n, 0) = root_lambda;
      b[n] = root_lambda;         // f = 1
      A(n + 1, 1) = root_lambda;  // o = 0
      const Eigen::VectorXd v = SolveNonNegativeLeastSquares(A, b);
      memory_.activation_factor = v[0];
      memory_.overhead_bytes = static_cast<int64_t>(std::llround(v[1] * scale));
    }
    bool added = false;
    for (size_t k = 0; k < oom_observations_.size(); ++k) {
      const MemoryObservation& o = oom_observations_[k];
      const double predicted =
          o.fixed + memory_.activation_factor * o.activations + memory_.overhead_bytes;
      if (bound[k] || predicted >= o.peak) continue;
      add_peaks();
      bound[k] = true;
      rows.push_back(&o);
      added = true;
    }
    if (!added) return;
  }
}

}  // namespace autoaccel
