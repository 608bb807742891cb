#include "engine/router_loss.h"

#include <torch/autograd.h>

#include <tuple>

#include "engine/context_parallel.h"
#include "engine/distributed.h"
#include "engine/model.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

RouterLoss* OwnerOf(AutogradContext* ctx) {
  return reinterpret_cast<RouterLoss*>(ctx->saved_data["owner"].toInt());
}

}  // namespace

// output, probability sums [E] -> output; backward adds the loss's gradient
// with respect to the probability sums.
class RouterLoss::Inject : public torch::autograd::Function<Inject> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& output,
                               const torch::Tensor& /*prob_sums*/, RouterLoss* owner) {
    ctx->saved_data["owner"] = reinterpret_cast<int64_t>(owner);
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const RouterLoss* owner = OwnerOf(ctx);
    TORCH_CHECK(owner->loss_gradient_.defined(),
                "router auxiliary loss: backward reached an expert layer before the loss "
                "(RouterLoss::AddTo was not on the path to the loss)");
    return {grad_outputs[0], owner->loss_gradient_ * owner->gradient_per_prob_, torch::Tensor()};
  }
};

// loss, value -> loss + value; backward keeps the gradient arriving at the
// loss for the layers' Inject nodes.
class RouterLoss::Add : public torch::autograd::Function<Add> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& loss,
                               const torch::Tensor& value, RouterLoss* owner) {
    ctx->saved_data["owner"] = reinterpret_cast<int64_t>(owner);
    return loss + value;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    OwnerOf(ctx)->loss_gradient_ = grad_outputs[0].detach().to(torch::kFloat);
    return {grad_outputs[0], torch::Tensor(), torch::Tensor()};
  }
};

RouterLoss::RouterLoss(int64_t experts, int64_t top_k, double coefficient)
    : experts_(experts), top_k_(top_k), coefficient_(coefficient) {
  TORCH_CHECK(experts > 0 && top_k > 0 && top_k <= experts && coefficient > 0,
              "RouterLoss: needs experts > 0, 0 < top_k <= experts and coefficient > 0");
}

void RouterLoss::Begin() {
  counts_ = torch::Tensor();
  probs_ = torch::Tensor();
  rows_ = 0;
  added_ = false;
  gradient_per_prob_ = torch::Tensor();
  loss_gradient_ = torch::Tensor();
}

torch::Tensor RouterLoss::Record(const torch::Tensor& logits, const torch::Tensor& output) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) == experts_,
              "RouterLoss::Record: logits must be [tokens, ", experts_, "], got ", logits.sizes());
  // In the logits' dtype, as transformers' load_balancing_loss_func.
  const torch::Tensor probs = logits.softmax(/*dim=*/-1);
  const torch::Tensor prob_sums = probs.to(torch::kFloat).sum(/*dim=*/0);
  if (!added_) {
    const torch::TensorOptions fp32 = logits.options().dtype(torch::kFloat);
    if (!counts_.defined()) {
      counts_ = torch::zeros({experts_}, fp32);
      probs_ = torch::zeros({experts_}, fp32);
    }
    const torch::Tensor chosen = std::get<1>(probs.detach().topk(top_k_, /*dim=*/-1)).reshape(-1);
    counts_.index_add_(0, chosen, torch::ones({chosen.size(0)}, fp32));
    probs_ += prob_sums.detach();
    rows_ += logits.size(0);
  }
  return Inject::apply(output, prob_sums, this);
}

torch::Tensor RouterLoss::AddTo(const torch::Tensor& loss, const RunOptions& options) {
  TORCH_CHECK(counts_.defined() && !added_,
              "RouterLoss::AddTo: needs Begin and at least one expert layer's Record first");
  torch::Tensor totals =
      torch::cat({counts_, torch::full({1}, static_cast<double>(rows_), counts_.options())});
  double share = 1;  // of the group's average: context_parallel
  if (ContextParallel(options.cp)) {
    options.cp->group->AllReduce(totals);
    share = options.cp->size;
  }
  const torch::Tensor rows = totals[experts_];
  // d(value) / d(P_e) for this rank's P: coefficient * E * C_e / N^2, times
  // its share of the context-parallel group's average.
  const torch::Tensor per_prob = totals.narrow(0, 0, experts_) *
                                 (coefficient_ * static_cast<double>(experts_) * share) /
                                 (rows * rows);
  const int tp = options.tp != nullptr ? options.tp->size : 1;
  gradient_per_prob_ = per_prob / tp;
  added_ = true;
  const torch::Tensor value = (per_prob * probs_).sum();
  return Add::apply(loss, value.to(loss.scalar_type()), this);
}

}  // namespace autoaccel
