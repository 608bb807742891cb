#include "search/step_time.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace autoaccel {

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

}  // namespace

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
  double kv_width = 0;          // key and value elements per token and layer
  double expert_params = 0;     // one layer's routed experts (in layer_params)
  double routed_width = 0;      // elements a token sends to its experts: top-k * h
  // Sequence parallelism: weights tensor parallelism does not split, whose
  // gradients are all-reduced per micro-batch (count, elements).
  int replicated_layer_tensors = 0;
  double replicated_layer_elements = 0;
  int replicated_first_tensors = 0;
  double replicated_first_elements = 0;
  int replicated_last_tensors = 0;
  double replicated_last_elements = 0;
};

namespace {

ModelParts Parts(const ModelSpec& m, int seq_len) {
  ModelParts p;
  ModelSpec no_layers = m;
  no_layers.n_layer = 0;
  const double h = m.n_embd, V = m.vocab_size, L = std::max(1, m.n_layer);
  p.outside_params = static_cast<double>(no_layers.ParameterCount());
  p.layer_params = (static_cast<double>(m.ParameterCount()) - p.outside_params) / L;
  p.expert_params = static_cast<double>(m.ExpertParameterCount()) / L;
  if (p.expert_params > 0) {
    // Averaged over the layers, as the parameters are: dense layers
    // (qwen3_moe, deepseek_v3) route nothing.
    int expert_layers = 0;
    for (int layer = 0; layer < m.n_layer; ++layer) expert_layers += m.ExpertLayer(layer);
    p.routed_width = double(m.num_experts_per_tok) * h * expert_layers / L;
  }
  p.head_flops = no_layers.TrainingFlopsPerToken(seq_len);
  p.layer_flops = (m.TrainingFlopsPerToken(seq_len) - p.head_flops) / L;
  // The attention core's forward products per token and layer (what
  // selective recomputation repeats): 4 * keys attended * attention width.
  double attended = 0;
  for (int layer = 0; layer < m.n_layer; ++layer) attended += m.AttendedKeys(layer, seq_len);
  // (Latent attention: the mean of the query/key and the value widths.)
  const double attention_width =
      m.IsDecoder() ? double(m.n_head) * (m.QkHeadDim() + m.VHeadDim()) / 2.0 : h;
  p.attention_flops = 4.0 * attention_width * attended / L;
  p.tied = !m.IsDecoder() || m.tie_word_embeddings;
  p.kv_width = m.IsDecoder() ? double(m.n_kv_head) * (m.QkHeadDim() + m.VHeadDim()) : 2.0 * h;
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
    // per-head q/k norms, the o and down projections' biases; gpt_oss's
    // router bias and experts' down_proj_bias).
    const ModelFamilyInfo& info = m.Info();
    const int norms = info.sandwich_norm ? 4 : 2;
    const bool router_bias = info.router == MoeRouter::kTopKSoftmax;
    p.embedding_params = V * h;
    p.replicated_layer_tensors = norms + (info.experts ? 1 : 0) + (info.qk_norm ? 2 : 0) +
                                 (m.attention_bias ? 1 : 0) + (m.mlp_bias ? 1 : 0) +
                                 (router_bias ? 1 : 0) + (info.clamped_swiglu ? 1 : 0);
    p.replicated_layer_elements = norms * h + (info.experts ? h * m.num_local_experts : 0) +
                                  (info.qk_norm ? 2.0 * m.HeadDim() : 0) +
                                  (m.attention_bias ? h : 0) + (m.mlp_bias ? h : 0) +
                                  (router_bias ? m.num_local_experts : 0) +
                                  (info.clamped_swiglu ? double(h) * m.num_local_experts : 0);
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
                           const ModelParts& parts, const StageShape& stage,
                           const LinkTopology& topology, const GroupPlacement& placement,
                           ModelParallelBytes* by_dimension) {
  TimeFeatures x{};
  ModelParallelBytes per_micro_batch;  // by dimension; the tied embedding's per step
  // Intra-node equivalents of a group's bytes and calls (step_time.h TOPOLOGY).
  const auto bytes_weight = [&](bool crosses) { return crosses ? topology.bytes_factor : 1.0; };
  const auto calls_weight = [&](bool crosses) { return crosses ? topology.calls_factor : 1.0; };
  const double dp_bytes = bytes_weight(placement.data_crosses);
  const double tp_bytes = bytes_weight(placement.tensor_crosses);
  const double pp_bytes = bytes_weight(placement.pipeline_crosses);
  const double dp_calls = calls_weight(placement.data_crosses);
  const double cp_bytes = bytes_weight(placement.context_crosses);
  const double cp_calls = calls_weight(placement.context_crosses);
  const double tp_calls = calls_weight(placement.tensor_crosses);
  const double pp_calls = calls_weight(placement.pipeline_crosses);
  const double h = m.n_embd, S = seq_len;
  const double cp = std::max(1, s.context_parallel);
  const double T = double(s.micro_batch_size) * S / cp;  // this rank's tokens of a micro-batch
  const double ga = std::max(1, s.grad_accum_steps);
  // n: the ranks that reduce gradients together (and shard over), the data-
  // and context-parallel ones.
  const double t = std::max(1, s.tensor_parallel), n = std::max(1, s.weight_replicas());
  const int pp = std::max(1, s.pipeline_parallel);
  const double vpp = pp > 1 ? std::max(1, s.virtual_stages) : 1;
  const bool sp = s.sequence_parallel && t > 1;
  const bool pure = KeepsBf16Weights(s.precision);
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
    case Precision::kFp8: {
      // The linear layers' share: a layer's FLOPs but its attention core's
      // (3 x its forward), in the layers and in their full recompute.
      const double linear = std::max(0.0, parts.layer_flops - 3.0 * parts.attention_flops);
      const double fp8 = ga * T * (layers + full / 3.0) * linear / t * bubble;
      x[kFlopsFp8] = fp8;
      x[kFlopsPureBf16] = flops - fp8;
      break;
    }
  }
  if (s.attention == Attention::kMath) {
    // The context-parallel ring computes its own block whole and half of
    // each other rank's: (1 + (cp - 1) / 2) / cp of the whole score matrix.
    const double ring = cp > 1 && s.context_parallel_comm == ContextParallelComm::kP2p
                            ? (1 + (cp - 1) / 2) / cp
                            : 1.0;
    x[kMathAttentionFlops] =
        ga * T * (layers * 12.0 + (full + selective) * 4.0) * h * S / t * bubble * ring;
  }
  x[kLayerPasses] = ga * (layers + full / 3.0) * bubble;
  if (s.attention != Attention::kMath) {
    // Forward 1, backward 2.5 (scores recomputed), 1 per recomputed layer.
    x[kFusedAttentionFlops] =
        ga * T * (3.5 * layers + full + selective) * parts.attention_flops / t * bubble;
  }
  x[kActivationElements] = ga * T * h * (layers + full) / t * bubble;

  // Optimizer and offload.
  double stage_params = layers * parts.layer_params;
  double rest_params = pp == 1 ? parts.outside_params
                               : (stage.first ? parts.embedding_params : 0.0) +
                                     (stage.last ? parts.head_params : 0.0);
  if (pp > 1 && stage.last && parts.tied) rest_params += double(m.vocab_size) * h;
  stage_params += rest_params;
  // Expert parallelism: the stage's routed experts are spread over ep ranks
  // and replicated over ne = n / ep (ranks of the same experts).
  const double ep = std::max(1, s.expert_parallel), ne = n / ep;
  const double rank_experts = ep > 1 ? layers * parts.expert_params / (t * ep) : 0.0;
  const double rank_dense =
      (ep > 1 ? stage_params - layers * parts.expert_params : stage_params) / t;
  const double rank_params = rank_dense + rank_experts;
  const bool sharded = s.sharding != Sharding::kNone && n > 1;
  const double updated =
      s.sharding == Sharding::kNone ? rank_params : rank_dense / n + rank_experts / ne;
  if (s.offload == Offload::kCpu) {
    x[kOffloadBytes] = 2.0 * weight_bytes * updated;
  } else if (s.optimizer == Optimizer::kFusedAdamW) {
    x[kFusedOptimizerParams] = updated;
  } else {
    x[kOptimizerParams] = updated;
  }

  double collectives = 0;
  // Data parallelism: the bytes and calls of reducing (and, sharded,
  // gathering) `layer_params` and `rest_params` of this rank over `ranks`.
  const auto reduce = [&](double layer_params, double rest_params, double ranks, double* calls) {
    if (ranks <= 1 || layer_params + rest_params <= 0) return 0.0;
    const double all_reduce = 2.0 * (ranks - 1) / ranks, scatter = (ranks - 1) / ranks;
    const double G = (layer_params + rest_params) * weight_bytes, W = G;
    const double buckets = Buckets(G);
    switch (s.sharding) {
      case Sharding::kNone:
        *calls += buckets;
        return all_reduce * G;
      case Sharding::kZero1:
        *calls += 2 * buckets;
        return all_reduce * G + scatter * W;
      case Sharding::kZero2:
        *calls += (ga + 1) * buckets;
        return ga * scatter * G + scatter * W;
      case Sharding::kFsdp:
        // Gathers 2L + 1, reduce-scatters L + 1 (the rest's unit: the +1s).
        *calls += ga * (3 * layers + (rest_params > 0 ? 2 : 0));
        return ga * scatter * (2 * layer_params * weight_bytes + rest_params * weight_bytes + G);
    }
    return 0.0;
  };
  if (n > 1) {
    const double dense_layers = layers * (parts.layer_params - (ep > 1 ? parts.expert_params : 0));
    const double bytes = reduce(dense_layers / t, rest_params / t, n, &collectives) +
                         reduce(rank_experts, 0.0, ne, &collectives);
    x[kDataParallelBytes] = bytes * dp_bytes;
    collectives += 1;                                                             // the step's loss
    if (s.precision == Precision::kFp16 && sharded && pp == 1) collectives += 1;  // found_inf
    collectives *= dp_calls;
  }

  // Tensor parallelism, per micro-batch.
  double model_bytes = 0, per_micro_batch_calls = 0;
  double pipeline_bytes = 0, pipeline_calls = 0;  // per micro-batch
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
    model_bytes *= tp_bytes;
    per_micro_batch_calls *= tp_calls;
    per_micro_batch.tensor = model_bytes;
  }
  // Context parallelism, per micro-batch: each layer's keys and values
  // (this rank's K elements, the projections' dtype) reach the other cp - 1
  // ranks in forward, again for a fully recomputed layer, and their
  // gradients come back in backward (p2p: the block's K/V passed on again
  // and its fp32 gradients passed along the ring cp times; all_gather: one
  // reduce-scatter); plus the loss's token count.
  if (cp > 1) {
    const double K = T * parts.kv_width / t;
    const double e = fp32 ? 4 : 2;
    const double forwards = layers + full;
    double bytes = 0, calls = 1;
    if (s.context_parallel_comm == ContextParallelComm::kP2p) {
      bytes = forwards * (cp - 1) * K * e + layers * ((cp - 1) * K * e + cp * K * 4);
      calls += forwards * 2 * (cp - 1) + layers * (2 * (cp - 1) + 2 * cp);
    } else {
      bytes = forwards * (cp - 1) * K * e + layers * (cp - 1) * K * e;
      calls += forwards * 2 + layers * 2;
    }
    model_bytes += bytes * cp_bytes;
    per_micro_batch.context = bytes * cp_bytes;
    per_micro_batch_calls += calls * cp_calls;
  }
  // Expert parallelism, per micro-batch: each layer's tokens go to their
  // top-k experts and come back (all-to-all, the (ep - 1)/ep share that
  // leaves the rank; routing assumed balanced), in forward (again for a
  // fully recomputed layer) and their gradients in backward; a dispatched
  // token is a norm's output (column_bytes), a returned one the experts'
  // matmul output (row_bytes). Calls: the token counts, dispatch and
  // combine forward; combine and dispatch backward.
  if (ep > 1) {
    const double routed = T * parts.routed_width * (ep - 1) / ep * (column_bytes + row_bytes);
    per_micro_batch.expert =
        (layers + full + layers) * routed * bytes_weight(placement.expert_crosses);
    model_bytes += per_micro_batch.expert;
    per_micro_batch_calls +=
        (3 * (layers + full) + 2 * layers) * calls_weight(placement.expert_crosses);
  }
  // Pipeline parallelism, per micro-batch.
  if (pp > 1) {
    const double message = T * h / (sp ? t : 1.0) * weight_bytes;
    const double sends = (vpp - (stage.last ? 1 : 0)) + (vpp - (stage.first ? 1 : 0));
    pipeline_bytes = sends * message;
    pipeline_calls = 4 * vpp - 2;  // sends and receives
  }
  model_bytes = (model_bytes + pipeline_bytes * pp_bytes) * ga;
  per_micro_batch.pipeline = pipeline_bytes * pp_bytes;
  double tied_bytes = 0;
  collectives += ga * (per_micro_batch_calls + pipeline_calls * pp_calls);
  if (pp > 1) {
    double calls = 0;
    if (parts.tied && (stage.first || stage.last)) {
      // The tied embedding's gradient, all-reduced between the first and
      // the last stage (ring of 2: the buffer once).
      tied_bytes = double(m.vocab_size) * h / t * weight_bytes * pp_bytes;
      model_bytes += tied_bytes;
      calls += 1;
    }
    calls += 1;                                       // the loss over the stages
    if (s.precision == Precision::kFp16) calls += 1;  // found_inf over the world
    collectives += calls * pp_calls;
  }
  x[kModelParallelBytes] = model_bytes;
  if (by_dimension != nullptr) {
    *by_dimension = {per_micro_batch.tensor * ga, per_micro_batch.context * ga,
                     per_micro_batch.expert * ga, per_micro_batch.pipeline * ga + tied_bytes};
  }
  x[kCollectives] = collectives;
  x[kStep] = 1;
  return x;
}

double ComputeFlops(const TimeFeatures& x) {
  return x[kFlopsFp32] + x[kFlopsBf16] + x[kFlopsFp16] + x[kFlopsPureBf16] + x[kFlopsFp8];
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
    case kFlopsFp8:
      return "flops_fp8";
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
    case kFusedAttentionFlops:
      return "fused_attention_flops";
    case kActivationElements:
      return "activation_elements";
    default:
      return "unknown";
  }
}

LinkTopology TopologyOf(const DeviceSpec& device) {
  LinkTopology topology;
  topology.devices_per_node = std::max(0, device.devices_per_node);
  const LinkSpec &intra = device.intra_node, &inter = device.inter_node;
  if (intra.bandwidth_bytes_per_s > 0 && inter.bandwidth_bytes_per_s > 0) {
    topology.bytes_factor = intra.bandwidth_bytes_per_s / inter.bandwidth_bytes_per_s;
  }
  if (intra.latency_s > 0 && inter.latency_s > 0) {
    topology.calls_factor = inter.latency_s / intra.latency_s;
  }
  return topology;
}

GroupPlacement PlaceGroups(const Strategy& s, const LinkTopology& topology) {
  GroupPlacement placement;
  const int64_t G = topology.devices_per_node;
  const int64_t t = std::max(1, s.tensor_parallel), n = std::max(1, s.data_parallel),
                pp = std::max(1, s.pipeline_parallel), cp = std::max(1, s.context_parallel);
  if (G <= 0 || t * cp * n * pp <= G) return placement;
  // Does the group of `count` ranks `stride` apart from `start` hold ranks
  // of two nodes? (Ranks of a group ascend with its index, so its first and
  // last rank tell.)
  const auto spans = [G](int64_t start, int64_t stride, int64_t count) {
    return start / G != (start + stride * (count - 1)) / G;
  };
  // rank = ((p * n + d) * cp + c) * t + r. The gradients' group is the
  // data- and context-parallel ranks together: t apart, n * cp of them; the
  // expert-parallel groups are ep consecutive members of it. Counted
  // without allocating: the cost model places every candidate's groups.
  const int64_t ep = std::max(1, s.expert_parallel);
  for (int64_t p = 0; p < pp; ++p) {
    for (int64_t d = 0; d < n; ++d) {
      for (int64_t c = 0; c < cp && t > 1 && !placement.tensor_crosses; ++c) {
        placement.tensor_crosses = spans(t * (c + cp * (d + n * p)), 1, t);
      }
      for (int64_t r = 0; r < t && cp > 1 && !placement.context_crosses; ++r) {
        placement.context_crosses = spans(r + t * cp * (d + n * p), t, cp);
      }
    }
    for (int64_t r = 0; r < t; ++r) {
      const int64_t start = r + t * cp * n * p;
      if (n * cp > 1 && !placement.data_crosses) placement.data_crosses = spans(start, t, n * cp);
      for (int64_t g = 0; g < n * cp / ep && ep > 1 && !placement.expert_crosses; ++g) {
        placement.expert_crosses = spans(start + g * ep * t, t, ep);
      }
    }
  }
  for (int64_t r = 0; r < t * cp * n && pp > 1 && !placement.pipeline_crosses; ++r) {
    placement.pipeline_crosses = spans(r, t * cp * n, pp);
  }
  return placement;
}

StepTimeFeaturizer::StepTimeFeaturizer(ModelSpec model, int seq_len, const LinkTopology& topology)
    : model_(std::move(model)), seq_len_(seq_len), topology_(topology) {
  if (!model_.IsTorchScript() && model_.n_layer > 0) {
    parts_ = std::make_shared<const ModelParts>(Parts(model_, seq_len_));
  }
}

TimeFeatures StepTimeFeaturizer::operator()(const Strategy& s) const { return Slowest(s, nullptr); }

ModelParallelBytes StepTimeFeaturizer::ModelParallelByDimension(const Strategy& s) const {
  ModelParallelBytes bytes;
  Slowest(s, &bytes);
  return bytes;
}

TimeFeatures StepTimeFeaturizer::Slowest(const Strategy& s,
                                         ModelParallelBytes* by_dimension) const {
  if (parts_ == nullptr) {
    TimeFeatures x{};
    x[kStep] = 1;
    x[kLayerPasses] = std::max(1, s.grad_accum_steps);
    return x;
  }
  // Candidates come layout by layout: the last layout's placement, per
  // thread, is usually this one's.
  thread_local std::array<int, 6> last_layout = {0, 0, 0, 0, 0, 0};
  thread_local GroupPlacement last_placement;
  const std::array<int, 6> layout = {topology_.devices_per_node, s.tensor_parallel,
                                     s.context_parallel,         s.data_parallel,
                                     s.pipeline_parallel,        s.expert_parallel};
  if (layout != last_layout) {
    last_placement = PlaceGroups(s, topology_);
    last_layout = layout;
  }
  const GroupPlacement placement = last_placement;
  TimeFeatures slowest{};
  bool any = false;
  for (const StageShape& stage : Stages(model_, s)) {
    ModelParallelBytes bytes;
    const TimeFeatures x = StageFeatures(model_, seq_len_, s, *parts_, stage, topology_, placement,
                                         by_dimension != nullptr ? &bytes : nullptr);
    if (!any || ComputeFlops(x) > ComputeFlops(slowest)) {
      slowest = x;
      if (by_dimension != nullptr) *by_dimension = bytes;
    }
    any = true;
  }
  return slowest;
}

TimeFeatures StepTimeFeatures(const ModelSpec& m, int seq_len, const Strategy& s,
                              const LinkTopology& topology) {
  return StepTimeFeaturizer(m, seq_len, topology)(s);
}

void SetDeviceFacts(const DeviceSpec& device, TrainingSetup* setup) {
  const bool cuda = device.type == "cuda";
  const bool unknown = device.peak == PeakTflops{};
  setup->device_is_accelerator = device.type != "cpu";
  setup->device_supports_bf16 = !cuda || unknown || device.peak.bf16 > 0;
  setup->device_supports_fp8 = !cuda || unknown || device.peak.fp8 > 0;
}

bool HasFp8TensorCores(const DeviceSpec& device) {
  return device.type == "cuda" && device.peak.fp8 > 0;
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
  // fp8 where its peak is unknown: a CPU emulates the scaled products (63
  // GFLOP/s against fp32's 101 for 512 x 512 on one core of the build
  // machine): fp32's rate; a GPU without a known fp8 peak runs no fp8
  // (SetDeviceFacts), bf16's rate then only fills the row.
  const double fp8 = peak.fp8 > 0 ? peak.fp8 : (cuda ? bf16 : fp32);
  const double fraction = !cuda                       ? 0.4
                          : HasFp8TensorCores(device) ? kCudaAchievedPeakFractionFp8Devices
                                                      : kCudaAchievedPeakFraction;
  const auto per_flop = [&](double tflops) { return 1.0 / (fraction * tflops * 1e12); };

  TimeCoefficients c;
  auto& k = c.seconds_per_unit;
  k[kFlopsFp32] = per_flop(fp32);
  k[kFlopsBf16] = per_flop(bf16);
  k[kFlopsFp16] = per_flop(fp16);
  k[kFlopsPureBf16] = per_flop(bf16);
  k[kFlopsFp8] =
      cuda && peak.fp8 > 0 ? 1.0 / (kCudaFp8AchievedPeakFraction * fp8 * 1e12) : per_flop(fp8);
  k[kMathAttentionFlops] = per_flop(fp32);
  k[kLayerPasses] = cuda ? kCudaLayerPassSeconds : 500e-6;
  // ~28 bytes per parameter at 70% of the memory bandwidth.
  k[kFusedOptimizerParams] = !cuda ? 2e-9
                             : device.memory_bandwidth_bytes_per_s > 0
                                 ? 28.0 / (0.7 * device.memory_bandwidth_bytes_per_s)
                                 : 3e-11;
  k[kOptimizerParams] = 3 * k[kFusedOptimizerParams];
  k[kOffloadBytes] = 8e-10;
  const LinkSpec& link = device.intra_node;
  const double link_seconds_per_byte = !cuda ? 1.0 / 2e9
                                       : link.bandwidth_bytes_per_s > 0
                                           ? 1.0 / (0.75 * link.bandwidth_bytes_per_s)
                                           : 1.0 / 50e9;
  // Collectives overlap compute (bucketed all-reduce and FSDP's prefetched
  // gathers behind the layers; tensor-parallel collectives behind the
  // neighbouring GEMMs): on a GPU only a share of their link time shows in
  // the step.
  k[kModelParallelBytes] =
      cuda ? kCudaModelParallelExposure * link_seconds_per_byte : link_seconds_per_byte;
  k[kDataParallelBytes] =
      cuda ? kCudaDataParallelExposure * link_seconds_per_byte : link_seconds_per_byte;
  k[kCollectives] = !cuda ? 50e-6 : link.latency_s > 0 ? link.latency_s : 20e-6;
  k[kStep] = 2e-3;
  k[kFusedAttentionFlops] = cuda ? 1.0 / (kCudaFusedAttentionFraction * bf16 * 1e12) : 0.0;
  const double bandwidth =
      device.memory_bandwidth_bytes_per_s > 0 ? device.memory_bandwidth_bytes_per_s : 1.5e12;
  k[kActivationElements] = cuda ? kCudaActivationBytesPerElement / bandwidth : 0.0;
  return c;
}

double PredictStepTime(const TimeFeatures& x, const TimeCoefficients& c) {
  double seconds = 0;
  for (int k = 0; k < kNumTimeFeatures; ++k) seconds += x[k] * c.seconds_per_unit[k];
  return seconds;
}

}  // namespace autoaccel
