// Llama and Mixtral decoders in LibTorch, as transformers' LlamaForCausalLM
// and MixtralForCausalLM compute them (eager attention, no dropout):
//
//   embed_tokens -> n_layer x [x + attn(RMSNorm(x)), x + mlp(RMSNorm(x))]
//   -> RMSNorm -> lm_head (or the token embedding when tie_word_embeddings)
//
// - RMSNorm: x / sqrt(mean(x^2) + eps) computed in fp32, times a weight.
// - Attention: q, k, v, o projections without bias; grouped-query
//   (n_kv_head key/value heads, each shared by n_head / n_kv_head consecutive
//   query heads); rotary position embedding on q and k with transformers'
//   rotate_half convention (the head's first and second halves form the
//   rotated pairs; frequencies rope_theta^(-2i/head_dim)); causal.
// - llama MLP: down(silu(gate(x)) * up(x)) (SwiGLU).
// - mixtral MLP: a sparse mixture of num_local_experts SwiGLU experts. A
//   router (linear, no bias) scores the experts, softmax over all of them in
//   fp32, the top num_experts_per_tok are kept and their weights renormalised
//   to sum to 1; a token's output is the weighted sum of its experts'
//   outputs. No router jitter and no auxiliary load-balancing loss (as
//   transformers with output_router_logits false, its default).
//
// Parameter names are transformers 5's: "model.embed_tokens.weight",
// "model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.gate_proj.weight",
// "model.norm.weight", "lm_head.weight"; mixtral's MLP is
// "model.layers.0.mlp.gate.weight" [experts, hidden],
// "model.layers.0.mlp.experts.gate_up_proj" [experts, 2 * intermediate, hidden]
// (gate rows first, then up) and "model.layers.0.mlp.experts.down_proj"
// [experts, hidden, intermediate].
#ifndef AUTOACCEL_ENGINE_LLAMA_H_
#define AUTOACCEL_ENGINE_LLAMA_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "engine/model.h"
#include "search/model.h"

namespace autoaccel {

// Root-mean-square normalisation over the last dimension, as transformers'
// LlamaRMSNorm: the statistics in fp32, the result in the input's dtype,
// scaled by `weight` (which promotes it to the weight's dtype).
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  const torch::Tensor& weight() const { return weight_; }

 private:
  double eps_;
  torch::Tensor weight_;
};
TORCH_MODULE(RmsNorm);

// The family is spec.family: "llama" or "mixtral".
class LlamaImpl : public TrainableModel {
 public:
  // Initialised as transformers does (weights N(0, 0.02), RMSNorm weights 1)
  // from a generator seeded with `seed`. REQUIRES: spec.Validate() is OK and
  // the family is llama or mixtral (BuildModel checks both).
  LlamaImpl(const ModelSpec& spec, uint64_t seed);

  std::vector<torch::nn::Module*> Layers() override { return ModulesOf(layers_); }
  // llama: q/k/v, gate and up projections by output rows (whole heads),
  // o and down projections by input columns, embed_tokens and lm_head by
  // vocabulary rows. mixtral: not split (its experts would be).
  absl::Status ShardTensorParallel(const TensorParallelShard& tp) override;
  bool Staged() const override { return true; }
  torch::Tensor Embed(const torch::Tensor& tokens, const RunOptions& options) override;
  torch::Tensor RunLayer(int layer, const torch::Tensor& x, const RunOptions& options) override;
  torch::Tensor Head(const torch::Tensor& x, const RunOptions& options) override;
  std::vector<torch::Tensor> EmbeddingParameters() override;  // embed_tokens
  std::vector<torch::Tensor> HeadParameters() override;       // norm, lm_head (or embed_tokens)

 protected:
  torch::Tensor Logits(const torch::Tensor& tokens, const RunOptions& options) override;

 private:
  torch::nn::Embedding embed_tokens_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  RmsNorm norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};  // null when tied to embed_tokens
};
TORCH_MODULE(Llama);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_LLAMA_H_
