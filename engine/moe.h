// The sparse mixture-of-experts MLP of the decoder families whose row has
// experts (mixtral, qwen3_moe, deepseek_v3; on the layers
// ModelSpec::ExpertLayer says): a router picks each token's experts
// (MoeRouting), the experts (SwiGLU MLPs of width ExpertWidth() stored as
// stacked weights) run on the tokens routed to them, and a token's output
// is the routing-weighted sum of its experts' outputs, plus the shared
// experts' output where the row has them (deepseek_v3).
//
// Parallel forms, which compose:
// - Tensor parallelism (RunOptions::tp; Megatron's expert tensor-parallel
//   size equal to the tensor-parallel size): every expert's intermediate
//   width is split like a dense MLP's (gate and up by rows, down by
//   columns); each rank routes all tokens of its group (gathered along the
//   sequence under sequence parallelism), its partial outputs are summed
//   over the group; the router is replicated; deepseek_v3's shared experts
//   are split like a dense MLP, their partial outputs summed with the
//   routed experts'.
// - Expert parallelism (RunOptions::ep): each of the ep ranks holds
//   num_local_experts / ep consecutive experts (rank r: r * E/ep ...). A
//   rank sorts its (token, expert) assignments by expert, sends each to the
//   rank of its expert (all-to-all, dropless: every assignment goes, the
//   counts are exchanged first), runs its experts on what it received, and
//   sends the outputs back (all-to-all), where they are weighted and summed
//   per token. Backward runs the same exchanges in reverse.
//
// Parameter names are transformers 5's: "<mlp>.gate.weight" [experts,
// hidden] (the router), "<mlp>.experts.gate_up_proj" [experts, 2 *
// intermediate, hidden] (gate rows first, then up) and
// "<mlp>.experts.down_proj" [experts, hidden, intermediate]; deepseek_v3's
// "<mlp>.gate.e_score_correction_bias" [experts] (a buffer, as in
// transformers: loaded, not trained) and "<mlp>.shared_experts.gate_proj",
// ".up_proj", ".down_proj" (n_shared_experts x intermediate wide, no bias).
//
// gpt_oss (the row's kTopKSoftmax router and clamped_swiglu experts) has
// its own names and layout, transformers' GptOssMLP's: the router
// "<mlp>.router.weight" [experts, hidden] and ".bias" [experts];
// "<mlp>.experts.gate_up_proj" [experts, hidden, 2 * intermediate] (gate
// and up interleaved: gate the even columns, up the odd) with
// ".gate_up_proj_bias" [experts, 2 * intermediate],
// "<mlp>.experts.down_proj" [experts, intermediate, hidden] with
// ".down_proj_bias" [experts, hidden]. Under tensor parallelism each rank
// takes a contiguous block of gate_up_proj's columns (whole gate/up pairs)
// and of down_proj's rows; down_proj_bias is added by the group's first
// rank only, inside the partial sums, its gradient summed over the group.
//
// Methods throw c10::Error like any LibTorch code.
#ifndef AUTOACCEL_ENGINE_MOE_H_
#define AUTOACCEL_ENGINE_MOE_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>

#include "engine/distributed.h"
#include "engine/model.h"
#include "spec/model_spec.h"

namespace autoaccel {

// This rank's place in an expert-parallel group (Groups::expert()).
struct ExpertParallelShard {
  Group* group = nullptr;
  int rank = 0;
  int size = 1;
};

// Which experts each token goes to, and with what weight.
struct MoeRouting {
  torch::Tensor weights;  // [N, k] fp32: each chosen expert's share of the output
  torch::Tensor experts;  // [N, k] int64: the chosen experts, distinct per token
  // kSoftmax, kTopKSoftmax: the router's logits [N, E] in the input's dtype
  // (what the auxiliary load-balancing loss reads); undefined for
  // kGroupedSigmoid.
  torch::Tensor logits;
};

// The router ("gate"): a linear layer without bias scoring every expert,
// then the family's MoeRouter (model_families.h), as transformers computes
// it (no jitter; the auxiliary load-balancing loss of output_router_logits
// is router_loss.h's, which SparseMoe reports the logits to):
//   kSoftmax (mixtral, qwen3_moe): softmax over all experts in fp32, the top
//     num_experts_per_tok kept, renormalised to sum to 1 when
//     norm_topk_prob;
//   kTopKSoftmax (gpt_oss): logits x W^T + b (the router has a bias), the
//     top num_experts_per_tok of them, a softmax over those k in the
//     logits' dtype;
//   kGroupedSigmoid (deepseek_v3): scores sigmoid(x W^T) in fp32; experts
//     ranked by score + e_score_correction_bias, only within the topk_group
//     of n_group groups whose two best ranks sum highest; the chosen
//     experts' scores (without the bias), divided by their sum (+ 1e-20)
//     when norm_topk_prob, times routed_scaling_factor.
class MoeRouterImpl : public torch::nn::Module {
 public:
  explicit MoeRouterImpl(const ModelSpec& spec);
  // flat [N, hidden] -> the routing of the N tokens. `weight` and `bias`
  // are the router's as the caller uses them (the module's own, or the same
  // tensors passed through an autograd function); `bias` only for
  // kTopKSoftmax.
  MoeRouting Route(const torch::Tensor& flat, const torch::Tensor& weight,
                   const torch::Tensor& bias = {}) const;
  const torch::Tensor& weight() const { return weight_; }
  const torch::Tensor& bias() const { return bias_; }  // undefined but for kTopKSoftmax

 private:
  MoeRouter kind_;
  int64_t top_k_;
  bool normalize_;
  int64_t groups_, top_groups_;
  double scaling_;
  torch::Tensor weight_;
  torch::Tensor bias_;        // kTopKSoftmax
  torch::Tensor score_bias_;  // kGroupedSigmoid: e_score_correction_bias
};

// The experts and their router: x [B, T, hidden] (under sequence
// parallelism this rank's slice of T) -> the same shape.
class SparseMoeImpl : public torch::nn::Module {
 public:
  explicit SparseMoeImpl(const ModelSpec& spec);
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options);

 private:
  // The experts held here on `rows` [R, hidden] sorted by expert, `counts`
  // (host) rows per local expert -> [R, hidden] (partial sums under tensor
  // parallelism).
  torch::Tensor RunExperts(const torch::Tensor& rows, const std::vector<int64_t>& counts,
                           const RunOptions& options);

  // gpt_oss's expert `e` on `rows`: biases and clamped SwiGLU.
  // `down_bias` is down_proj_bias as the caller uses it (zeros on all but
  // the tensor-parallel group's first rank).
  torch::Tensor ClampedSwiGluExpert(int64_t e, const torch::Tensor& rows,
                                    const torch::Tensor& down_bias, const RunOptions& options);

  int64_t num_experts_;
  std::shared_ptr<MoeRouterImpl> gate_;
  torch::Tensor gate_up_proj_, down_proj_;  // this rank's experts (and slices)
  // gpt_oss (clamped_swiglu): the experts' biases; the SwiGLU's gain and clamp.
  torch::Tensor gate_up_proj_bias_, down_proj_bias_;
  double swiglu_alpha_ = 0, swiglu_limit_ = 0;
  // deepseek_v3's shared experts ("shared_experts.gate_proj", ...); null
  // for the others.
  torch::nn::Linear shared_gate_proj_{nullptr}, shared_up_proj_{nullptr},
      shared_down_proj_{nullptr};
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_MOE_H_
