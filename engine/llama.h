// The Llama-style decoder in LibTorch: one network for every family whose
// row in spec/model_families.h says Network::kDecoder (llama, mistral,
// mixtral, qwen2, qwen3, phi3, gemma, gemma2, qwen3_moe, deepseek_v3),
// parameterised by the row's
// features and the ModelSpec's fields, computed as transformers'
// *ForCausalLM does (eager attention, no dropout):
//
//   embed_tokens (x sqrt(hidden) for gemma) -> n_layer x layer
//   -> RMSNorm -> lm_head (or the token embedding when tie_word_embeddings)
//   -> final_logit_softcapping (gemma2: cap * tanh(logits / cap))
//
//   layer:          x + attn(RMSNorm(x)), then h + mlp(RMSNorm(h))
//   sandwich_norm:  x + RMSNorm(attn(RMSNorm(x))), then
//                   h + RMSNorm(mlp(RMSNorm(h)))      (gemma2)
//
// - RMSNorm: x / sqrt(mean(x^2) + eps) computed in fp32, cast back to the
//   input's dtype, times a weight (Llama); gemma_norm: times (1 + weight) in
//   fp32, then cast (weights initialised to 0).
// - Attention: q, k, v, o projections (phi3: one fused qkv_proj, rows
//   [q; k; v]), biases on q, k, v for qwen2 or attention_bias, on o for
//   attention_bias; grouped-query (n_kv_head key/value heads, each shared by
//   n_head / n_kv_head consecutive query heads); head size HeadDim(), which
//   need not be hidden / heads; qwen3: RMSNorm over each head's q and k
//   (q_norm, k_norm) before the rotary embedding; rotary position embedding
//   on q and k with transformers' rotate_half convention over the first
//   HeadDim() * partial_rotary_factor dimensions (frequencies
//   rope_theta^(-2i/d), scaled by rope_type: model_spec.h); scores scaled
//   by 1/sqrt(query_pre_attn_scalar or head size), soft-capped
//   (attn_logit_softcapping), causal, and on sliding layers limited to the
//   last sliding_window positions (AttentionShape).
// - MLP: down(act(gate(x)) * up(x)) with act silu, gelu or gelu tanh (phi3:
//   one fused gate_up_proj, rows [gate; up]); biases for mlp_bias.
// - deepseek_v3 attention: multi-head latent attention (latent_attention.h)
//   in place of the above.
// - Mixture-of-experts families (mixtral, qwen3_moe, deepseek_v3): a sparse
//   mixture of experts (moe.h) on the layers ModelSpec::ExpertLayer says,
//   the MLP above (width intermediate_size) on the others.
//
// Parameter names are transformers 5's: "model.embed_tokens.weight",
// "model.layers.0.self_attn.q_proj.weight" (.bias), "...self_attn.qkv_proj.weight",
// "...self_attn.q_norm.weight", "model.layers.0.mlp.gate_proj.weight",
// "...mlp.gate_up_proj.weight", "...pre_feedforward_layernorm.weight",
// "model.norm.weight", "lm_head.weight"; mixtral's MLP's names are in moe.h
// ("model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.gate_up_proj", ...).
#ifndef AUTOACCEL_ENGINE_LLAMA_H_
#define AUTOACCEL_ENGINE_LLAMA_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <utility>

#include "engine/model.h"
#include "spec/model_spec.h"

namespace autoaccel {

// Root-mean-square normalisation over the last dimension. Llama's
// (offset false): the statistics in fp32, the result cast to the input's
// dtype, then scaled by `weight` (which promotes it to the weight's dtype).
// Gemma's (offset true): scaled by (1 + weight) in fp32, then cast to the
// input's dtype.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps, bool offset = false);
  torch::Tensor forward(const torch::Tensor& x) { return Apply(x, weight_); }
  // The norm of `x` scaled by `weight` in place of the module's own (the
  // same tensor passed through an autograd function, e.g. under tensor
  // parallelism).
  torch::Tensor Apply(const torch::Tensor& x, const torch::Tensor& weight) const;
  const torch::Tensor& weight() const { return weight_; }

 private:
  double eps_;
  bool offset_;
  torch::Tensor weight_;
};
TORCH_MODULE(RmsNorm);

// cos and sin of the rotary angles of the tokens at `positions` [t] (int64)
// in a forward of T tokens, [t, dim] fp32: position p, pair i (dimensions i
// and i + dim/2) turns by p * inv_freq[i], the frequencies of spec's
// rope_type (model_spec.h) for a rotary size of `dim`; both times the rope
// type's attention factor (yarn, longrope; 1 for the others).
std::pair<torch::Tensor, torch::Tensor> RotaryCosSin(const torch::Tensor& positions, int64_t T,
                                                     const ModelSpec& spec, int64_t dim);

// The decoder of spec.family (any Network::kDecoder family).
class DecoderImpl : public TrainableModel {
 public:
  // Initialised as transformers does (weights N(0, 0.02), biases 0, RMSNorm
  // weights 1, or 0 for gemma's (1 + w) norms) from a generator seeded with
  // `seed`. REQUIRES: spec.Validate() is OK and the family's network is
  // kDecoder (BuildModel checks both).
  DecoderImpl(const ModelSpec& spec, uint64_t seed);

  std::vector<torch::nn::Module*> Layers() override { return ModulesOf(layers_); }
  // q/k/v (or qkv_proj's q, k and v blocks, each split), gate and up (or
  // gate_up_proj's halves) projections and their biases by output rows
  // (whole heads), o and down projections by input columns (their biases
  // replicated), embed_tokens and lm_head by vocabulary rows; per-head norms
  // (q_norm, k_norm) replicated, their gradients summed over the group.
  // The families whose row has tensor parallelism (mixtral's router
  // replicated, each expert split like a dense MLP: moe.h); the others
  // refuse it.
  absl::Status ShardTensorParallel(const TensorParallelShard& tp) override;
  // Keeps experts ep.rank * E / ep.size ... of each layer (moe.h).
  absl::Status ShardExpertParallel(const ExpertParallelShard& ep) override;
  std::vector<torch::Tensor> ExpertParameters() override;
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
TORCH_MODULE(Decoder);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_LLAMA_H_
