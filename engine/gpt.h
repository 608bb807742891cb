// A GPT-2 decoder in LibTorch, built from a ModelSpec: token embedding wte
// (tied with the LM head), learned position embedding wpe, n_layer blocks of
// [ln_1 -> causal self-attention -> residual, ln_2 -> MLP (gelu_new) ->
// residual], ln_f. No dropout. Parameter names follow Hugging Face's GPT2Model
// ("h.0.attn.c_attn.weight"), with nn.Linear's [out, in] weight layout.
//
// Methods throw c10::Error (OutOfMemoryError included) like any LibTorch code;
// the trial runner (trainer.h) is where they are caught.
#ifndef AUTOACCEL_ENGINE_GPT_H_
#define AUTOACCEL_ENGINE_GPT_H_

#include <ATen/autocast_mode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "search/model.h"
#include "search/strategy.h"

namespace autoaccel {

// How the forward pass runs; the weights do not depend on it.
struct GptRunOptions {
  Attention attention = Attention::kMath;
  // kFull: each block's activations are dropped after the forward pass and
  // recomputed during backward. Same loss and gradients as kNone.
  Checkpointing checkpointing = Checkpointing::kNone;
};

class GptAttentionImpl : public torch::nn::Module {
 public:
  explicit GptAttentionImpl(const ModelSpec& spec);
  // x: [B, T, C] -> [B, T, C], causal.
  torch::Tensor Forward(const torch::Tensor& x, Attention attention);

 private:
  int64_t n_head_;
  torch::nn::Linear c_attn_{nullptr};  // fused q, k, v
  torch::nn::Linear c_proj_{nullptr};
};
TORCH_MODULE(GptAttention);

class GptMlpImpl : public torch::nn::Module {
 public:
  explicit GptMlpImpl(const ModelSpec& spec);
  torch::Tensor Forward(const torch::Tensor& x);

 private:
  torch::nn::Linear c_fc_{nullptr};
  torch::nn::Linear c_proj_{nullptr};
};
TORCH_MODULE(GptMlp);

class GptBlockImpl : public torch::nn::Module {
 public:
  explicit GptBlockImpl(const ModelSpec& spec);
  torch::Tensor Forward(const torch::Tensor& x, Attention attention);

 private:
  torch::nn::LayerNorm ln_1_{nullptr};
  GptAttention attn_{nullptr};
  torch::nn::LayerNorm ln_2_{nullptr};
  GptMlp mlp_{nullptr};
};
TORCH_MODULE(GptBlock);

class GptImpl : public torch::nn::Module {
 public:
  // Builds the network on CPU with Hugging Face's GPT-2 initialisation
  // (weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2*n_layer)), biases 0,
  // LayerNorm weights 1) drawn from a generator seeded with `seed`: the same
  // spec and seed give bit-identical weights. Move it with ->to(device).
  // REQUIRES: positive sizes and n_embd % n_head == 0 (ModelSpecFromJson
  // checks both).
  GptImpl(const ModelSpec& spec, uint64_t seed);

  // tokens: [B, T] int64 with T <= n_positions. Returns logits [B, T, vocab].
  torch::Tensor Forward(const torch::Tensor& tokens, const GptRunOptions& options = {});

  // Mean next-token cross-entropy, computed in fp32 even under autocast:
  // `input` [B, T] predicts `target` [B, T].
  torch::Tensor Loss(const torch::Tensor& input, const torch::Tensor& target,
                     const GptRunOptions& options = {});

  const ModelSpec& spec() const { return spec_; }

 private:
  ModelSpec spec_;
  torch::nn::Embedding wte_{nullptr};
  torch::nn::Embedding wpe_{nullptr};
  torch::nn::ModuleList h_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(Gpt);

// Autocast region for one device type, like Python's `with torch.autocast()`:
// sets the thread's autocast state for `device_type`, and on destruction
// restores it and drops the autocast weight cache when the outermost region
// ends. `enabled` false gives a region with autocast off (e.g. to run fp32
// inside a bf16 region). Thread-local state: create and destroy on one thread.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device_type, bool enabled, c10::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_GPT_H_
