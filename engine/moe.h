// The sparse mixture-of-experts MLP of the decoder families whose row has
// experts (mixtral): a router picks each token's experts (MoeRouting), the
// experts (SwiGLU MLPs stored as stacked weights) run on the tokens routed
// to them, and a token's output is the routing-weighted sum of its experts'
// outputs.
//
// Parameter names are transformers 5's: "<mlp>.gate.weight" [experts,
// hidden] (the router), "<mlp>.experts.gate_up_proj" [experts, 2 *
// intermediate, hidden] (gate rows first, then up) and
// "<mlp>.experts.down_proj" [experts, hidden, intermediate].
//
// Methods throw c10::Error like any LibTorch code.
#ifndef AUTOACCEL_ENGINE_MOE_H_
#define AUTOACCEL_ENGINE_MOE_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>

#include "engine/model.h"
#include "spec/model_spec.h"

namespace autoaccel {

// Which experts each token goes to, and with what weight.
struct MoeRouting {
  torch::Tensor weights;  // [N, k] fp32: each chosen expert's share of the output
  torch::Tensor experts;  // [N, k] int64: the chosen experts, distinct per token
};

// The router ("gate"): a linear layer without bias scoring every expert.
// mixtral: softmax over all experts in fp32, the top num_experts_per_tok
// kept and renormalised to sum to 1 (no jitter, no auxiliary loss: as
// transformers with output_router_logits false, its default).
class MoeRouterImpl : public torch::nn::Module {
 public:
  explicit MoeRouterImpl(const ModelSpec& spec);
  // flat [N, hidden] -> the routing of the N tokens. `weight` is the
  // router's weight as the caller uses it (the module's own, or the same
  // tensor passed through an autograd function).
  MoeRouting Route(const torch::Tensor& flat, const torch::Tensor& weight) const;
  const torch::Tensor& weight() const { return weight_; }

 private:
  int64_t top_k_;
  torch::Tensor weight_;
};

// The experts and their router: x [B, T, hidden] -> [B, T, hidden].
class SparseMoeImpl : public torch::nn::Module {
 public:
  explicit SparseMoeImpl(const ModelSpec& spec);
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options);

 private:
  int64_t num_experts_;
  std::shared_ptr<MoeRouterImpl> gate_;
  torch::Tensor gate_up_proj_, down_proj_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_MOE_H_
