#include "engine/gpt.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/context_parallel.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

torch::nn::LayerNorm MakeLayerNorm(const ModelSpec& spec) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({spec.n_embd}).eps(spec.layer_norm_epsilon));
}

}  // namespace

GptAttentionImpl::GptAttentionImpl(const ModelSpec& spec) : head_dim_(spec.n_embd / spec.n_head) {
  c_attn_ = register_module("c_attn", torch::nn::Linear(spec.n_embd, 3 * spec.n_embd));
  c_proj_ = register_module("c_proj", torch::nn::Linear(spec.n_embd, spec.n_embd));
}

torch::Tensor GptAttentionImpl::Forward(const torch::Tensor& x, const RunOptions& options) {
  // [B, T, 3C'] -> 3 x [B, heads, T, head_dim], C' = heads * head_dim: all
  // heads, or this rank's under tensor parallelism (whose input is the whole
  // sequence also when x holds only this rank's slice of it).
  const torch::Tensor fused = LayerLinear(c_attn_, ColumnParallelInput(x, options.tp), options);
  const int64_t B = fused.size(0), T = fused.size(1);
  const int64_t width = fused.size(2) / 3;
  std::vector<torch::Tensor> qkv = fused.split(width, /*dim=*/2);
  auto heads = [&](const torch::Tensor& t) {
    return t.view({B, T, width / head_dim_, head_dim_}).transpose(1, 2);
  };
  return RowParallelLinear(
      Attend(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), /*causal=*/true, options),
      c_proj_->weight, c_proj_->bias, options);
}

GptMlpImpl::GptMlpImpl(const ModelSpec& spec) {
  c_fc_ = register_module("c_fc", torch::nn::Linear(spec.n_embd, spec.n_inner));
  c_proj_ = register_module("c_proj", torch::nn::Linear(spec.n_inner, spec.n_embd));
}

torch::Tensor GptMlpImpl::Forward(const torch::Tensor& x, const RunOptions& options) {
  const torch::Tensor h = torch::gelu(
      LayerLinear(c_fc_, ColumnParallelInput(x, options.tp), options), /*approximate=*/"tanh");
  return RowParallelLinear(h, c_proj_->weight, c_proj_->bias, options);
}

GptBlockImpl::GptBlockImpl(const ModelSpec& spec) {
  ln_1_ = register_module("ln_1", MakeLayerNorm(spec));
  attn_ = register_module("attn", GptAttention(spec));
  ln_2_ = register_module("ln_2", MakeLayerNorm(spec));
  mlp_ = register_module("mlp", GptMlp(spec));
}

torch::Tensor GptBlockImpl::Forward(const torch::Tensor& x, const RunOptions& options) {
  const torch::Tensor h = x + attn_->Forward(ln_1_->forward(x), options);
  return h + mlp_->Forward(ln_2_->forward(h), options);
}

GptImpl::GptImpl(const ModelSpec& spec, uint64_t seed) : TrainableModel(spec) {
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

torch::Tensor GptImpl::Logits(const torch::Tensor& tokens, const RunOptions& options) {
  torch::Tensor x = Embed(tokens, options);
  for (int i = 0; i < static_cast<int>(h_->size()); ++i) x = RunLayer(i, x, options);
  return Head(x, options);
}

torch::Tensor GptImpl::Embed(const torch::Tensor& tokens, const RunOptions& options) {
  const int64_t T = tokens.size(1);
  TORCH_CHECK(T <= spec().n_positions, "sequence length ", T, " exceeds n_positions ",
              spec().n_positions);
  // Under context parallelism this rank's tokens sit at their places in the
  // whole sequence; under sequence parallelism: this rank's slice of them.
  const torch::Tensor positions = ContextParallelPositions(options.cp, T, tokens.device());
  return VocabParallelEmbedding(tokens, wte_->weight, options.tp) +
         SequenceSlice(wpe_->forward(positions), 0, options.tp);
}

torch::Tensor GptImpl::RunLayer(int layer, const torch::Tensor& x, const RunOptions& options) {
  return RunBlock(*h_[layer]->as<GptBlockImpl>(), x, options, layer, static_cast<int>(h_->size()));
}

torch::Tensor GptImpl::Head(const torch::Tensor& x, const RunOptions& options) {
  // Tied LM head; under tensor parallelism this rank's vocabulary columns.
  return at::linear(ColumnParallelInput(ln_f_->forward(x), options.tp), wte_->weight);
}

std::vector<torch::Tensor> GptImpl::EmbeddingParameters() { return {wte_->weight, wpe_->weight}; }

std::vector<torch::Tensor> GptImpl::HeadParameters() {
  return {ln_f_->weight, ln_f_->bias, wte_->weight};
}

absl::Status GptImpl::ShardTensorParallel(const TensorParallelShard& tp) {
  using Split = TensorParallelSplit;
  ShardParameters(*this, tp, [&](const std::string& name) {
    auto ends = [&](const char* suffix) { return absl::EndsWith(name, suffix); };
    if (name == "wte.weight") return Split{Split::kRows, 1, tp.vocab_per_rank * tp.size};
    if (ends("attn.c_attn.weight") || ends("attn.c_attn.bias")) return Split{Split::kRows, 3};
    if (ends("mlp.c_fc.weight") || ends("mlp.c_fc.bias")) return Split{Split::kRows, 1};
    if (ends("c_proj.weight")) return Split{Split::kColumns, 1};
    return Split{};
  });
  return absl::OkStatus();
}

}  // namespace autoaccel
