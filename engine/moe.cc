#include "engine/moe.h"

#include <ATen/ATen.h>

#include <memory>
#include <vector>

namespace autoaccel {

MoeRouterImpl::MoeRouterImpl(const ModelSpec& spec) : top_k_(spec.num_experts_per_tok) {
  weight_ = register_parameter("weight", torch::empty({spec.num_local_experts, spec.n_embd}));
}

MoeRouting MoeRouterImpl::Route(const torch::Tensor& flat, const torch::Tensor& weight) const {
  const torch::Tensor probs = at::linear(flat, weight).to(torch::kFloat).softmax(/*dim=*/-1);
  auto [top_weights, top_experts] = probs.topk(top_k_, /*dim=*/-1);  // [N, k]
  return {top_weights / top_weights.sum(/*dim=*/-1, /*keepdim=*/true), top_experts};
}

SparseMoeImpl::SparseMoeImpl(const ModelSpec& spec) : num_experts_(spec.num_local_experts) {
  gate_ = register_module("gate", std::make_shared<MoeRouterImpl>(spec));
  auto experts = register_module("experts", std::make_shared<torch::nn::Module>());
  gate_up_proj_ = experts->register_parameter(
      "gate_up_proj", torch::empty({num_experts_, 2 * int64_t{spec.n_inner}, spec.n_embd}));
  down_proj_ = experts->register_parameter("down_proj",
                                           torch::empty({num_experts_, spec.n_embd, spec.n_inner}));
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
  return out.view(x.sizes());
}

}  // namespace autoaccel
