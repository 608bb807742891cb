// What the trainer needs from a network, whatever its family, and the pieces
// every family shares: attention (math or SDPA), full activation
// checkpointing, autocast regions and Hugging Face style initialisation.
//
// Networks: gpt2 (gpt.h), the Llama-style decoder of every Network::kDecoder
// family — llama, mistral, mixtral, qwen2, qwen3, phi3, gemma, gemma2 —
// (llama.h), bert (bert.h). BuildModel() (build_model.h) picks one from a
// ModelSpec's family row (spec/model_families.h). Parameter names are those of the matching
// transformers model (GPT2Model, LlamaForCausalLM, Qwen3ForCausalLM, ...,
// BertForMaskedLM) so that weights load by name (weights.h).
//
// Methods throw c10::Error (OutOfMemoryError included) like any LibTorch code;
// the trial runner (trainer.h) is where they are caught.
#ifndef AUTOACCEL_ENGINE_MODEL_H_
#define AUTOACCEL_ENGINE_MODEL_H_

#include <ATen/autocast_mode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

class LayerHooks;
struct TensorParallelShard;
struct ContextParallelShard;
struct ExpertParallelShard;
class RouterLoss;

// How the forward pass runs; the weights do not depend on it.
struct RunOptions {
  Attention attention = Attention::kMath;
  // Activation checkpointing of the first ceil(L * checkpoint_percent / 100)
  // of the model's L transformer layers (see RunBlock): kFull drops each such
  // layer's activations after the forward pass and recomputes the layer in
  // backward; kSelective does so for the attention core only (scores,
  // softmax, weighted sum: the activations that grow with T^2 under math
  // attention). Every choice gives the loss and gradients of kNone.
  Checkpointing checkpointing = Checkpointing::kNone;
  int checkpoint_percent = 100;
  // Called around every transformer layer (see RunBlock); null for none.
  // Fully sharded data parallelism gathers a layer's parameters here.
  LayerHooks* hooks = nullptr;
  // Tensor parallelism (tensor_parallel.h): the model's parameters hold this
  // rank's slices (TrainableModel::ShardTensorParallel) and its layers
  // exchange partial results over the group. Null: one device.
  const TensorParallelShard* tp = nullptr;
  // Context parallelism (context_parallel.h): the model runs on this rank's
  // share of each sequence, its attention spans the whole sequence. Null:
  // the whole sequence is here.
  const ContextParallelShard* cp = nullptr;
  // Expert parallelism (moe.h): the model holds this rank's experts
  // (TrainableModel::ShardExpertParallel) and exchanges tokens with the
  // group's other ranks. Null: every expert is here.
  const ExpertParallelShard* ep = nullptr;
  // Precision fp8: the transformer layers' linear layers compute in fp8
  // (LayerLinear, fp8_linear.h); embeddings, LM head, routers and norms stay
  // in the weights' dtype (bf16).
  bool fp8 = false;
  // The auxiliary load-balancing loss the expert layers report their
  // routers to (router_loss.h); set by TrainableModel::Loss for a model
  // whose spec has router_aux_loss_coef, else null.
  RouterLoss* router_loss = nullptr;
};
using GptRunOptions = RunOptions;  // the name from when GPT-2 was the only family

// Targets equal to this are left out of the loss (PyTorch's default
// ignore_index, which transformers uses for unmasked MLM positions too).
inline constexpr int64_t kIgnoreIndex = -100;

// One batch as a model trains on it: `input` [B, T] token ids, `target`
// [B, T] the token to predict at each position or kIgnoreIndex.
struct Example {
  torch::Tensor input;
  torch::Tensor target;
};

// A language model: tokens in, logits over the vocabulary out.
class TrainableModel : public torch::nn::Module {
 public:
  explicit TrainableModel(const ModelSpec& spec);
  ~TrainableModel() override;

  // tokens: [B, T] int64 with T <= spec().n_positions. Returns logits
  // [B, T, vocab_size] (in the autocast dtype under autocast).
  torch::Tensor Forward(const torch::Tensor& tokens, const RunOptions& options = {}) {
    return Logits(tokens, options);
  }

  // Mean cross-entropy of Forward(input) against `target`, computed in fp32
  // even under autocast, over the positions whose target is not
  // kIgnoreIndex (as transformers' losses do), plus router_aux_loss_coef
  // times the auxiliary load-balancing loss when the spec has one
  // (router_loss.h; its gradient reaches the routers in backward, which
  // must follow before the next Loss). REQUIRES: at least one such
  // position, else the mean is NaN.
  torch::Tensor Loss(const torch::Tensor& input, const torch::Tensor& target,
                     const RunOptions& options = {});

  // The training example for `tokens` [B, T + 1] (CPU, int64): decoders
  // predict the next token (input tokens[:, :T], target tokens[:, 1:]); bert
  // overrides it with its masked-LM task. Deterministic in `seed`.
  virtual Example MakeExample(const torch::Tensor& tokens, uint64_t seed) const;

  // Replaces the parameters by this rank's tensor-parallel slices (call on
  // the full model, on CPU, before moving it); Forward and Loss then need
  // RunOptions::tp set to `tp`. INVALID_ARGUMENT naming
  // strategy.tensor_parallel for a family without tensor parallelism.
  // REQUIRES: tp.size divides the heads, key-value heads and MLP width (the
  // search space's "tensor_parallel_model" rule, which ValidateTrialSpec
  // applies); otherwise throws c10::Error.
  virtual absl::Status ShardTensorParallel(const TensorParallelShard& tp);

  // Replaces the routed experts' weights by this rank's share of the
  // experts (call on the full model, on CPU, before moving it); Forward and
  // Loss then need RunOptions::ep set to `ep`. INVALID_ARGUMENT naming
  // strategy.expert_parallel for a model without experts. REQUIRES: ep.size
  // divides the experts (the "expert_parallel_model" rule); otherwise
  // throws c10::Error.
  virtual absl::Status ShardExpertParallel(const ExpertParallelShard& ep);
  // The routed experts' weights (what ShardExpertParallel splits); empty
  // for a model without experts.
  virtual std::vector<torch::Tensor> ExpertParameters() { return {}; }

  // Pipeline stages run the model in pieces: Embed (tokens [B, T] ->
  // hidden [B, T, C]), RunLayer for each transformer layer (RunBlock), Head
  // (final norm and LM head -> logits), with Logits == Head(layers(Embed)).
  // Families without pieces (Staged() false) throw from them.
  virtual bool Staged() const { return false; }
  virtual torch::Tensor Embed(const torch::Tensor& tokens, const RunOptions& options);
  virtual torch::Tensor RunLayer(int layer, const torch::Tensor& x, const RunOptions& options);
  virtual torch::Tensor Head(const torch::Tensor& x, const RunOptions& options);
  // The parameters Embed and Head use (a tied embedding is in both).
  virtual std::vector<torch::Tensor> EmbeddingParameters();
  virtual std::vector<torch::Tensor> HeadParameters();
  // Mean cross-entropy of `logits` (Head's output) against `target`; what
  // Loss computes after Forward (vocabulary-parallel under tensor
  // parallelism).
  torch::Tensor LossOfLogits(const torch::Tensor& logits, const torch::Tensor& target,
                             const RunOptions& options) const;

  // The model's transformer layers in order (what RunBlock runs); their
  // parameters are disjoint and every other parameter of the model belongs
  // to none of them.
  virtual std::vector<torch::nn::Module*> Layers() = 0;

  const ModelSpec& spec() const { return spec_; }

 protected:
  virtual torch::Tensor Logits(const torch::Tensor& tokens, const RunOptions& options) = 0;

 private:
  ModelSpec spec_;
  std::unique_ptr<RouterLoss> router_loss_;  // null: no auxiliary loss
};

// The modules of `list`, in order (what TrainableModel::Layers returns).
std::vector<torch::nn::Module*> ModulesOf(const torch::nn::ModuleList& list);

// transformers' default initialisation (PreTrainedModel._init_weights) of
// every parameter of `module`, from a generator seeded with `seed`: biases 0
// (names ending "bias"), norm weights 1 (names containing "norm" or
// "LayerNorm"), everything else N(0, std).
void InitLikeHuggingFace(torch::nn::Module& module, uint64_t seed, double std = 0.02);

// x · weightᵀ + bias (bias may be undefined) as a transformer layer's linear
// layer computes it: Fp8Linear (fp8_linear.h) when options.fp8, else
// at::linear. What every attention projection, MLP and expert calls.
torch::Tensor LayerLinear(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias, const RunOptions& options);
// The same for `linear`'s weight and (when it has one) bias.
torch::Tensor LayerLinear(const torch::nn::Linear& linear, const torch::Tensor& x,
                          const RunOptions& options);

// What RunBlock calls around layer `layer` of a model: BeforeForward before
// the layer runs; AfterForward with its output, before anything uses it
// (the hook may register a gradient hook on it, which runs before the
// layer's backward pass). Called on the thread that runs the forward pass.
class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void BeforeForward(int layer) = 0;
  virtual void AfterForward(int layer, torch::Tensor& output) = 0;
};

// A unit that full activation checkpointing drops and recomputes: one
// transformer layer, x [B, T, C] -> [B, T, C]. Its Forward must be a pure
// function of x and its parameters (no RNG, no state).
class CheckpointableBlock : public torch::nn::Module {
 public:
  virtual torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options) = 0;
};

// How many of `num_layers` layers options.checkpointing applies to: 0 for
// kNone, else ceil(num_layers * checkpoint_percent / 100).
int CheckpointedLayers(const RunOptions& options, int num_layers);

// block.Forward(x, ...) for layer `layer` (0-based) of `num_layers`. When the
// layer is among the first CheckpointedLayers(): with kFull nothing inside
// the block is kept for backward, which recomputes it under the autocast
// state of the forward pass; with kSelective the block runs with
// options.checkpointing kSelective, so its Attend() checkpoints itself. Other
// layers run with checkpointing kNone. `block` must outlive the backward pass
// (the model owns it).
torch::Tensor RunBlock(CheckpointableBlock& block, const torch::Tensor& x,
                       const RunOptions& options, int layer, int num_layers);

// What an attention layer computes besides softmax(q k^T) v: the scale, a
// soft-cap and the mask. The default is plain causal attention with scale
// 1/sqrt(D).
struct AttentionShape {
  bool causal = true;
  // Scores are q k^T * scale; 0 means 1/sqrt(D) (D the head size).
  double scale = 0;
  // > 0: scores become softcap * tanh(scores / softcap) before the mask
  // (gemma2). Only kMath computes it.
  double softcap = 0;
  // > 0 (causal only): query position t attends to keys t - window + 1 ...
  // t (sliding-window attention, transformers' convention). A window of at
  // least T is plain causal attention.
  int64_t window = 0;
  // When defined (causal only; int64, on q's device): the positions in the
  // sequence of the queries [T_q] and of the keys [T_k], which need not be
  // 0 .. T - 1 nor in order (context parallelism's shares of a sequence);
  // the mask compares them. Undefined: both are 0 .. T - 1.
  torch::Tensor query_positions, key_positions;
  // When defined: attention sinks, one logit per query head [H] (gpt_oss).
  // Each query's softmax takes exp(sinks[h]) as one more term of its sum
  // (a column of the scores whose value is zero), so its weights over the
  // keys sum to less than 1. Gradients reach it. Only kMath computes it.
  torch::Tensor sinks;
};

// Scaled dot-product attention of q, k [B, H(_kv), T(_k), D] with v [B,
// H_kv, T_k, Dv] (Dv may differ from D; T_k == T unless shape has
// positions; H_kv divides H: grouped-query
// attention; each key/value head serves
// H / H_kv consecutive query heads, as transformers' repeat_kv). kMath spells
// it out as transformers' eager attention does (scores in q's dtype, then
// the soft-cap, the mask, softmax in fp32); kSdpa calls
// at::scaled_dot_product_attention (a boolean mask for a sliding window).
// Returns [B, T, H * Dv]. REQUIRES: shape.softcap == 0 and no shape.sinks
// for kSdpa (the search space's "attention_kernel" rule); otherwise throws
// c10::Error.
torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const AttentionShape& shape, Attention attention);

// Attend(q, k, v, shape, options.attention), checkpointed when
// options.checkpointing is kSelective: only q, k and v are kept for backward,
// which recomputes the attention core. Under context parallelism
// (options.cp) attention spans the whole sequence (context_parallel.h). What
// attention modules call.
torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const AttentionShape& shape, const RunOptions& options);

// The same with AttentionShape{causal}: scale 1/sqrt(D), no soft-cap, no
// window.
torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     bool causal, Attention attention);
torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     bool causal, const RunOptions& options);

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

#endif  // AUTOACCEL_ENGINE_MODEL_H_
