// A GPT-2 decoder in LibTorch, built from a ModelSpec: token embedding wte
// (tied with the LM head), learned position embedding wpe, n_layer blocks of
// [ln_1 -> causal self-attention -> residual, ln_2 -> MLP (gelu_new) ->
// residual], ln_f. No dropout. Parameter names follow Hugging Face's GPT2Model
// ("h.0.attn.c_attn.weight"), with nn.Linear's [out, in] weight layout (HF's
// Conv1D stores the transpose: c_attn, c_proj and c_fc weights must be
// transposed when loading HF weights).
//
// Methods throw c10::Error (OutOfMemoryError included) like any LibTorch code;
// the trial runner (trainer.h) is where they are caught.
#ifndef AUTOACCEL_ENGINE_GPT_H_
#define AUTOACCEL_ENGINE_GPT_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "engine/model.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

class GptAttentionImpl : public torch::nn::Module {
 public:
  explicit GptAttentionImpl(const ModelSpec& spec);
  // x: [B, T, C] -> [B, T, C], causal.
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options);

 private:
  int64_t head_dim_;
  torch::nn::Linear c_attn_{nullptr};  // fused q, k, v
  torch::nn::Linear c_proj_{nullptr};
};
TORCH_MODULE(GptAttention);

class GptMlpImpl : public torch::nn::Module {
 public:
  explicit GptMlpImpl(const ModelSpec& spec);
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options);

 private:
  torch::nn::Linear c_fc_{nullptr};
  torch::nn::Linear c_proj_{nullptr};
};
TORCH_MODULE(GptMlp);

class GptBlockImpl : public CheckpointableBlock {
 public:
  explicit GptBlockImpl(const ModelSpec& spec);
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) override;

 private:
  torch::nn::LayerNorm ln_1_{nullptr};
  GptAttention attn_{nullptr};
  torch::nn::LayerNorm ln_2_{nullptr};
  GptMlp mlp_{nullptr};
};
TORCH_MODULE(GptBlock);

class GptImpl : public TrainableModel {
 public:
  // Builds the network on CPU with Hugging Face's GPT-2 initialisation
  // (weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2*n_layer)), biases 0,
  // LayerNorm weights 1) drawn from a generator seeded with `seed`: the same
  // spec and seed give bit-identical weights. Move it with ->to(device).
  // REQUIRES: positive sizes and n_embd % n_head == 0 (ModelSpecFromJson
  // checks both).
  GptImpl(const ModelSpec& spec, uint64_t seed);

  // Forward, Loss, MakeExample: see TrainableModel (next-token prediction).

  std::vector<torch::nn::Module*> Layers() override { return ModulesOf(h_); }
  // Megatron's split: c_attn (q, k and v each) and c_fc by output rows,
  // both c_proj by input columns, wte by vocabulary rows; the rest is
  // replicated.
  absl::Status ShardTensorParallel(const TensorParallelShard& tp) override;
  bool Staged() const override { return true; }
  torch::Tensor Embed(const torch::Tensor& tokens, const RunOptions& options) override;
  torch::Tensor RunLayer(int layer, const torch::Tensor& x, const RunOptions& options) override;
  torch::Tensor Head(const torch::Tensor& x, const RunOptions& options) override;
  std::vector<torch::Tensor> EmbeddingParameters() override;  // wte, wpe
  std::vector<torch::Tensor> HeadParameters() override;       // ln_f, wte (tied)

 protected:
  torch::Tensor Logits(const torch::Tensor& tokens, const RunOptions& options) override;

 private:
  torch::nn::Embedding wte_{nullptr};
  torch::nn::Embedding wpe_{nullptr};
  torch::nn::ModuleList h_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_GPT_H_
