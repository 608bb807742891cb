#include "engine/model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/autograd_pointers.h"
#include "engine/context_parallel.h"
#include "engine/fp8_linear.h"
#include "engine/router_loss.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The autocast state of the forward pass, kept in a node's saved data so that
// backward recomputes under the same casts.
void SaveAutocast(AutogradContext* ctx, c10::DeviceType device_type) {
  ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(device_type);
  ctx->saved_data["autocast_dtype"] =
      static_cast<int64_t>(at::autocast::get_autocast_dtype(device_type));
}

std::unique_ptr<AutocastScope> RestoreAutocast(AutogradContext* ctx, c10::DeviceType device_type) {
  return std::make_unique<AutocastScope>(
      device_type, ctx->saved_data["autocast"].toBool(),
      static_cast<c10::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
}

// What a checkpointed block runs with inside: everything the caller runs
// with (attention, parallel shards, fp8), but nothing checkpointed within
// and no layer hooks.
RunOptions InnerOptions(const RunOptions& options) {
  RunOptions inner = options;
  inner.checkpointing = Checkpointing::kNone;
  inner.checkpoint_percent = 100;
  inner.hooks = nullptr;
  return inner;
}

// InnerOptions kept whole in a node's saved data, for the recomputation.
struct SavedRunOptions : torch::CustomClassHolder {
  explicit SavedRunOptions(RunOptions o) : options(o) {}
  RunOptions options;
};

// Activation checkpointing of one block (LibTorch has no
// torch.utils.checkpoint). Function::apply runs forward() with grad mode off,
// so the block keeps no activations; backward() recomputes it with grad on,
// under the autocast state that the forward pass saw, and differentiates it.
// The block's parameters are inputs of the node, so the autograd engine
// accumulates their gradients as usual. No family has dropout or other
// randomness in a block, so no RNG state has to be replayed; mixtral's
// routing is a deterministic function of the block's input and so picks the
// same experts again.
class CheckpointedBlock : public torch::autograd::Function<CheckpointedBlock> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, CheckpointableBlock* block,
                               const RunOptions* options, const torch::Tensor& x,
                               torch::TensorList params) {
    (void)params;  // inputs only so that their gradients flow
    SavePointer(ctx, "block", block);
    const RunOptions inner = InnerOptions(*options);
    ctx->saved_data["options"] =
        c10::IValue::make_capsule(c10::make_intrusive<SavedRunOptions>(inner));
    SaveAutocast(ctx, x.device().type());
    ctx->save_for_backward({x});
    return block->Forward(x, inner);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* block = SavedPointer<CheckpointableBlock>(ctx, "block");
    const RunOptions options =
        c10::static_intrusive_pointer_cast<SavedRunOptions>(ctx->saved_data["options"].toCapsule())
            ->options;
    const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    torch::Tensor y;
    {
      torch::AutoGradMode grad_mode(true);
      const auto autocast = RestoreAutocast(ctx, x.device().type());
      y = block->Forward(x, options);
    }
    variable_list inputs{x};
    for (const torch::Tensor& p : block->parameters()) inputs.push_back(p);
    variable_list grads = torch::autograd::grad({y}, inputs, {grad_outputs[0]},
                                                /*retain_graph=*/false, /*create_graph=*/false,
                                                /*allow_unused=*/true);
    // One entry per forward argument, params flattened: block, options, x, params...
    variable_list result{torch::Tensor(), torch::Tensor()};
    result.insert(result.end(), grads.begin(), grads.end());
    return result;
  }
};

// Selective checkpointing: the attention core of one layer. Keeps q, k and v
// (which the projections produce anyway) and recomputes scores, softmax and
// the weighted sum in backward.
class CheckpointedAttention : public torch::autograd::Function<CheckpointedAttention> {
 public:
  // `sinks` is shape->sinks, or an empty tensor for none (autograd inputs
  // must be defined), an input so that its gradient flows.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& sinks,
                               const AttentionShape* shape, Attention attention) {
    ctx->saved_data["causal"] = shape->causal;
    ctx->saved_data["scale"] = shape->scale;
    ctx->saved_data["softcap"] = shape->softcap;
    ctx->saved_data["window"] = shape->window;
    ctx->saved_data["query_positions"] = shape->query_positions;
    ctx->saved_data["key_positions"] = shape->key_positions;
    ctx->saved_data["attention"] = static_cast<int64_t>(attention);
    SaveAutocast(ctx, q.device().type());
    ctx->saved_data["sinks"] = shape->sinks.defined();
    ctx->save_for_backward({q, k, v, sinks});
    return Attend(q, k, v, *shape, attention);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list saved = ctx->get_saved_variables();
    const bool sinks = ctx->saved_data["sinks"].toBool();
    if (!sinks) saved.pop_back();
    variable_list inputs;
    for (const torch::Tensor& t : saved) inputs.push_back(t.detach().requires_grad_(true));
    AttentionShape shape;
    if (sinks) shape.sinks = inputs[3];
    shape.causal = ctx->saved_data["causal"].toBool();
    shape.scale = ctx->saved_data["scale"].toDouble();
    shape.softcap = ctx->saved_data["softcap"].toDouble();
    shape.window = ctx->saved_data["window"].toInt();
    for (auto [key, positions] : {std::pair{"query_positions", &shape.query_positions},
                                  std::pair{"key_positions", &shape.key_positions}}) {
      const c10::IValue& saved = ctx->saved_data[key];
      if (saved.isTensor()) *positions = saved.toTensor();
    }
    torch::Tensor y;
    {
      torch::AutoGradMode grad_mode(true);
      const auto autocast = RestoreAutocast(ctx, inputs[0].device().type());
      y = Attend(inputs[0], inputs[1], inputs[2], shape,
                 static_cast<Attention>(ctx->saved_data["attention"].toInt()));
    }
    variable_list grads = torch::autograd::grad({y}, inputs, {grad_outputs[0]},
                                                /*retain_graph=*/false, /*create_graph=*/false,
                                                /*allow_unused=*/true);
    // q, k, v, sinks, then nothing for shape and attention.
    return {grads[0],        grads[1],       grads[2], sinks ? grads[3] : torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

TrainableModel::TrainableModel(const ModelSpec& spec)
    : spec_(spec), router_loss_(RouterLoss::For(spec)) {}

TrainableModel::~TrainableModel() = default;

torch::Tensor TrainableModel::Loss(const torch::Tensor& input, const torch::Tensor& target,
                                   const RunOptions& options) {
  if (router_loss_ == nullptr) return LossOfLogits(Forward(input, options), target, options);
  RunOptions with_router_loss = options;
  with_router_loss.router_loss = router_loss_.get();
  router_loss_->Begin();
  return router_loss_->AddTo(LossOfLogits(Forward(input, with_router_loss), target, options),
                             options);
}

torch::Tensor TrainableModel::LossOfLogits(const torch::Tensor& logits, const torch::Tensor& target,
                                           const RunOptions& options) const {
  torch::Tensor mean;
  if (options.tp != nullptr && options.tp->size > 1) {
    mean = VocabParallelCrossEntropy(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}),
                                     kIgnoreIndex, *options.tp);
  } else {
    mean = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat),
                                  target.reshape({-1}), /*weight=*/{}, at::Reduction::Mean,
                                  /*ignore_index=*/kIgnoreIndex);
  }
  if (!ContextParallel(options.cp)) return mean;
  // This rank's share of the whole sequence's mean.
  return mean * ContextParallelLossScale(target != kIgnoreIndex, *options.cp).to(mean.dtype());
}

torch::Tensor TrainableModel::Embed(const torch::Tensor&, const RunOptions&) {
  TORCH_CHECK(false, "the ", spec_.family, " family does not run in pipeline stages");
}
torch::Tensor TrainableModel::RunLayer(int, const torch::Tensor&, const RunOptions&) {
  TORCH_CHECK(false, "the ", spec_.family, " family does not run in pipeline stages");
}
torch::Tensor TrainableModel::Head(const torch::Tensor&, const RunOptions&) {
  TORCH_CHECK(false, "the ", spec_.family, " family does not run in pipeline stages");
}
std::vector<torch::Tensor> TrainableModel::EmbeddingParameters() { return {}; }
std::vector<torch::Tensor> TrainableModel::HeadParameters() { return {}; }

absl::Status TrainableModel::ShardTensorParallel(const TensorParallelShard& tp) {
  (void)tp;
  return absl::InvalidArgumentError(absl::StrCat("strategy.tensor_parallel: the ", spec_.family,
                                                 " family runs without tensor parallelism"));
}

absl::Status TrainableModel::ShardExpertParallel(const ExpertParallelShard& ep) {
  (void)ep;
  return absl::InvalidArgumentError(absl::StrCat("strategy.expert_parallel: the ", spec_.family,
                                                 " family has no experts to spread over ranks"));
}

Example TrainableModel::MakeExample(const torch::Tensor& tokens, uint64_t /*seed*/) const {
  const int64_t T = tokens.size(1) - 1;
  return Example{tokens.narrow(1, 0, T), tokens.narrow(1, 1, T)};
}

void InitLikeHuggingFace(torch::nn::Module& module, uint64_t seed, double std) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  for (auto& item : module.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    if (absl::EndsWith(name, "bias")) {
      p.zero_();
    } else if (absl::StrContains(name, "norm") || absl::StrContains(name, "LayerNorm")) {
      p.fill_(1.0);
    } else {
      p.normal_(0.0, std, gen);
    }
  }
}

torch::Tensor LayerLinear(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias, const RunOptions& options) {
  return options.fp8 ? Fp8Linear(x, weight, bias) : at::linear(x, weight, bias);
}

torch::Tensor LayerLinear(const torch::nn::Linear& linear, const torch::Tensor& x,
                          const RunOptions& options) {
  return LayerLinear(x, linear->weight, linear->bias, options);
}

int CheckpointedLayers(const RunOptions& options, int num_layers) {
  if (options.checkpointing == Checkpointing::kNone) return 0;
  const int percent = std::clamp(options.checkpoint_percent, 0, 100);
  return static_cast<int>((int64_t{num_layers} * percent + 99) / 100);
}

std::vector<torch::nn::Module*> ModulesOf(const torch::nn::ModuleList& list) {
  std::vector<torch::nn::Module*> out;
  for (const std::shared_ptr<torch::nn::Module>& m : *list) out.push_back(m.get());
  return out;
}

torch::Tensor RunBlock(CheckpointableBlock& block, const torch::Tensor& x,
                       const RunOptions& options, int layer, int num_layers) {
  RunOptions layer_options = options;
  if (layer >= CheckpointedLayers(options, num_layers)) {
    layer_options.checkpointing = Checkpointing::kNone;
  }
  if (options.hooks) options.hooks->BeforeForward(layer);
  torch::Tensor y;
  if (layer_options.checkpointing != Checkpointing::kFull) {
    y = block.Forward(x, layer_options);
  } else {
    const std::vector<torch::Tensor> params = block.parameters();
    y = CheckpointedBlock::apply(&block, &options, x, torch::TensorList(params));
  }
  if (options.hooks) options.hooks->AfterForward(layer, y);
  return y;
}

torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const AttentionShape& shape, Attention attention) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t kv_heads = k.size(1), T_k = k.size(2);
  torch::Tensor keys = k, values = v;
  if (kv_heads != H) {
    // [B, H_kv, T_k, D] -> [B, H_kv, H / H_kv, T_k, D] -> [B, H, T_k, D]:
    // key/value head j serves query heads j * rep ... j * rep + rep - 1.
    const int64_t rep = H / kv_heads;
    auto repeat = [&](const torch::Tensor& t) {
      const int64_t size = t.size(3);  // keys' D, values' Dv
      return t.unsqueeze(2).expand({B, kv_heads, rep, T_k, size}).reshape({B, H, T_k, size});
    };
    keys = repeat(k);
    values = repeat(v);
  }
  // Positions other than 0 .. T - 1, or a window shorter than the sequence,
  // mask by an explicit table rather than by causality alone.
  const bool positioned = shape.query_positions.defined();
  const bool windowed = shape.causal && shape.window > 0 && (positioned || shape.window < T);
  torch::Tensor allowed;  // [T, T_k], query rows, key columns: may attend
  if (windowed || positioned) {
    TORCH_CHECK(shape.causal, "attention with given positions must be causal");
    const torch::Tensor pos = torch::arange(T, q.options().dtype(torch::kLong));
    const torch::Tensor query = (positioned ? shape.query_positions : pos).unsqueeze(1);
    const torch::Tensor key = (positioned ? shape.key_positions : pos).unsqueeze(0);
    allowed = key <= query;
    if (windowed) allowed = allowed & (key > query - shape.window);
  }
  const bool masked = allowed.defined();
  torch::Tensor y;
  if (attention == Attention::kSdpa) {
    TORCH_CHECK(shape.softcap == 0,
                "attention logit soft-capping needs the math attention kernel (sdpa has none)");
    TORCH_CHECK(!shape.sinks.defined(),
                "attention sinks need the math attention kernel (sdpa has none)");
    const std::optional<double> scale =
        shape.scale > 0 ? std::optional<double>(shape.scale) : std::nullopt;
    y = at::scaled_dot_product_attention(q, keys, values,
                                         masked ? std::optional<at::Tensor>(allowed) : std::nullopt,
                                         /*dropout_p=*/0.0,
                                         /*is_causal=*/shape.causal && !masked, scale);
  } else {
    torch::Tensor scores = q.matmul(keys.transpose(-2, -1))
                               .mul(shape.scale > 0 ? shape.scale : 1.0 / std::sqrt(double(D)));
    if (shape.softcap > 0) scores = (scores / shape.softcap).tanh() * shape.softcap;
    if (masked) {
      scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
    } else if (shape.causal) {
      const torch::Tensor future =
          torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(/*diagonal=*/1);
      scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    }
    if (shape.sinks.defined()) {
      // One more column per query, its head's sink, in the softmax and then
      // dropped (transformers' GPT-OSS eager attention).
      const torch::Tensor sink_column =
          shape.sinks.to(scores.scalar_type()).view({1, H, 1, 1}).expand({B, H, T, 1});
      y = torch::cat({scores, sink_column}, /*dim=*/-1)
              .softmax(/*dim=*/-1, torch::kFloat)
              .narrow(-1, 0, T_k)
              .to(q.scalar_type())
              .matmul(values);
    } else {
      y = scores.softmax(/*dim=*/-1, torch::kFloat).to(q.scalar_type()).matmul(values);
    }
  }
  return y.transpose(1, 2).reshape({B, T, H * v.size(3)});
}

torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const AttentionShape& shape, const RunOptions& options) {
  if (ContextParallel(options.cp)) {
    // The ring keeps no scores: it recomputes them in backward whatever the
    // checkpointing. all_gather attends like one device, over gathered keys.
    if (options.cp->comm == ContextParallelComm::kP2p)
      return RingAttend(q, k, v, shape, *options.cp);
    torch::Tensor all_k, all_v;
    AttentionShape positioned;
    GatherKeyValues(k, v, shape, *options.cp, &all_k, &all_v, &positioned);
    RunOptions local = options;
    local.cp = nullptr;
    return Attend(q, all_k, all_v, positioned, local);
  }
  if (options.checkpointing == Checkpointing::kSelective) {
    return CheckpointedAttention::apply(
        q, k, v, shape.sinks.defined() ? shape.sinks : torch::empty({0}, q.options()), &shape,
        options.attention);
  }
  return Attend(q, k, v, shape, options.attention);
}

torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     bool causal, Attention attention) {
  AttentionShape shape;
  shape.causal = causal;
  return Attend(q, k, v, shape, attention);
}

torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     bool causal, const RunOptions& options) {
  AttentionShape shape;
  shape.causal = causal;
  return Attend(q, k, v, shape, options);
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
