// Data parallelism over a trial's data-parallel group, with the ZeRO stages:
//
//   none   every rank keeps all parameters, gradients and optimizer state;
//          gradients are all-reduced in buckets while backward is still
//          running (DDP): each bucket's all-reduce starts from a hook on the
//          gradient accumulation of its last parameter.
//   zero1  the same gradient all-reduce; each rank updates only its shard of
//          the parameters (so holds only that shard's optimizer state and
//          fp32 masters), then the shards are all-gathered.
//   zero2  gradients are reduce-scattered per bucket (after every
//          micro-batch) into a gradient shard; the full gradients are freed
//          as soon as their bucket is reduced.
//   fsdp   ZeRO-3: each rank keeps only its shard of every parameter. A
//          transformer layer's parameters are all-gathered just before it
//          runs (forward, and again before its backward) and freed after;
//          the parameters outside the layers (embeddings, final norm, head)
//          form one more unit, gathered for each micro-batch. Gradients are
//          reduce-scattered per unit as soon as the unit's backward is done.
//
// Parameters are packed into flat buffers (one per bucket / unit, padded to a
// multiple of the group size) and become views of them, so that a shard is a
// contiguous slice and every collective is one call. Shards hold the same
// values on every rank count: the optimizer applies the same elementwise
// AdamW update to a slice as to whole parameters.
//
// Not thread-safe; one trainer drives one instance on one thread (the
// gradient hooks run on the autograd engine's thread while backward runs,
// which the trainer waits for).
#ifndef AUTOACCEL_ENGINE_DATA_PARALLEL_H_
#define AUTOACCEL_ENGINE_DATA_PARALLEL_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/distributed.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "spec/strategy.h"

namespace autoaccel {

struct DataParallelOptions {
  Sharding sharding = Sharding::kNone;
  // Target size of a gradient bucket (none, zero1, zero2); DDP's default.
  int64_t bucket_bytes = int64_t{25} << 20;
  // The optimizer of the strategy, built over what this rank updates.
  Optimizer optimizer = Optimizer::kAdamW;
  bool master_copies = false;
  torch::Device master_device = torch::kCPU;
  // Expert parallelism: the parameters of `expert_params` (routed experts;
  // those not among the constructor's `params` are ignored) are reduced
  // and sharded over `expert_group` (the ranks that hold the same experts)
  // instead of the constructor's group; their gradients are still divided
  // by that group's size, since each rank's expert gradients already sum
  // the contributions of its expert-parallel peers' tokens. Null: none.
  Group* expert_group = nullptr;
  std::vector<torch::Tensor> expert_params;
};

class DataParallel : public LayerHooks {
 public:
  // `params`: the model's trainable parameters (all on one device, one
  // dtype, each requiring grad). `layers`: for fsdp, the parameters of each
  // transformer layer in order (disjoint subsets of `params`; empty for a
  // layer this rank does not run); the rest form one more unit. Ignored for
  // the other stages. Every rank of the group
  // must construct it with the same shapes. Throws c10::Error.
  DataParallel(Group* group, std::vector<torch::Tensor> params,
               const std::vector<std::vector<torch::Tensor>>& layers, DataParallelOptions options);
  ~DataParallel() override;

  // (Gradients are averaged over `group`: divided by its size.)
  // Zeroes the gradients (or gradient shards) for a new step.
  void ZeroGrad();
  // Before each micro-batch's forward pass (fsdp: gathers the parameters
  // outside the layers).
  void BeginForward();
  // Around each micro-batch's backward pass; `last` marks the step's last
  // one (with stage none and zero1 gradients are reduced only then).
  // EndBackward waits for every reduction the pass started and starts
  // those whose hooks did not fire (parameters without a gradient count as
  // zero).
  void BeginBackward(bool last);
  void EndBackward();

  // The tensors whose gradients the loss scaler unscales: the parameters
  // (none) or this rank's shards.
  const std::vector<torch::Tensor>& optimizer_tensors() const { return optimized_; }
  // Sums an inf/NaN count over the group (the scaler's `combine`).
  void CombineFoundInf(torch::Tensor& found_inf);
  // The optimizer step over what this rank owns, then (zero1, zero2) the
  // all-gather of the updated shards.
  void Step();
  const TrainingOptimizer& optimizer() const { return *optimizer_; }

  // fsdp: gathers / frees the parameters of layer `layer`; see LayerHooks.
  void BeforeForward(int layer) override;
  void AfterForward(int layer, torch::Tensor& output) override;
  // The hooks RunOptions should carry: this for fsdp, else null.
  LayerHooks* hooks() { return options_.sharding == Sharding::kFsdp ? this : nullptr; }

  // Copies of every parameter's full value, in `params` order (fsdp gathers
  // them); for checks and digests.
  std::vector<torch::Tensor> FullParameters();

 private:
  struct Flat;

  void Gather(Flat& f);
  void Release(Flat& f);
  void OnGradReady(size_t flat_index);
  void StartReduction(Flat& f);
  void FinishReduction(Flat& f);

  Group* group_;
  DataParallelOptions options_;
  std::vector<std::unique_ptr<Flat>> flats_;   // buckets or units
  std::vector<std::vector<int>> layer_units_;  // fsdp: layer -> its units (dense, experts)
  std::vector<int> root_units_;                // fsdp: the units outside the layers
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> optimized_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keep hooks alive
  std::unique_ptr<TrainingOptimizer> optimizer_;
  bool reduce_this_micro_batch_ = true;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_DATA_PARALLEL_H_
