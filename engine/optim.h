// The optimizer side of a trial's strategy: AdamW one parameter at a time or
// as one fused kernel, over the model's own parameters or over fp32 master
// copies (pure_bf16 weights, optimizer state offloaded to host memory), and
// the dynamic loss scaler that fp16 training needs.
//
// Methods throw c10::Error (OutOfMemoryError included) like any LibTorch code.
// Not thread-safe: one trainer drives one of each.
#ifndef AUTOACCEL_ENGINE_OPTIM_H_
#define AUTOACCEL_ENGINE_OPTIM_H_

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "spec/strategy.h"

namespace autoaccel {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled, as torch.optim.AdamW
};

// AdamW over `params` (the model's trainable parameters, any floating dtype,
// all on one device).
//
// Without master copies the optimizer updates `params` in place and keeps its
// moments beside them. With master copies it keeps an fp32 copy of every
// parameter on `master_device` with the moments next to it; Step() copies the
// gradients there (converted to fp32), updates the copies, and writes them
// back into `params` (rounded to the parameters' dtype). That is pure-bf16
// training (master on the training device) and optimizer-state offload
// (master on the CPU), or both.
//
// kAdamW runs torch::optim::AdamW (a loop over parameters); kFusedAdamW runs
// ATen's _fused_adamw_ over all of them at once. Both compute the same update.
class TrainingOptimizer {
 public:
  TrainingOptimizer(std::vector<torch::Tensor> params, Optimizer kind, bool master_copies,
                    torch::Device master_device, AdamWConfig config = {});

  // Drops the gradients of the parameters. (The master copies' gradients
  // are kept as buffers: Step() overwrites them.)
  void ZeroGrad();

  // One AdamW step from the parameters' current gradients, which must be
  // unscaled. Parameters without a gradient are left alone.
  void Step();

  // What the optimizer updates: the master copies, or the parameters.
  const std::vector<torch::Tensor>& updated_tensors() const;
  bool has_master_copies() const { return !masters_.empty(); }

 private:
  void FusedStep(const std::vector<torch::Tensor>& targets);

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> masters_;  // empty without master copies
  Optimizer kind_;
  AdamWConfig config_;
  std::unique_ptr<torch::optim::AdamW> adamw_;  // kAdamW
  // kFusedAdamW state per updated tensor, created at its first step.
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_, step_;
};

// Dynamic loss scaling for fp16, as torch.amp.GradScaler does it: the loss is
// multiplied by `scale` before backward so that small gradients survive fp16;
// the gradients are divided by it before the optimizer step; a step whose
// gradients hold inf or NaN is skipped and the scale multiplied by
// backoff_factor; after growth_interval clean steps in a row the scale is
// multiplied by growth_factor.
class DynamicLossScaler {
 public:
  struct Options {
    double init_scale = 65536.0;  // 2^16
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int growth_interval = 2000;
  };
  DynamicLossScaler(torch::Device device, Options options);
  explicit DynamicLossScaler(torch::Device device) : DynamicLossScaler(device, Options()) {}

  // loss * scale.
  torch::Tensor Scale(const torch::Tensor& loss) const;

  // Divides the gradients of `params` by the scale in place and updates the
  // scale. Returns true when a gradient held inf or NaN: the caller skips
  // this optimizer step. Synchronises with the device (reads one flag).
  // `combine`, when set, gets the inf/NaN count [1] before it is read: with
  // gradients sharded over ranks it sums the count over them, so that every
  // rank skips the same steps.
  bool UnscaleAndUpdate(const std::vector<torch::Tensor>& params,
                        const std::function<void(torch::Tensor&)>& combine = nullptr);

  double scale() const;

 private:
  Options options_;
  torch::Tensor scale_;           // [1] float32 on the device
  torch::Tensor growth_tracker_;  // [1] int32: clean steps in a row
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_OPTIM_H_
