#include "engine/bert.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace autoaccel {
namespace {

torch::nn::LayerNorm MakeLayerNorm(const ModelSpec& spec) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({spec.n_embd}).eps(spec.layer_norm_epsilon));
}

torch::Tensor Gelu(const torch::Tensor& x) { return at::gelu(x, /*approximate=*/"none"); }

// A plain module that only gives its children a name prefix
// ("attention", "attention.self", ...).
std::shared_ptr<torch::nn::Module> Scope(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

class BertLayer : public CheckpointableBlock {
 public:
  explicit BertLayer(const ModelSpec& spec) : n_head_(spec.n_head) {
    const int64_t d = spec.n_embd;
    auto attention = Scope(*this, "attention");
    auto self = Scope(*attention, "self");
    query_ = self->register_module("query", torch::nn::Linear(d, d));
    key_ = self->register_module("key", torch::nn::Linear(d, d));
    value_ = self->register_module("value", torch::nn::Linear(d, d));
    auto attention_output = Scope(*attention, "output");
    attention_dense_ = attention_output->register_module("dense", torch::nn::Linear(d, d));
    attention_norm_ = attention_output->register_module("LayerNorm", MakeLayerNorm(spec));
    intermediate_dense_ =
        Scope(*this, "intermediate")->register_module("dense", torch::nn::Linear(d, spec.n_inner));
    auto output = Scope(*this, "output");
    output_dense_ = output->register_module("dense", torch::nn::Linear(spec.n_inner, d));
    output_norm_ = output->register_module("LayerNorm", MakeLayerNorm(spec));
  }

  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) override {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto heads = [&](const torch::Tensor& t) {
      return t.view({B, T, n_head_, C / n_head_}).transpose(1, 2);
    };
    const torch::Tensor context =
        Attend(heads(LayerLinear(query_, x, options)), heads(LayerLinear(key_, x, options)),
               heads(LayerLinear(value_, x, options)),
               /*causal=*/false, options);
    const torch::Tensor a =
        attention_norm_->forward(LayerLinear(attention_dense_, context, options) + x);
    const torch::Tensor m =
        LayerLinear(output_dense_, Gelu(LayerLinear(intermediate_dense_, a, options)), options);
    return output_norm_->forward(m + a);
  }

 private:
  int64_t n_head_;
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr};
  torch::nn::Linear attention_dense_{nullptr}, intermediate_dense_{nullptr}, output_dense_{nullptr};
  torch::nn::LayerNorm attention_norm_{nullptr}, output_norm_{nullptr};
};

}  // namespace

BertImpl::BertImpl(const ModelSpec& spec, uint64_t seed) : TrainableModel(spec) {
  const int64_t d = spec.n_embd;
  auto bert = Scope(*this, "bert");
  auto embeddings = Scope(*bert, "embeddings");
  word_embeddings_ =
      embeddings->register_module("word_embeddings", torch::nn::Embedding(spec.vocab_size, d));
  position_embeddings_ =
      embeddings->register_module("position_embeddings", torch::nn::Embedding(spec.n_positions, d));
  token_type_embeddings_ = embeddings->register_module(
      "token_type_embeddings", torch::nn::Embedding(spec.type_vocab_size, d));
  embeddings_norm_ = embeddings->register_module("LayerNorm", MakeLayerNorm(spec));
  layers_ = Scope(*bert, "encoder")->register_module("layer", torch::nn::ModuleList());
  for (int i = 0; i < spec.n_layer; ++i) layers_->push_back(std::make_shared<BertLayer>(spec));

  auto predictions = Scope(*Scope(*this, "cls"), "predictions");
  decoder_bias_ = predictions->register_parameter("bias", torch::zeros({spec.vocab_size}));
  auto transform = Scope(*predictions, "transform");
  transform_dense_ = transform->register_module("dense", torch::nn::Linear(d, d));
  transform_norm_ = transform->register_module("LayerNorm", MakeLayerNorm(spec));
  InitLikeHuggingFace(*this, seed);
}

torch::Tensor BertImpl::Logits(const torch::Tensor& tokens, const RunOptions& options) {
  const int64_t T = tokens.size(1);
  TORCH_CHECK(T <= spec().n_positions, "sequence length ", T, " exceeds max_position_embeddings ",
              spec().n_positions);
  const torch::Tensor positions = torch::arange(T, tokens.options().dtype(torch::kLong));
  // One segment: every token has type 0.
  torch::Tensor x = word_embeddings_->forward(tokens) +
                    token_type_embeddings_->forward(torch::zeros_like(positions));
  x = embeddings_norm_->forward(x + position_embeddings_->forward(positions));
  const int n = static_cast<int>(layers_->size());
  for (int i = 0; i < n; ++i) x = RunBlock(*layers_[i]->as<BertLayer>(), x, options, i, n);
  const torch::Tensor h = transform_norm_->forward(Gelu(transform_dense_->forward(x)));
  return at::linear(h, word_embeddings_->weight, decoder_bias_);
}

Example BertImpl::MakeExample(const torch::Tensor& tokens, uint64_t seed) const {
  torch::NoGradGuard no_grad;
  const int64_t B = tokens.size(0), T = tokens.size(1) - 1;
  const int64_t masked = std::max<int64_t>(1, std::llround(kMaskFraction * double(T)));
  const torch::Tensor sequence = tokens.narrow(1, 0, T);
  // A random permutation of each row's positions; its first `masked` entries.
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const torch::Tensor positions =
      torch::rand({B, T}, gen, torch::TensorOptions().dtype(torch::kFloat))
          .argsort(/*stable=*/false, /*dim=*/1)
          .narrow(1, 0, masked)
          .to(tokens.device());
  Example example;
  example.input = sequence.clone().scatter_(1, positions, spec().vocab_size - 1);
  example.target = torch::full_like(sequence, kIgnoreIndex)
                       .scatter_(1, positions, sequence.gather(1, positions));
  return example;
}

}  // namespace autoaccel
