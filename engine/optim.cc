#include "engine/optim.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

namespace autoaccel {

TrainingOptimizer::TrainingOptimizer(std::vector<torch::Tensor> params, Optimizer kind,
                                     bool master_copies, torch::Device master_device,
                                     AdamWConfig config)
    : params_(std::move(params)), kind_(kind), config_(config) {
  if (master_copies) {
    torch::NoGradGuard no_grad;
    masters_.reserve(params_.size());
    for (const torch::Tensor& p : params_) {
      // A leaf of its own (never part of a graph), so that it can hold a .grad.
      masters_.push_back(p.detach()
                             .to(master_device, torch::kFloat, /*non_blocking=*/false,
                                 /*copy=*/true)
                             .requires_grad_(true));
    }
  }
  if (kind_ == Optimizer::kAdamW) {
    adamw_ = std::make_unique<torch::optim::AdamW>(updated_tensors(),
                                                   torch::optim::AdamWOptions(config_.lr)
                                                       .betas({config_.beta1, config_.beta2})
                                                       .eps(config_.eps)
                                                       .weight_decay(config_.weight_decay));
  }
}

const std::vector<torch::Tensor>& TrainingOptimizer::updated_tensors() const {
  return masters_.empty() ? params_ : masters_;
}

void TrainingOptimizer::ZeroGrad() {
  // Master gradients are buffers Step() overwrites; keeping them saves an
  // allocation per parameter and step.
  for (torch::Tensor& p : params_) p.mutable_grad().reset();
}

void TrainingOptimizer::Step() {
  torch::NoGradGuard no_grad;
  if (!masters_.empty()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const torch::Tensor& g = params_[i].grad();
      torch::Tensor& master_grad = masters_[i].mutable_grad();
      if (!g.defined()) {
        master_grad.reset();  // no gradient this step: the optimizer skips it
      } else if (master_grad.defined()) {
        master_grad.copy_(g);  // converts dtype and device
      } else {
        master_grad = g.to(masters_[i].device(), torch::kFloat);
      }
    }
  }
  if (kind_ == Optimizer::kAdamW) {
    adamw_->step();
  } else {
    FusedStep(updated_tensors());
  }
  if (!masters_.empty()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (masters_[i].grad().defined()) params_[i].detach().copy_(masters_[i]);
    }
  }
}

void TrainingOptimizer::FusedStep(const std::vector<torch::Tensor>& targets) {
  if (exp_avg_.empty()) {
    for (const torch::Tensor& t : targets) {
      exp_avg_.push_back(torch::zeros_like(t, at::MemoryFormat::Preserve));
      exp_avg_sq_.push_back(torch::zeros_like(t, at::MemoryFormat::Preserve));
      // _fused_adamw_ reads the step count from a float tensor beside the
      // parameter; the caller increments it first (as torch.optim does).
      step_.push_back(torch::zeros({}, t.options().dtype(torch::kFloat)));
    }
  }
  // The kernel wants every list dense; parameters without a gradient sit out.
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i].grad().defined()) continue;
    params.push_back(targets[i]);
    grads.push_back(targets[i].grad());
    exp_avgs.push_back(exp_avg_[i]);
    exp_avg_sqs.push_back(exp_avg_sq_[i]);
    steps.push_back(step_[i]);
  }
  if (params.empty()) return;
  at::_foreach_add_(steps, 1);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, config_.lr,
                    config_.beta1, config_.beta2, config_.weight_decay, config_.eps,
                    /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/std::nullopt,
                    /*found_inf=*/std::nullopt);
}

DynamicLossScaler::DynamicLossScaler(torch::Device device, Options options)
    : options_(options),
      scale_(torch::full({1}, options.init_scale,
                         torch::TensorOptions().dtype(torch::kFloat).device(device))),
      growth_tracker_(torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt).device(device))) {
  TORCH_CHECK(options.init_scale > 0 && options.growth_factor > 1 && options.backoff_factor > 0 &&
                  options.backoff_factor < 1 && options.growth_interval > 0,
              "DynamicLossScaler: bad options");
}

torch::Tensor DynamicLossScaler::Scale(const torch::Tensor& loss) const {
  return loss * scale_.to(loss.scalar_type());
}

bool DynamicLossScaler::UnscaleAndUpdate(const std::vector<torch::Tensor>& params,
                                         const std::function<void(torch::Tensor&)>& combine) {
  torch::NoGradGuard no_grad;
  torch::Tensor found_inf = torch::zeros_like(scale_);
  const torch::Tensor inv_scale = scale_.reciprocal();
  // The kernel takes one dtype and device per call; groups in first-seen order.
  std::vector<std::pair<torch::TensorOptions, std::vector<torch::Tensor>>> groups;
  for (const torch::Tensor& p : params) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& group) {
      return group.first.dtype() == g.dtype() && group.first.device() == g.device();
    });
    if (it == groups.end()) it = groups.insert(groups.end(), {g.options(), {}});
    it->second.push_back(g);
  }
  for (auto& [options, grads] : groups) {
    torch::Tensor group_found =
        torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(options.device()));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, group_found,
                                                   inv_scale.to(options.device()));
    found_inf.add_(group_found.to(found_inf.device()));
  }
  if (combine) combine(found_inf);
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  return found_inf.item<float>() > 0;
}

double DynamicLossScaler::scale() const { return scale_.item<double>(); }

}  // namespace autoaccel
