#include "engine/gpt.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include <cmath>
#include <limits>
#include <vector>

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Activation checkpointing of one block (LibTorch has no
// torch.utils.checkpoint). Function::apply runs forward() with grad mode off,
// so the block keeps no activations; backward() recomputes it with grad on,
// under the autocast state that the forward pass saw, and differentiates it.
// The block's parameters are inputs of the node, so the autograd engine
// accumulates their gradients as usual. Dropout is off, so no RNG state has to
// be replayed.
class CheckpointedBlock : public torch::autograd::Function<CheckpointedBlock> {
 public:
  // `block` must outlive the backward pass (the model owns it).
  static torch::Tensor forward(AutogradContext* ctx, GptBlockImpl* block, Attention attention,
                               const torch::Tensor& x, torch::TensorList params) {
    (void)params;  // inputs only so that their gradients flow
    const c10::DeviceType device_type = x.device().type();
    ctx->saved_data["block"] = reinterpret_cast<int64_t>(block);
    ctx->saved_data["attention"] = static_cast<int64_t>(attention);
    ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(device_type);
    ctx->saved_data["autocast_dtype"] =
        static_cast<int64_t>(at::autocast::get_autocast_dtype(device_type));
    ctx->save_for_backward({x});
    return block->Forward(x, attention);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* block = reinterpret_cast<GptBlockImpl*>(ctx->saved_data["block"].toInt());
    const auto attention = static_cast<Attention>(ctx->saved_data["attention"].toInt());
    const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    torch::Tensor y;
    {
      torch::AutoGradMode grad_mode(true);
      AutocastScope autocast(
          x.device().type(), ctx->saved_data["autocast"].toBool(),
          static_cast<c10::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
      y = block->Forward(x, attention);
    }
    variable_list inputs{x};
    for (const torch::Tensor& p : block->parameters()) inputs.push_back(p);
    variable_list grads = torch::autograd::grad({y}, inputs, {grad_outputs[0]},
                                                /*retain_graph=*/false, /*create_graph=*/false,
                                                /*allow_unused=*/true);
    // One entry per forward argument, params flattened: block, attention, x, params...
    variable_list result{torch::Tensor(), torch::Tensor()};
    result.insert(result.end(), grads.begin(), grads.end());
    return result;
  }
};

torch::nn::LayerNorm MakeLayerNorm(const ModelSpec& spec) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({spec.n_embd}).eps(spec.layer_norm_epsilon));
}

}  // namespace

GptAttentionImpl::GptAttentionImpl(const ModelSpec& spec) : n_head_(spec.n_head) {
  c_attn_ = register_module("c_attn", torch::nn::Linear(spec.n_embd, 3 * spec.n_embd));
  c_proj_ = register_module("c_proj", torch::nn::Linear(spec.n_embd, spec.n_embd));
}

torch::Tensor GptAttentionImpl::Forward(const torch::Tensor& x, Attention attention) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const int64_t head_dim = C / n_head_;
  // [B, T, 3C] -> 3 x [B, n_head, T, head_dim]
  std::vector<torch::Tensor> qkv = c_attn_->forward(x).split(C, /*dim=*/2);
  auto heads = [&](const torch::Tensor& t) {
    return t.view({B, T, n_head_, head_dim}).transpose(1, 2);
  };
  const torch::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  torch::Tensor y;
  if (attention == Attention::kSdpa) {
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                         /*is_causal=*/true);
  } else {
    // The explicit version, as Hugging Face's eager attention computes it.
    const torch::Tensor future =
        torch::ones({T, T}, x.options().dtype(torch::kBool)).triu(/*diagonal=*/1);
    torch::Tensor scores = q.matmul(k.transpose(-2, -1)).mul(1.0 / std::sqrt(double(head_dim)));
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    y = scores.softmax(/*dim=*/-1).matmul(v);
  }
  return c_proj_->forward(y.transpose(1, 2).contiguous().view({B, T, C}));
}

GptMlpImpl::GptMlpImpl(const ModelSpec& spec) {
  c_fc_ = register_module("c_fc", torch::nn::Linear(spec.n_embd, spec.n_inner));
  c_proj_ = register_module("c_proj", torch::nn::Linear(spec.n_inner, spec.n_embd));
}

torch::Tensor GptMlpImpl::Forward(const torch::Tensor& x) {
  return c_proj_->forward(torch::gelu(c_fc_->forward(x), /*approximate=*/"tanh"));
}

GptBlockImpl::GptBlockImpl(const ModelSpec& spec) {
  ln_1_ = register_module("ln_1", MakeLayerNorm(spec));
  attn_ = register_module("attn", GptAttention(spec));
  ln_2_ = register_module("ln_2", MakeLayerNorm(spec));
  mlp_ = register_module("mlp", GptMlp(spec));
}

torch::Tensor GptBlockImpl::Forward(const torch::Tensor& x, Attention attention) {
  const torch::Tensor h = x + attn_->Forward(ln_1_->forward(x), attention);
  return h + mlp_->Forward(ln_2_->forward(h));
}

GptImpl::GptImpl(const ModelSpec& spec, uint64_t seed) : spec_(spec) {
  wte_ = register_module("wte", torch::nn::Embedding(spec.vocab_size, spec.n_embd));
  wpe_ = register_module("wpe", torch::nn::Embedding(spec.n_positions, spec.n_embd));
  h_ = register_module("h", torch::nn::ModuleList());
  for (int i = 0; i < spec.n_layer; ++i) h_->push_back(GptBlock(spec));
  ln_f_ = register_module("ln_f", MakeLayerNorm(spec));

  // Hugging Face GPT2PreTrainedModel._init_weights, from our own generator so
  // that the global RNG plays no part.
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const double proj_std = 0.02 / std::sqrt(2.0 * spec.n_layer);
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    const bool is_norm = name.find("ln_") != std::string::npos;
    if (is_bias) {
      p.zero_();
    } else if (is_norm) {
      p.fill_(1.0);
    } else if (name.find("c_proj.weight") != std::string::npos) {
      p.normal_(0.0, proj_std, gen);
    } else {
      p.normal_(0.0, 0.02, gen);
    }
  }
}

torch::Tensor GptImpl::Forward(const torch::Tensor& tokens, const GptRunOptions& options) {
  const int64_t T = tokens.size(1);
  TORCH_CHECK(T <= spec_.n_positions, "sequence length ", T, " exceeds n_positions ",
              spec_.n_positions);
  const torch::Tensor positions = torch::arange(T, tokens.options().dtype(torch::kLong));
  torch::Tensor x = wte_->forward(tokens) + wpe_->forward(positions);
  for (const auto& module : *h_) {
    auto* block = module->as<GptBlockImpl>();
    if (options.checkpointing == Checkpointing::kFull) {
      const std::vector<torch::Tensor> params = block->parameters();
      x = CheckpointedBlock::apply(block, options.attention, x, torch::TensorList(params));
    } else {
      x = block->Forward(x, options.attention);
    }
  }
  x = ln_f_->forward(x);
  return at::linear(x, wte_->weight);  // tied LM head
}

torch::Tensor GptImpl::Loss(const torch::Tensor& input, const torch::Tensor& target,
                            const GptRunOptions& options) {
  const torch::Tensor logits = Forward(input, options);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat),
                                target.reshape({-1}));
}

AutocastScope::AutocastScope(c10::DeviceType device_type, bool enabled, c10::ScalarType dtype)
    : device_type_(device_type),
      previous_enabled_(at::autocast::is_autocast_enabled(device_type)),
      previous_dtype_(at::autocast::get_autocast_dtype(device_type)) {
  at::autocast::set_autocast_enabled(device_type_, enabled);
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace autoaccel
