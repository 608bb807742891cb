#include "engine/llama.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

torch::nn::Linear NoBiasLinear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

// cos and sin of the rotary angles, [T, head_dim] fp32: position t, pair i
// (dimensions i and i + head_dim/2) turns by t * theta^(-2i/head_dim).
std::pair<torch::Tensor, torch::Tensor> RotaryCosSin(int64_t T, int64_t head_dim, double theta,
                                                     const torch::Device& device) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const torch::Tensor inv_freq =
      at::pow(theta, torch::arange(0, head_dim, 2, options) / double(head_dim)).reciprocal();
  const torch::Tensor angles = torch::arange(T, options).unsqueeze(1) * inv_freq.unsqueeze(0);
  const torch::Tensor both_halves = torch::cat({angles, angles}, /*dim=*/-1);
  return {both_halves.cos(), both_halves.sin()};
}

// [x1, x2] -> [-x2, x1] over the last dimension's halves.
torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, /*dim=*/-1);
}

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const ModelSpec& spec)
      : head_dim_(spec.n_embd / spec.n_head), rope_theta_(spec.rope_theta) {
    const int64_t n_head = spec.n_head, n_kv_head = spec.n_kv_head;
    q_proj_ = register_module("q_proj", NoBiasLinear(spec.n_embd, n_head * head_dim_));
    k_proj_ = register_module("k_proj", NoBiasLinear(spec.n_embd, n_kv_head * head_dim_));
    v_proj_ = register_module("v_proj", NoBiasLinear(spec.n_embd, n_kv_head * head_dim_));
    o_proj_ = register_module("o_proj", NoBiasLinear(n_head * head_dim_, spec.n_embd));
  }

  // x [B, T, C] (under sequence parallelism this rank's slice of T).
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) {
    const torch::Tensor input = ColumnParallelInput(x, options.tp);
    const int64_t B = input.size(0), T = input.size(1);
    // Recomputed per layer rather than passed in, so that a checkpointed
    // layer is a function of x alone; [T, head_dim] is cheap next to the
    // layer's matrix products.
    const auto [cos, sin] = RotaryCosSin(T, head_dim_, rope_theta_, input.device());
    // Head counts from the projections' widths: all heads, or this rank's
    // under tensor parallelism.
    auto heads = [&](const torch::Tensor& t) {
      return t.view({B, T, t.size(2) / head_dim_, head_dim_}).transpose(1, 2);
    };
    // In the projections' dtype, as transformers does (cos and sin are cast
    // to it), so that bf16 weights give bf16 q and k.
    auto rotate = [&](const torch::Tensor& t) {
      return t * cos.to(t.scalar_type()) + RotateHalf(t) * sin.to(t.scalar_type());
    };
    const torch::Tensor q = rotate(heads(q_proj_->forward(input)));
    const torch::Tensor k = rotate(heads(k_proj_->forward(input)));
    const torch::Tensor v = heads(v_proj_->forward(input));
    return RowParallelLinear(Attend(q, k, v, /*causal=*/true, options), o_proj_->weight, {},
                             options.tp);
  }

 private:
  int64_t head_dim_;
  double rope_theta_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
};

class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const ModelSpec& spec) {
    gate_proj_ = register_module("gate_proj", NoBiasLinear(spec.n_embd, spec.n_inner));
    up_proj_ = register_module("up_proj", NoBiasLinear(spec.n_embd, spec.n_inner));
    down_proj_ = register_module("down_proj", NoBiasLinear(spec.n_inner, spec.n_embd));
  }

  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) {
    const torch::Tensor input = ColumnParallelInput(x, options.tp);
    return RowParallelLinear(at::silu(gate_proj_->forward(input)) * up_proj_->forward(input),
                             down_proj_->weight, {}, options.tp);
  }

 private:
  torch::nn::Linear gate_proj_{nullptr}, up_proj_{nullptr}, down_proj_{nullptr};
};

class MixtralMoeImpl : public torch::nn::Module {
 public:
  explicit MixtralMoeImpl(const ModelSpec& spec)
      : num_experts_(spec.num_local_experts), top_k_(spec.num_experts_per_tok) {
    gate_ = register_module("gate", NoBiasLinear(spec.n_embd, num_experts_));
    auto experts = register_module("experts", std::make_shared<torch::nn::Module>());
    gate_up_proj_ = experts->register_parameter(
        "gate_up_proj", torch::empty({num_experts_, 2 * int64_t{spec.n_inner}, spec.n_embd}));
    down_proj_ = experts->register_parameter(
        "down_proj", torch::empty({num_experts_, spec.n_embd, spec.n_inner}));
  }

  // x [B, T, C] -> [B, T, C].
  torch::Tensor Forward(const torch::Tensor& x) {
    const torch::Tensor flat = x.reshape({-1, x.size(-1)});
    const torch::Tensor probs = gate_->forward(flat).to(torch::kFloat).softmax(/*dim=*/-1);
    auto [top_weights, top_experts] = probs.topk(top_k_, /*dim=*/-1);  // [N, k]
    top_weights = top_weights / top_weights.sum(/*dim=*/-1, /*keepdim=*/true);
    torch::Tensor out = torch::zeros_like(flat);
    for (int64_t e = 0; e < num_experts_; ++e) {
      // (token, slot) pairs routed to expert e; a token picks an expert once.
      const torch::Tensor routed = (top_experts == e).nonzero();
      if (routed.size(0) == 0) continue;
      const torch::Tensor token = routed.select(1, 0), slot = routed.select(1, 1);
      const std::vector<torch::Tensor> gate_up =
          at::linear(flat.index_select(0, token), gate_up_proj_[e]).chunk(2, /*dim=*/-1);
      const torch::Tensor y = at::linear(at::silu(gate_up[0]) * gate_up[1], down_proj_[e]) *
                              top_weights.index({token, slot}).unsqueeze(-1);
      out.index_add_(0, token, y.to(out.scalar_type()));
    }
    return out.view(x.sizes());
  }

 private:
  int64_t num_experts_, top_k_;
  torch::nn::Linear gate_{nullptr};
  torch::Tensor gate_up_proj_, down_proj_;
};

class LlamaBlock : public CheckpointableBlock {
 public:
  explicit LlamaBlock(const ModelSpec& spec) {
    self_attn_ = register_module("self_attn", std::make_shared<LlamaAttentionImpl>(spec));
    if (spec.family == "mixtral") {
      moe_ = register_module("mlp", std::make_shared<MixtralMoeImpl>(spec));
    } else {
      mlp_ = register_module("mlp", std::make_shared<LlamaMlpImpl>(spec));
    }
    input_layernorm_ =
        register_module("input_layernorm", RmsNorm(spec.n_embd, spec.layer_norm_epsilon));
    post_attention_layernorm_ =
        register_module("post_attention_layernorm", RmsNorm(spec.n_embd, spec.layer_norm_epsilon));
  }

  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) override {
    const torch::Tensor h = x + self_attn_->Forward(input_layernorm_->forward(x), options);
    const torch::Tensor normed = post_attention_layernorm_->forward(h);
    return h + (moe_ ? moe_->Forward(normed) : mlp_->Forward(normed, options));
  }

 private:
  std::shared_ptr<LlamaAttentionImpl> self_attn_;
  std::shared_ptr<LlamaMlpImpl> mlp_;
  std::shared_ptr<MixtralMoeImpl> moe_;
  RmsNorm input_layernorm_{nullptr}, post_attention_layernorm_{nullptr};
};

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const torch::Tensor x32 = x.to(torch::kFloat);
  const torch::Tensor normed = x32 * (x32.pow(2).mean(/*dim=*/-1, /*keepdim=*/true) + eps_).rsqrt();
  return weight_ * normed.to(x.scalar_type());
}

LlamaImpl::LlamaImpl(const ModelSpec& spec, uint64_t seed) : TrainableModel(spec) {
  // "model" is LlamaModel / MixtralModel; lm_head sits beside it.
  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens_ =
      model->register_module("embed_tokens", torch::nn::Embedding(spec.vocab_size, spec.n_embd));
  layers_ = model->register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < spec.n_layer; ++i) layers_->push_back(std::make_shared<LlamaBlock>(spec));
  norm_ = model->register_module("norm", RmsNorm(spec.n_embd, spec.layer_norm_epsilon));
  if (!spec.tie_word_embeddings) {
    lm_head_ = register_module("lm_head", NoBiasLinear(spec.n_embd, spec.vocab_size));
  }
  InitLikeHuggingFace(*this, seed);
}

torch::Tensor LlamaImpl::Logits(const torch::Tensor& tokens, const RunOptions& options) {
  torch::Tensor x = Embed(tokens, options);
  for (int i = 0; i < static_cast<int>(layers_->size()); ++i) x = RunLayer(i, x, options);
  return Head(x, options);
}

torch::Tensor LlamaImpl::Embed(const torch::Tensor& tokens, const RunOptions& options) {
  TORCH_CHECK(tokens.size(1) <= spec().n_positions, "sequence length ", tokens.size(1),
              " exceeds max_position_embeddings ", spec().n_positions);
  return VocabParallelEmbedding(tokens, embed_tokens_->weight, options.tp);
}

torch::Tensor LlamaImpl::RunLayer(int layer, const torch::Tensor& x, const RunOptions& options) {
  return RunBlock(*layers_[layer]->as<LlamaBlock>(), x, options, layer,
                  static_cast<int>(layers_->size()));
}

torch::Tensor LlamaImpl::Head(const torch::Tensor& x, const RunOptions& options) {
  // Under tensor parallelism: this rank's vocabulary columns.
  return at::linear(ColumnParallelInput(norm_->forward(x), options.tp),
                    lm_head_ ? lm_head_->weight : embed_tokens_->weight);
}

std::vector<torch::Tensor> LlamaImpl::EmbeddingParameters() { return {embed_tokens_->weight}; }

std::vector<torch::Tensor> LlamaImpl::HeadParameters() {
  return {norm_->weight(), lm_head_ ? lm_head_->weight : embed_tokens_->weight};
}

absl::Status LlamaImpl::ShardTensorParallel(const TensorParallelShard& tp) {
  if (spec().family != "llama") return TrainableModel::ShardTensorParallel(tp);
  using Split = TensorParallelSplit;
  const int64_t padded_vocab = tp.vocab_per_rank * tp.size;
  ShardParameters(*this, tp, [&](const std::string& name) {
    auto ends = [&](const char* suffix) { return absl::EndsWith(name, suffix); };
    if (ends("embed_tokens.weight") || name == "lm_head.weight") {
      return Split{Split::kRows, 1, padded_vocab};
    }
    if (ends("q_proj.weight") || ends("k_proj.weight") || ends("v_proj.weight") ||
        ends("gate_proj.weight") || ends("up_proj.weight")) {
      return Split{Split::kRows, 1};
    }
    if (ends("o_proj.weight") || ends("down_proj.weight")) return Split{Split::kColumns, 1};
    return Split{};
  });
  return absl::OkStatus();
}

}  // namespace autoaccel
