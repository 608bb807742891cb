#include "engine/llama.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/context_parallel.h"
#include "engine/latent_attention.h"
#include "engine/moe.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

torch::nn::Linear MakeLinear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

torch::nn::Linear NoBiasLinear(int64_t in, int64_t out) { return MakeLinear(in, out, false); }

// theta^(-2i/dim) for i < dim / 2, [dim / 2] fp32.
torch::Tensor BaseFrequencies(double theta, int64_t dim, const torch::TensorOptions& options) {
  return at::pow(theta, torch::arange(0, dim, 2, options) / double(dim)).reciprocal();
}

// YaRN's dimension that turns `rotations` times over `original` positions
// (transformers' find_correction_dim).
double YarnCorrectionDim(double rotations, int64_t dim, double theta, double original) {
  return dim * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(theta));
}

// The rotary frequencies of `spec` for a rotary size of `dim` in a forward
// of T positions, [dim / 2] fp32: theta^(-2i/dim), scaled by the rope type
// as transformers 5.23's modeling_rope_utils.py (spec/model_spec.h).
torch::Tensor InverseFrequencies(const ModelSpec& spec, int64_t dim, int64_t T,
                                 const torch::Device& device) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const std::string& type = spec.rope_type;
  // theta, or dynamic NTK's base grown with T (past max_position_embeddings).
  const torch::Tensor inv_freq = BaseFrequencies(spec.RopeBase(T), dim, options);
  if (type == "linear") return inv_freq / spec.rope_factor;
  if (type == "longrope") {
    // Long factors when the forward is longer than the pretraining length.
    const std::vector<double>& factors =
        T > spec.rope_original_max_positions ? spec.rope_long_factor : spec.rope_short_factor;
    return inv_freq / torch::tensor(factors, torch::kDouble).to(options);
  }
  if (type == "yarn") {
    // Dimensions turning more than beta_fast times over the pretraining
    // length keep theta's frequency, fewer than beta_slow times are divided
    // by `factor`, a linear ramp between.
    const double original = spec.rope_original_max_positions;
    double low = YarnCorrectionDim(spec.rope_beta_fast, dim, spec.rope_theta, original);
    double high = YarnCorrectionDim(spec.rope_beta_slow, dim, spec.rope_theta, original);
    if (spec.rope_truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, double(dim - 1));
    if (low == high) high += 0.001;  // as transformers: no zero-width ramp
    const torch::Tensor kept =
        1 - torch::clamp((torch::arange(dim / 2, options) - low) / (high - low), 0, 1);
    return (inv_freq / spec.rope_factor) * (1 - kept) + inv_freq * kept;
  }
  if (type != "llama3") return inv_freq;
  // Llama 3.1: wavelengths longer than original / low_freq_factor are
  // stretched by `factor`, shorter than original / high_freq_factor kept,
  // and those between interpolated linearly in original / wavelength.
  const double original = spec.rope_original_max_positions;
  const double low = spec.rope_low_freq_factor, high = spec.rope_high_freq_factor;
  const torch::Tensor wavelength = (2 * M_PI) / inv_freq;
  const torch::Tensor stretched =
      torch::where(wavelength > original / low, inv_freq / spec.rope_factor, inv_freq);
  const torch::Tensor smooth = (original / wavelength - low) / (high - low);
  const torch::Tensor between = (1 - smooth) * stretched / spec.rope_factor + smooth * stretched;
  const torch::Tensor medium = (wavelength >= original / high) & (wavelength <= original / low);
  return torch::where(medium, between, stretched);
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> RotaryCosSin(const torch::Tensor& positions, int64_t T,
                                                     const ModelSpec& spec, int64_t dim) {
  const torch::Tensor inv_freq = InverseFrequencies(spec, dim, T, positions.device());
  const torch::Tensor angles =
      positions.to(inv_freq.options()).unsqueeze(1) * inv_freq.unsqueeze(0);
  const torch::Tensor both_halves = torch::cat({angles, angles}, /*dim=*/-1);
  if (spec.rope_attention_factor == 1.0) return {both_halves.cos(), both_halves.sin()};
  return {both_halves.cos() * spec.rope_attention_factor,
          both_halves.sin() * spec.rope_attention_factor};
}

namespace {

// [x1, x2] -> [-x2, x1] over the last dimension's halves.
torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, /*dim=*/-1);
}

torch::Tensor Activation(const std::string& name, const torch::Tensor& x) {
  if (name == "silu") return at::silu(x);
  if (name == "gelu") return torch::gelu(x);
  return torch::gelu(x, /*approximate=*/"tanh");  // gelu_pytorch_tanh
}

class DecoderAttentionImpl : public torch::nn::Module {
 public:
  DecoderAttentionImpl(const ModelSpec& spec, int layer)
      : head_dim_(spec.HeadDim()),
        rotary_dim_(static_cast<int64_t>(spec.HeadDim() * spec.partial_rotary_factor)),
        heads_(spec.n_head),
        kv_heads_(spec.n_kv_head),
        o_bias_(spec.attention_bias),
        spec_(spec) {
    const ModelFamilyInfo& info = spec.Info();
    const int64_t q_width = heads_ * head_dim_, kv_width = kv_heads_ * head_dim_;
    const bool qkv_bias = info.qkv_bias || spec.attention_bias;
    if (info.fused_projections) {
      qkv_proj_ =
          register_module("qkv_proj", MakeLinear(spec.n_embd, q_width + 2 * kv_width, qkv_bias));
    } else {
      q_proj_ = register_module("q_proj", MakeLinear(spec.n_embd, q_width, qkv_bias));
      k_proj_ = register_module("k_proj", MakeLinear(spec.n_embd, kv_width, qkv_bias));
      v_proj_ = register_module("v_proj", MakeLinear(spec.n_embd, kv_width, qkv_bias));
    }
    o_proj_ = register_module("o_proj", MakeLinear(q_width, spec.n_embd, o_bias_));
    if (info.qk_norm) {
      q_norm_ =
          register_module("q_norm", RmsNorm(head_dim_, spec.layer_norm_epsilon, info.gemma_norm));
      k_norm_ =
          register_module("k_norm", RmsNorm(head_dim_, spec.layer_norm_epsilon, info.gemma_norm));
    }
    shape_.causal = true;
    if (spec.query_pre_attn_scalar > 0) shape_.scale = 1.0 / std::sqrt(spec.query_pre_attn_scalar);
    shape_.softcap = spec.attn_logit_softcapping;
    shape_.window = spec.SlidingLayer(layer) ? spec.sliding_window : 0;
    // One per head (this rank's heads under tensor parallelism).
    if (info.attention_sinks) sinks_ = register_parameter("sinks", torch::empty({heads_}));
  }

  // x [B, T, C] (under sequence parallelism this rank's slice of T).
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) {
    const torch::Tensor input = ColumnParallelInput(x, options.tp);
    const int64_t B = input.size(0), T = input.size(1);
    // Recomputed per layer rather than passed in, so that a checkpointed
    // layer is a function of x alone; [T, rotary_dim] is cheap next to the
    // layer's matrix products. Under context parallelism the rank's tokens
    // sit at their places in the whole sequence.
    const auto [cos, sin] = RotaryCosSin(ContextParallelPositions(options.cp, T, input.device()),
                                         WholeSequenceLength(options.cp, T), spec_, rotary_dim_);
    torch::Tensor q, k, v;
    if (qkv_proj_) {
      // [q; k; v] rows, all heads or this rank's share of each.
      const torch::Tensor qkv = LayerLinear(qkv_proj_, input, options);
      const int64_t unit = qkv.size(-1) / (heads_ + 2 * kv_heads_);
      std::vector<torch::Tensor> parts =
          qkv.split_with_sizes({unit * heads_, unit * kv_heads_, unit * kv_heads_}, /*dim=*/-1);
      q = parts[0], k = parts[1], v = parts[2];
    } else {
      q = LayerLinear(q_proj_, input, options), k = LayerLinear(k_proj_, input, options),
      v = LayerLinear(v_proj_, input, options);
    }
    // Head counts from the widths: all heads, or this rank's under tensor
    // parallelism.
    auto heads = [&](const torch::Tensor& t) {
      return t.view({B, T, t.size(2) / head_dim_, head_dim_}).transpose(1, 2);
    };
    q = heads(q), k = heads(k), v = heads(v);
    if (q_norm_) {
      // One weight for every head: this rank's heads give part of its
      // gradient under tensor parallelism.
      q = q_norm_->Apply(q, WeightSharedAcrossRanks(q_norm_->weight(), options.tp));
      k = k_norm_->Apply(k, WeightSharedAcrossRanks(k_norm_->weight(), options.tp));
    }
    // In the projections' dtype, as transformers does (cos and sin are cast
    // to it), so that bf16 weights give bf16 q and k.
    auto rotate = [&](const torch::Tensor& t) {
      const torch::Tensor c = cos.to(t.scalar_type()), s = sin.to(t.scalar_type());
      if (rotary_dim_ == head_dim_) return t * c + RotateHalf(t) * s;
      const torch::Tensor turned = t.narrow(-1, 0, rotary_dim_);
      return torch::cat(
          {turned * c + RotateHalf(turned) * s, t.narrow(-1, rotary_dim_, head_dim_ - rotary_dim_)},
          /*dim=*/-1);
    };
    AttentionShape shape = shape_;
    shape.sinks = sinks_;
    return RowParallelLinear(Attend(rotate(q), rotate(k), v, shape, options), o_proj_->weight,
                             o_bias_ ? o_proj_->bias : torch::Tensor(), options);
  }

 private:
  int64_t head_dim_, rotary_dim_, heads_, kv_heads_;
  bool o_bias_;
  ModelSpec spec_;
  AttentionShape shape_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, qkv_proj_{nullptr},
      o_proj_{nullptr};
  RmsNorm q_norm_{nullptr}, k_norm_{nullptr};
  torch::Tensor sinks_;  // undefined without attention sinks
};

class DecoderMlpImpl : public torch::nn::Module {
 public:
  explicit DecoderMlpImpl(const ModelSpec& spec) : act_(spec.hidden_act), bias_(spec.mlp_bias) {
    if (spec.Info().fused_projections) {
      gate_up_proj_ = register_module("gate_up_proj",
                                      MakeLinear(spec.n_embd, 2 * int64_t{spec.n_inner}, bias_));
    } else {
      gate_proj_ = register_module("gate_proj", MakeLinear(spec.n_embd, spec.n_inner, bias_));
      up_proj_ = register_module("up_proj", MakeLinear(spec.n_embd, spec.n_inner, bias_));
    }
    down_proj_ = register_module("down_proj", MakeLinear(spec.n_inner, spec.n_embd, bias_));
  }

  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) {
    const torch::Tensor input = ColumnParallelInput(x, options.tp);
    torch::Tensor gate, up;
    if (gate_up_proj_) {
      // [gate; up] rows, or this rank's half of each.
      std::vector<torch::Tensor> halves =
          LayerLinear(gate_up_proj_, input, options).chunk(2, /*dim=*/-1);
      gate = halves[0], up = halves[1];
    } else {
      gate = LayerLinear(gate_proj_, input, options), up = LayerLinear(up_proj_, input, options);
    }
    return RowParallelLinear(Activation(act_, gate) * up, down_proj_->weight,
                             bias_ ? down_proj_->bias : torch::Tensor(), options);
  }

 private:
  std::string act_;
  bool bias_;
  torch::nn::Linear gate_proj_{nullptr}, up_proj_{nullptr}, gate_up_proj_{nullptr},
      down_proj_{nullptr};
};

class DecoderBlock : public CheckpointableBlock {
 public:
  DecoderBlock(const ModelSpec& spec, int layer) {
    const ModelFamilyInfo& info = spec.Info();
    if (info.latent_attention) {
      latent_attn_ = register_module("self_attn", std::make_shared<LatentAttentionImpl>(spec));
    } else {
      self_attn_ =
          register_module("self_attn", std::make_shared<DecoderAttentionImpl>(spec, layer));
    }
    if (spec.ExpertLayer(layer)) {
      moe_ = register_module("mlp", std::make_shared<SparseMoeImpl>(spec));
    } else {
      mlp_ = register_module("mlp", std::make_shared<DecoderMlpImpl>(spec));
    }
    auto norm = [&](const char* name) {
      return register_module(name, RmsNorm(spec.n_embd, spec.layer_norm_epsilon, info.gemma_norm));
    };
    input_layernorm_ = norm("input_layernorm");
    post_attention_layernorm_ = norm("post_attention_layernorm");
    if (info.sandwich_norm) {
      pre_feedforward_layernorm_ = norm("pre_feedforward_layernorm");
      post_feedforward_layernorm_ = norm("post_feedforward_layernorm");
    }
  }

  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) override {
    const torch::Tensor normed = input_layernorm_->forward(x);
    const torch::Tensor attention = latent_attn_ ? latent_attn_->Forward(normed, options)
                                                 : self_attn_->Forward(normed, options);
    if (pre_feedforward_layernorm_) {  // gemma2: norms on both sides of each part
      const torch::Tensor h = x + post_attention_layernorm_->forward(attention);
      return h + post_feedforward_layernorm_->forward(
                     Mlp(pre_feedforward_layernorm_->forward(h), options));
    }
    const torch::Tensor h = x + attention;
    return h + Mlp(post_attention_layernorm_->forward(h), options);
  }

 private:
  torch::Tensor Mlp(const torch::Tensor& x, const RunOptions& options) {
    return moe_ ? moe_->Forward(x, options) : mlp_->Forward(x, options);
  }

  std::shared_ptr<DecoderAttentionImpl> self_attn_;
  std::shared_ptr<LatentAttentionImpl> latent_attn_;
  std::shared_ptr<DecoderMlpImpl> mlp_;
  std::shared_ptr<SparseMoeImpl> moe_;
  RmsNorm input_layernorm_{nullptr}, post_attention_layernorm_{nullptr},
      pre_feedforward_layernorm_{nullptr}, post_feedforward_layernorm_{nullptr};
};

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, bool offset) : eps_(eps), offset_(offset) {
  weight_ = register_parameter("weight", offset ? torch::zeros({dim}) : torch::ones({dim}));
}

torch::Tensor RmsNormImpl::Apply(const torch::Tensor& x, const torch::Tensor& weight) const {
  const torch::Tensor x32 = x.to(torch::kFloat);
  const torch::Tensor normed = x32 * (x32.pow(2).mean(/*dim=*/-1, /*keepdim=*/true) + eps_).rsqrt();
  if (offset_) return (normed * (1.0 + weight.to(torch::kFloat))).to(x.scalar_type());
  return weight * normed.to(x.scalar_type());
}

DecoderImpl::DecoderImpl(const ModelSpec& spec, uint64_t seed) : TrainableModel(spec) {
  const ModelFamilyInfo& info = spec.Info();
  // "model" is LlamaModel / Qwen2Model / ...; lm_head sits beside it.
  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens_ =
      model->register_module("embed_tokens", torch::nn::Embedding(spec.vocab_size, spec.n_embd));
  layers_ = model->register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < spec.n_layer; ++i)
    layers_->push_back(std::make_shared<DecoderBlock>(spec, i));
  norm_ = model->register_module("norm",
                                 RmsNorm(spec.n_embd, spec.layer_norm_epsilon, info.gemma_norm));
  if (!spec.tie_word_embeddings) {
    lm_head_ = register_module("lm_head", NoBiasLinear(spec.n_embd, spec.vocab_size));
  }
  InitLikeHuggingFace(*this, seed);
  if (info.gemma_norm) {
    // (1 + w) norms start at w = 0, as transformers initialises them.
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters()) {
      if (absl::StrContains(item.key(), "norm")) item.value().zero_();
    }
  }
}

torch::Tensor DecoderImpl::Logits(const torch::Tensor& tokens, const RunOptions& options) {
  torch::Tensor x = Embed(tokens, options);
  for (int i = 0; i < static_cast<int>(layers_->size()); ++i) x = RunLayer(i, x, options);
  return Head(x, options);
}

torch::Tensor DecoderImpl::Embed(const torch::Tensor& tokens, const RunOptions& options) {
  TORCH_CHECK(tokens.size(1) <= spec().MaxSeqLen(), "sequence length ", tokens.size(1),
              " exceeds max_position_embeddings ", spec().n_positions);
  torch::Tensor x = VocabParallelEmbedding(tokens, embed_tokens_->weight, options.tp);
  if (spec().Info().gemma_norm) {
    // sqrt(hidden) rounded to the embedding's dtype, as transformers does.
    x = x * torch::scalar_tensor(std::sqrt(double(spec().n_embd)), x.options());
  }
  return x;
}

torch::Tensor DecoderImpl::RunLayer(int layer, const torch::Tensor& x, const RunOptions& options) {
  return RunBlock(*layers_[layer]->as<DecoderBlock>(), x, options, layer,
                  static_cast<int>(layers_->size()));
}

torch::Tensor DecoderImpl::Head(const torch::Tensor& x, const RunOptions& options) {
  // Under tensor parallelism: this rank's vocabulary columns.
  torch::Tensor logits = at::linear(ColumnParallelInput(norm_->forward(x), options.tp),
                                    lm_head_ ? lm_head_->weight : embed_tokens_->weight);
  const double cap = spec().final_logit_softcapping;
  if (cap > 0) logits = (logits / cap).tanh() * cap;
  return logits;
}

std::vector<torch::Tensor> DecoderImpl::EmbeddingParameters() { return {embed_tokens_->weight}; }

std::vector<torch::Tensor> DecoderImpl::HeadParameters() {
  return {norm_->weight(), lm_head_ ? lm_head_->weight : embed_tokens_->weight};
}

namespace {

// The routed experts' stacked weights [experts, ...] (gpt_oss's biases too).
bool IsExpertWeight(const std::string& name) {
  for (const char* suffix : {"experts.gate_up_proj", "experts.down_proj",
                             "experts.gate_up_proj_bias", "experts.down_proj_bias"}) {
    if (absl::EndsWith(name, suffix)) return true;
  }
  return false;
}

}  // namespace

std::vector<torch::Tensor> DecoderImpl::ExpertParameters() {
  std::vector<torch::Tensor> out;
  for (const auto& item : named_parameters()) {
    if (IsExpertWeight(item.key())) out.push_back(item.value());
  }
  return out;
}

absl::Status DecoderImpl::ShardExpertParallel(const ExpertParallelShard& ep) {
  if (!spec().Info().experts) return TrainableModel::ShardExpertParallel(ep);
  using Split = TensorParallelSplit;
  ShardParameters(*this, ep.rank, ep.size, [](const std::string& name) {
    return IsExpertWeight(name) ? Split{Split::kRows, 1} : Split{};
  });
  return absl::OkStatus();
}

absl::Status DecoderImpl::ShardTensorParallel(const TensorParallelShard& tp) {
  if (!spec().Info().tensor_parallel) return TrainableModel::ShardTensorParallel(tp);
  using Split = TensorParallelSplit;
  const int64_t padded_vocab = tp.vocab_per_rank * tp.size;
  const int64_t head = spec().HeadDim();
  const int64_t q_rows = int64_t{spec().n_head} * head, kv_rows = int64_t{spec().n_kv_head} * head;
  const bool transposed_experts = spec().Info().clamped_swiglu;
  ShardParameters(*this, tp, [&](const std::string& name) {
    auto ends = [&](const char* suffix) { return absl::EndsWith(name, suffix); };
    // gpt_oss's experts, stored as x @ W: gate_up_proj [E, hidden, 2I] and
    // its bias [E, 2I] by contiguous column blocks (whole interleaved
    // gate/up pairs), down_proj [E, I, hidden] by rows; down_proj_bias
    // replicated (SparseMoe adds it on the first rank).
    if (transposed_experts) {
      if (ends("experts.gate_up_proj")) {
        Split split{Split::kColumns, 1};
        split.first_dim = 1;
        return split;
      }
      if (ends("experts.gate_up_proj_bias")) return Split{Split::kColumns, 1};
      if (ends("experts.down_proj")) {
        Split split{Split::kRows, 1};
        split.first_dim = 1;
        return split;
      }
      if (ends("experts.down_proj_bias")) return Split{};
    }
    // Attention sinks: one per head, with their heads.
    if (ends("self_attn.sinks")) return Split{Split::kRows, 1};
    // Stacked experts [E, rows, columns]: each split like a dense MLP.
    if (ends("experts.gate_up_proj")) {
      Split split{Split::kRows, 2};
      split.first_dim = 1;
      return split;
    }
    if (ends("experts.down_proj")) {
      Split split{Split::kColumns, 1};
      split.first_dim = 1;
      return split;
    }
    if (ends("embed_tokens.weight") || name == "lm_head.weight") {
      return Split{Split::kRows, 1, padded_vocab};
    }
    if (ends("qkv_proj.weight") || ends("qkv_proj.bias")) {
      Split split{Split::kRows};
      split.blocks = {q_rows, kv_rows, kv_rows};
      return split;
    }
    if (ends("gate_up_proj.weight") || ends("gate_up_proj.bias")) return Split{Split::kRows, 2};
    // (q_b_proj and kv_b_proj: latent attention's per-head projections.)
    for (const char* column_parallel :
         {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "q_b_proj", "kv_b_proj"}) {
      if (ends(absl::StrCat(column_parallel, ".weight").c_str()) ||
          ends(absl::StrCat(column_parallel, ".bias").c_str())) {
        return Split{Split::kRows, 1};
      }
    }
    if (ends("o_proj.weight") || ends("down_proj.weight")) return Split{Split::kColumns, 1};
    return Split{};  // norms (q_norm, k_norm too), o and down biases
  });
  return absl::OkStatus();
}

}  // namespace autoaccel
