#include "engine/router_loss.h"

#include <torch/autograd.h>

#include <memory>
#include <tuple>

#include "engine/autograd_pointers.h"
#include "engine/context_parallel.h"
#include "engine/distributed.h"
#include "engine/model.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

}  // namespace

// output, probability sums [E] -> output; backward adds the loss's gradient
// with respect to the probability sums.
class RouterLoss::Inject : public torch::autograd::Function<Inject> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& output,
                               const torch::Tensor& /*prob_sums*/, RouterLoss* owner) {
    SavePointer(ctx, "owner", owner);
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    return {grad_outputs[0], SavedPointer<RouterLoss>(ctx, "owner")->Gradient(), torch::Tensor()};
  }
};

// loss, value -> loss + value; backward keeps the gradient arriving at the
// loss for the layers' Inject nodes.
class RouterLoss::Add : public torch::autograd::Function<Add> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& loss,
                               const torch::Tensor& value, RouterLoss* owner) {
    SavePointer(ctx, "owner", owner);
    return loss + value;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    SavedPointer<RouterLoss>(ctx, "owner")->loss_gradient_ =
        grad_outputs[0].detach().to(torch::kFloat);
    return {grad_outputs[0], torch::Tensor(), torch::Tensor()};
  }
};

RouterLoss::RouterLoss(int64_t experts, int64_t top_k, double coefficient)
    : experts_(experts), top_k_(top_k), coefficient_(coefficient) {
  TORCH_CHECK(experts > 0 && top_k > 0 && top_k <= experts && coefficient > 0,
              "RouterLoss: needs experts > 0, 0 < top_k <= experts and coefficient > 0");
}

std::unique_ptr<RouterLoss> RouterLoss::For(const ModelSpec& model) {
  if (model.router_aux_loss_coef <= 0) return nullptr;
  return std::make_unique<RouterLoss>(model.num_local_experts, model.num_experts_per_tok,
                                      model.router_aux_loss_coef);
}

void RouterLoss::Begin() {
  sums_ = torch::Tensor();
  closed_ = false;
  gradient_per_prob_ = torch::Tensor();
  loss_gradient_ = torch::Tensor();
  received_gradient_ = torch::Tensor();
}

void RouterLoss::Continue(const torch::Tensor& sums) {
  TORCH_CHECK(sums.numel() == 2 * experts_ + 1, "RouterLoss::Continue: expected ", 2 * experts_ + 1,
              " sums, got ", sums.numel());
  Begin();
  sums_ = sums.to(torch::kDouble).reshape({-1}).clone();
}

torch::Tensor RouterLoss::Record(const torch::Tensor& logits, const torch::Tensor& output) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) == experts_,
              "RouterLoss::Record: logits must be [tokens, ", experts_, "], got ", logits.sizes());
  // In the logits' dtype, as transformers' load_balancing_loss_func.
  const torch::Tensor probs = logits.softmax(/*dim=*/-1);
  const torch::Tensor prob_sums = probs.to(torch::kFloat).sum(/*dim=*/0);
  if (!closed_) {
    if (!sums_.defined())
      sums_ = torch::zeros({2 * experts_ + 1}, logits.options().dtype(torch::kDouble));
    const torch::Tensor chosen = std::get<1>(probs.detach().topk(top_k_, /*dim=*/-1)).reshape(-1);
    sums_.narrow(0, 0, experts_)
        .index_add_(0, chosen, torch::ones({chosen.size(0)}, sums_.options()));
    sums_.narrow(0, experts_, experts_).add_(prob_sums.detach());
    sums_[2 * experts_].add_(static_cast<double>(logits.size(0)));
  }
  return Inject::apply(output, prob_sums, this);
}

torch::Tensor RouterLoss::Close(const torch::TensorOptions& options) {
  closed_ = true;
  if (sums_.defined()) return sums_.clone();
  return torch::zeros({2 * experts_ + 1}, options.dtype(torch::kDouble));
}

torch::Tensor RouterLoss::AddTo(const torch::Tensor& loss, const RunOptions& options) {
  TORCH_CHECK(sums_.defined() && !closed_,
              "RouterLoss::AddTo: needs Begin and at least one expert layer's Record first");
  torch::Tensor totals = sums_.clone();
  double share = 1;  // of the group's average: context_parallel
  if (ContextParallel(options.cp)) {
    options.cp->group->AllReduce(totals);
    share = options.cp->size;
  }
  const torch::Tensor counts = totals.narrow(0, 0, experts_);
  const torch::Tensor probs = totals.narrow(0, experts_, experts_);
  const torch::Tensor rows = totals[2 * experts_];
  const torch::Tensor base =
      counts * (coefficient_ * static_cast<double>(experts_)) / (rows * rows);
  // d(loss) / d(P_e) for this rank's P: coefficient * E * C_e / N^2, times
  // its share of the context-parallel group's average, over the
  // tensor-parallel ranks that each inject it.
  const int tp = options.tp != nullptr ? options.tp->size : 1;
  gradient_per_prob_ = (base * (share / tp)).to(torch::kFloat);
  closed_ = true;
  // The whole sequences' value on every rank of the group, which averages it.
  const torch::Tensor value = (base * probs).sum();
  return Add::apply(loss, value.to(loss.scalar_type()), this);
}

torch::Tensor RouterLoss::Gradient() const {
  if (received_gradient_.defined()) return received_gradient_;
  TORCH_CHECK(loss_gradient_.defined() && gradient_per_prob_.defined(),
              "router auxiliary loss: backward reached an expert layer before the loss "
              "(RouterLoss::AddTo was not on the path to the loss)");
  return loss_gradient_ * gradient_per_prob_;
}

void RouterLoss::ReceiveGradient(const torch::Tensor& gradient) {
  TORCH_CHECK(gradient.numel() == experts_, "RouterLoss::ReceiveGradient: expected ", experts_,
              " values, got ", gradient.numel());
  received_gradient_ = gradient.to(torch::kFloat).reshape({-1});
}

}  // namespace autoaccel
