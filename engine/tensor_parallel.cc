#include "engine/tensor_parallel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include <limits>
#include <vector>

#include "engine/autograd_pointers.h"
#include "engine/model.h"

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor SummedOverGroup(Group* group, const torch::Tensor& x) {
  torch::Tensor out = x.contiguous().clone();
  group->AllReduce(out);
  return out;
}

torch::Tensor Unchanged(Group*, const torch::Tensor& x) { return x.view_as(x); }

// [B, T / size, ...] slices <-> [B, T, ...] along dim 1, through [T, B, ...]
// so that each rank's slice is one contiguous block of the collective.
torch::Tensor GatheredSequence(Group* group, const torch::Tensor& x) {
  torch::Tensor local = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = local.sizes().vec();
  shape[0] *= group->size();
  torch::Tensor all = torch::empty(shape, local.options());
  group->AllGather(all, local);
  return all.transpose(0, 1);
}

torch::Tensor ScatteredSequenceSum(Group* group, const torch::Tensor& x) {
  torch::Tensor all = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = all.sizes().vec();
  TORCH_CHECK(shape[0] % group->size() == 0, "sequence length ", shape[0], " does not split over ",
              group->size(), " tensor-parallel ranks");
  shape[0] /= group->size();
  torch::Tensor mine = torch::empty(shape, all.options());
  group->Wait(group->ReduceScatterAsync(mine, all));
  return mine.transpose(0, 1);
}

// A collective in forward and its adjoint in backward, over the group passed
// as a handle (autograd Functions take only tensors and plain values).
using GroupMap = torch::Tensor (*)(Group*, const torch::Tensor&);
template <GroupMap kForward, GroupMap kBackward>
class GroupFunction : public torch::autograd::Function<GroupFunction<kForward, kBackward>> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return kForward(FromPointerHandle<Group>(group), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {kBackward(SavedPointer<Group>(ctx, "group"), grad[0]), torch::Tensor()};
  }
};
// Megatron's f (identity, all-reduce backward) and g (the reverse); with
// sequence parallelism all-gather / reduce-scatter along the sequence.
using CopyToRegion = GroupFunction<&Unchanged, &SummedOverGroup>;
using ReduceFromRegion = GroupFunction<&SummedOverGroup, &Unchanged>;
using GatherSequence = GroupFunction<&GatheredSequence, &ScatteredSequenceSum>;
using ScatterSequence = GroupFunction<&ScatteredSequenceSum, &GatheredSequence>;

int64_t GroupHandle(const TensorParallelShard* tp) { return PointerHandle(tp->group); }

bool Active(const TensorParallelShard* tp) { return tp != nullptr && tp->size > 1; }

bool SequenceParallel(const TensorParallelShard* tp) { return Active(tp) && tp->sequence_parallel; }

// The sum over the group of partial results: all-reduced, or
// reduce-scattered along the sequence.
}  // namespace

torch::Tensor SumPartials(const torch::Tensor& x, const TensorParallelShard* tp) {
  return SequenceParallel(tp) ? ScatterSequence::apply(x, GroupHandle(tp))
                              : ReduceFromTensorParallel(x, tp);
}

torch::Tensor ColumnParallelInput(const torch::Tensor& x, const TensorParallelShard* tp) {
  return SequenceParallel(tp) ? GatherSequence::apply(x, GroupHandle(tp))
                              : CopyToTensorParallel(x, tp);
}

torch::Tensor SequenceSlice(const torch::Tensor& x, int64_t dim, const TensorParallelShard* tp) {
  if (!SequenceParallel(tp)) return x;
  const int64_t n = x.size(dim) / tp->size;
  return x.narrow(dim, n * tp->rank, n);
}

void SumReplicatedGradients(std::vector<torch::Tensor>& params, const TensorParallelShard* tp) {
  if (!SequenceParallel(tp)) return;
  Group* group = tp->group;
  for (torch::Tensor& p : params) {
    p.register_hook([group](const torch::Tensor& grad) { return SummedOverGroup(group, grad); });
  }
}

torch::Tensor CopyToTensorParallel(const torch::Tensor& x, const TensorParallelShard* tp) {
  return Active(tp) ? CopyToRegion::apply(x, GroupHandle(tp)) : x;
}

torch::Tensor ReduceFromTensorParallel(const torch::Tensor& x, const TensorParallelShard* tp) {
  return Active(tp) ? ReduceFromRegion::apply(x, GroupHandle(tp)) : x;
}

torch::Tensor WeightSharedAcrossRanks(const torch::Tensor& weight, const TensorParallelShard* tp) {
  if (!Active(tp) || tp->sequence_parallel) return weight;
  return CopyToTensorParallel(weight, tp);
}

torch::Tensor RowParallelLinear(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias, const RunOptions& options) {
  const TensorParallelShard* tp = options.tp;
  if (!Active(tp)) return LayerLinear(x, weight, bias, options);
  torch::Tensor y = SumPartials(LayerLinear(x, weight, torch::Tensor(), options), tp);
  return bias.defined() ? y + bias : y;
}

torch::Tensor VocabParallelEmbedding(const torch::Tensor& tokens, const torch::Tensor& weight,
                                     const TensorParallelShard* tp) {
  if (!Active(tp)) return at::embedding(weight, tokens);
  const int64_t start = tp->vocab_start();
  const torch::Tensor outside = (tokens < start) | (tokens >= start + weight.size(0));
  const torch::Tensor local = (tokens - start).masked_fill(outside, 0);
  const torch::Tensor rows = at::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0);
  return SumPartials(rows, tp);
}

torch::Tensor VocabParallelCrossEntropy(const torch::Tensor& logits, const torch::Tensor& target,
                                        int64_t ignore_index, const TensorParallelShard& tp) {
  const torch::Tensor x = logits.to(torch::kFloat);
  const int64_t per_rank = x.size(1);
  const int64_t start = tp.vocab_start();
  // Padding columns (ids >= vocab_size) are no class at all.
  const torch::Tensor ids = torch::arange(start, start + per_rank, target.options());
  const torch::Tensor masked =
      x.masked_fill((ids >= tp.vocab_size).unsqueeze(0), -std::numeric_limits<float>::infinity());
  // log-sum-exp over the whole vocabulary, shifted by the global max (a
  // constant for the gradient).
  torch::Tensor shift = std::get<0>(masked.detach().max(/*dim=*/1, /*keepdim=*/true));
  if (Active(&tp)) {
    shift = shift.contiguous();
    tp.group->AllReduce(shift, c10d::ReduceOp::MAX);
  }
  const torch::Tensor sum_exp =
      ReduceFromTensorParallel((masked - shift).exp().sum(/*dim=*/1), &tp);
  const torch::Tensor lse = sum_exp.log() + shift.squeeze(1);
  // The target's logit, from the rank whose columns hold it.
  const torch::Tensor valid = target != ignore_index;
  const torch::Tensor local = target - start;
  const torch::Tensor here = valid & (local >= 0) & (local < per_rank);
  const torch::Tensor picked =
      masked.gather(1, local.clamp(0, per_rank - 1).unsqueeze(1)).squeeze(1).masked_fill(~here, 0);
  const torch::Tensor target_logit = ReduceFromTensorParallel(picked, &tp);
  const torch::Tensor per_token = (lse - target_logit).masked_fill(~valid, 0);
  return per_token.sum() / valid.sum().to(torch::kFloat);
}

void ShardParameters(torch::nn::Module& module, const TensorParallelShard& tp,
                     const std::function<TensorParallelSplit(const std::string& name)>& rule) {
  ShardParameters(module, tp.rank, tp.size, rule);
}

void ShardParameters(torch::nn::Module& module, int rank, int size,
                     const std::function<TensorParallelSplit(const std::string& name)>& rule) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters(/*recurse=*/true)) {
    const TensorParallelSplit split = rule(item.key());
    if (split.kind == TensorParallelSplit::kReplicate) continue;
    torch::Tensor& p = item.value();
    const int dim = split.first_dim + (split.kind == TensorParallelSplit::kRows ? 0 : 1);
    torch::Tensor full = p;
    if (split.pad_rows_to > full.size(0)) {
      std::vector<int64_t> pad_shape = full.sizes().vec();
      pad_shape[0] = split.pad_rows_to - full.size(0);
      full = torch::cat({full, torch::zeros(pad_shape, full.options())}, 0);
    }
    std::vector<int64_t> blocks = split.blocks;
    if (blocks.empty()) blocks.assign(split.parts, full.size(dim) / split.parts);
    int64_t total = 0;
    for (int64_t block : blocks) {
      TORCH_CHECK(block % size == 0, "parameter ", item.key(), ": a block of ", block,
                  " along dimension ", dim, " does not split into ", size, " slices");
      total += block;
    }
    TORCH_CHECK(total == full.size(dim), "parameter ", item.key(), ": dimension ", dim, " of size ",
                full.size(dim), " is not its blocks' ", total);
    std::vector<torch::Tensor> pieces;
    int64_t start = 0;
    for (int64_t block : blocks) {
      const int64_t slice = block / size;
      pieces.push_back(full.narrow(dim, start + rank * slice, slice));
      start += block;
    }
    p.set_data(torch::cat(pieces, dim).contiguous());
  }
}

}  // namespace autoaccel
