// A BERT encoder with its masked-LM head in LibTorch, as transformers'
// BertForMaskedLM computes it (eager attention, no dropout, no pooler):
//
//   embeddings: LayerNorm(word + token_type (all type 0) + learned position)
//   n_layer post-LN layers:
//     a = LayerNorm(x + dense(self_attention(x)))     bidirectional, with biases
//     y = LayerNorm(a + dense(gelu(dense(a))))        GELU with erf
//   MLM head: h = LayerNorm(gelu(dense(y))); logits = h @ word_embeddings^T + bias
//
// The decoder's weight is the word embedding (tied); its bias is the head's
// own parameter "cls.predictions.bias". Parameter names are transformers':
// "bert.embeddings.word_embeddings.weight",
// "bert.encoder.layer.0.attention.self.query.weight",
// "bert.encoder.layer.0.attention.output.LayerNorm.weight",
// "bert.encoder.layer.0.intermediate.dense.weight",
// "bert.encoder.layer.0.output.dense.weight",
// "cls.predictions.transform.dense.weight", "cls.predictions.bias".
//
// Not modelled: pad_token_id's padding_idx (transformers gives the pad row of
// the word embedding no gradient from its lookups; synthetic batches have no
// padding, so this only differs when that id occurs as an ordinary token) and
// attention masks (no padding).
#ifndef AUTOACCEL_ENGINE_BERT_H_
#define AUTOACCEL_ENGINE_BERT_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "engine/model.h"
#include "spec/model_spec.h"

namespace autoaccel {

class BertImpl : public TrainableModel {
 public:
  // Fraction of each sequence's positions that the masked-LM task masks.
  static constexpr double kMaskFraction = 0.15;

  // Initialised as transformers does (weights N(0, 0.02), biases 0,
  // LayerNorm weights 1) from a generator seeded with `seed`.
  // REQUIRES: spec.Validate() is OK and spec.family is "bert".
  BertImpl(const ModelSpec& spec, uint64_t seed);

  // The synthetic masked-LM task on tokens [B, T + 1] (the last column is
  // not used): in every sequence exactly max(1, round(0.15 * T)) positions,
  // drawn from a generator seeded with `seed`, are replaced in `input` by the
  // mask token, and only they have a target (the original token); every
  // other target is kIgnoreIndex. The mask token is the last vocabulary id
  // (vocab_size - 1), standing in for [MASK]. Unlike BERT's pre-training
  // recipe, every chosen position is masked (no 10% random / 10% unchanged):
  // the cost of a step is the same. A fixed count per sequence makes the loss
  // of a batch split into micro-batches average the same as the whole.
  Example MakeExample(const torch::Tensor& tokens, uint64_t seed) const override;

  std::vector<torch::nn::Module*> Layers() override { return ModulesOf(layers_); }

 protected:
  torch::Tensor Logits(const torch::Tensor& tokens, const RunOptions& options) override;

 private:
  torch::nn::Embedding word_embeddings_{nullptr};
  torch::nn::Embedding position_embeddings_{nullptr};
  torch::nn::Embedding token_type_embeddings_{nullptr};
  torch::nn::LayerNorm embeddings_norm_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::Linear transform_dense_{nullptr};
  torch::nn::LayerNorm transform_norm_{nullptr};
  torch::Tensor decoder_bias_;
};
TORCH_MODULE(Bert);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_BERT_H_
