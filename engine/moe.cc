#include "engine/moe.h"

#include <ATen/ATen.h>

#include <limits>
#include <memory>
#include <vector>

namespace autoaccel {

MoeRouterImpl::MoeRouterImpl(const ModelSpec& spec)
    : kind_(spec.Info().router),
      top_k_(spec.num_experts_per_tok),
      normalize_(spec.norm_topk_prob),
      groups_(spec.n_group),
      top_groups_(spec.topk_group),
      scaling_(spec.routed_scaling_factor) {
  weight_ = register_parameter("weight", torch::empty({spec.num_local_experts, spec.n_embd}));
  if (kind_ == MoeRouter::kGroupedSigmoid) {
    score_bias_ =
        register_buffer("e_score_correction_bias", torch::zeros({spec.num_local_experts}));
  }
}

MoeRouting MoeRouterImpl::Route(const torch::Tensor& flat, const torch::Tensor& weight) const {
  if (kind_ == MoeRouter::kSoftmax) {
    const torch::Tensor probs = at::linear(flat, weight).to(torch::kFloat).softmax(/*dim=*/-1);
    auto [top_weights, top_experts] = probs.topk(top_k_, /*dim=*/-1);  // [N, k]
    if (normalize_) top_weights = top_weights / top_weights.sum(/*dim=*/-1, /*keepdim=*/true);
    return {top_weights, top_experts};
  }
  const int64_t n = flat.size(0), experts = weight.size(0);
  const torch::Tensor scores =
      at::linear(flat.to(torch::kFloat), weight.to(torch::kFloat)).sigmoid();  // [N, E]
  // Choosing is not differentiated (as in transformers, whose indices
  // carry no gradient): only the chosen scores, gathered below, do.
  torch::Tensor ranked = scores.detach() + score_bias_.to(torch::kFloat);
  const torch::Tensor group_scores =
      std::get<0>(ranked.view({n, groups_, experts / groups_}).topk(2, /*dim=*/-1))
          .sum(/*dim=*/-1);  // [N, groups]
  const torch::Tensor top_groups = std::get<1>(group_scores.topk(top_groups_, /*dim=*/-1));
  const torch::Tensor in_top_group = torch::zeros_like(group_scores, torch::kBool)
                                         .scatter_(1, top_groups, true)
                                         .unsqueeze(-1)
                                         .expand({n, groups_, experts / groups_})
                                         .reshape({n, experts});
  ranked = ranked.masked_fill(in_top_group.logical_not(), -std::numeric_limits<double>::infinity());
  const torch::Tensor top_experts = std::get<1>(ranked.topk(top_k_, /*dim=*/-1));
  torch::Tensor top_weights = scores.gather(1, top_experts);
  if (normalize_)
    top_weights = top_weights / (top_weights.sum(/*dim=*/-1, /*keepdim=*/true) + 1e-20);
  return {top_weights * scaling_, top_experts};
}

SparseMoeImpl::SparseMoeImpl(const ModelSpec& spec) : num_experts_(spec.num_local_experts) {
  const int64_t width = spec.ExpertWidth();
  gate_ = register_module("gate", std::make_shared<MoeRouterImpl>(spec));
  auto experts = register_module("experts", std::make_shared<torch::nn::Module>());
  gate_up_proj_ = experts->register_parameter("gate_up_proj",
                                              torch::empty({num_experts_, 2 * width, spec.n_embd}));
  down_proj_ =
      experts->register_parameter("down_proj", torch::empty({num_experts_, spec.n_embd, width}));
  if (spec.Info().shared_experts) {
    const int64_t shared = width * spec.n_shared_experts;
    auto module = register_module("shared_experts", std::make_shared<torch::nn::Module>());
    auto linear = [&](const char* name, int64_t in, int64_t out) {
      return module->register_module(
          name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)));
    };
    shared_gate_proj_ = linear("gate_proj", spec.n_embd, shared);
    shared_up_proj_ = linear("up_proj", spec.n_embd, shared);
    shared_down_proj_ = linear("down_proj", shared, spec.n_embd);
  }
}

torch::Tensor SparseMoeImpl::Forward(const torch::Tensor& x, const RunOptions& options) {
  (void)options;
  const torch::Tensor flat = x.reshape({-1, x.size(-1)});
  const MoeRouting routing = gate_->Route(flat, gate_->weight());
  torch::Tensor out = torch::zeros_like(flat);
  for (int64_t e = 0; e < num_experts_; ++e) {
    // (token, slot) pairs routed to expert e; a token picks an expert once.
    const torch::Tensor routed = (routing.experts == e).nonzero();
    if (routed.size(0) == 0) continue;
    const torch::Tensor token = routed.select(1, 0), slot = routed.select(1, 1);
    const std::vector<torch::Tensor> gate_up =
        at::linear(flat.index_select(0, token), gate_up_proj_[e]).chunk(2, /*dim=*/-1);
    const torch::Tensor y = at::linear(at::silu(gate_up[0]) * gate_up[1], down_proj_[e]) *
                            routing.weights.index({token, slot}).unsqueeze(-1);
    out.index_add_(0, token, y.to(out.scalar_type()));
  }
  if (shared_down_proj_) {
    out = out + shared_down_proj_->forward(at::silu(shared_gate_proj_->forward(flat)) *
                                           shared_up_proj_->forward(flat));
  }
  return out.view(x.sizes());
}

}  // namespace autoaccel
