// Megatron-style tensor parallelism: the pieces a model's forward pass is
// built from when its layers are split over a tensor-parallel group.
//
// A column-parallel linear layer holds a slice of the output features (its
// input is replicated: CopyToTensorParallel before it, whose backward sums
// the input gradient over the group); a row-parallel one holds the matching
// slice of the input features, and ReduceFromTensorParallel sums the partial
// outputs (its backward passes the gradient through, replicated). Attention
// heads split with the column-parallel projections. The vocabulary is split
// in row blocks of the embedding (padded to a multiple of the group size)
// and the cross-entropy is computed over the split logits without ever
// gathering them.
//
// Sequence parallelism (TensorParallelShard::sequence_parallel): between the
// tensor-parallel regions (norms, residuals, the embedding's output) every
// rank keeps only its slice of the sequence, [B, T / size, C]; the input of
// a column-parallel layer is all-gathered along the sequence (its backward
// reduce-scatters), and a row-parallel layer reduce-scatters its partial
// sums along the sequence instead of all-reducing them (its backward
// all-gathers). The weights outside the split layers then see only part of
// the sequence, so their gradients are summed over the group
// (SumReplicatedGradients).
//
// With `tp` null every function is the single-device operation.
//
// Functions throw c10::Error like any LibTorch code.
#ifndef AUTOACCEL_ENGINE_TENSOR_PARALLEL_H_
#define AUTOACCEL_ENGINE_TENSOR_PARALLEL_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/distributed.h"

namespace autoaccel {

struct RunOptions;

// This rank's place in a tensor-parallel group, and the vocabulary split.
struct TensorParallelShard {
  Group* group = nullptr;
  int rank = 0;
  int size = 1;
  int64_t vocab_size = 0;      // the model's true vocabulary
  int64_t vocab_per_rank = 0;  // ceil(vocab_size / size)
  bool sequence_parallel = false;
  int64_t vocab_start() const { return vocab_per_rank * rank; }
};

// The input of a column-parallel layer: CopyToTensorParallel, or under
// sequence parallelism the all-gather of the sequence slices (dim 1).
torch::Tensor ColumnParallelInput(const torch::Tensor& x, const TensorParallelShard* tp);
// This rank's slice of `x` along dim `dim` under sequence parallelism, else
// `x` (e.g. the position embeddings of the rank's tokens).
torch::Tensor SequenceSlice(const torch::Tensor& x, int64_t dim, const TensorParallelShard* tp);
// Registers on each of `params` (weights replicated over the group) a
// gradient hook that sums the gradient over the group before it is
// accumulated: under sequence parallelism each rank's gradient covers only
// its slice of the sequence.
void SumReplicatedGradients(std::vector<torch::Tensor>& params, const TensorParallelShard* tp);

// Partial sums of a row-parallel computation summed over the group
// (reduce-scattered along the sequence under sequence parallelism); what
// RowParallelLinear applies after its product.
torch::Tensor SumPartials(const torch::Tensor& x, const TensorParallelShard* tp);

// Identity forward; backward all-reduces the gradient over the group.
torch::Tensor CopyToTensorParallel(const torch::Tensor& x, const TensorParallelShard* tp);
// All-reduce (sum) forward; identity backward.
torch::Tensor ReduceFromTensorParallel(const torch::Tensor& x, const TensorParallelShard* tp);

// A row-parallel linear layer: x [.., in / size] @ weight[out, in / size]^T
// (LayerLinear: in fp8 when options.fp8), summed over options.tp's group
// (reduce-scattered along the sequence under sequence parallelism), plus the
// (replicated) bias.
torch::Tensor RowParallelLinear(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias, const RunOptions& options);

// Embedding lookup in this rank's vocabulary rows (`weight` [vocab_per_rank,
// C]); tokens of other ranks contribute zeros; summed over the group
// (reduce-scattered along the sequence under sequence parallelism).
torch::Tensor VocabParallelEmbedding(const torch::Tensor& tokens, const torch::Tensor& weight,
                                     const TensorParallelShard* tp);

// Mean cross-entropy of `logits` [N, vocab_per_rank] (this rank's columns of
// the vocabulary; columns past vocab_size are padding and take no part)
// against global `target` ids [N], skipping targets equal to `ignore_index`.
// The same value on every rank of the group.
torch::Tensor VocabParallelCrossEntropy(const torch::Tensor& logits, const torch::Tensor& target,
                                        int64_t ignore_index, const TensorParallelShard& tp);

// How one parameter is split: rows (dim 0) or columns (dim 1) in `parts`
// equal contiguous blocks (so gpt2's fused [q; k; v] weight splits each
// third), or in blocks of the sizes `blocks` when given (phi3's [q; k; v]
// with fewer key/value heads), each block split over the ranks; padded with
// zero rows to a multiple of the group size; or kept.
struct TensorParallelSplit {
  enum Kind { kReplicate, kRows, kColumns } kind = kReplicate;
  int parts = 1;
  int64_t pad_rows_to = 0;        // kRows: pad dim 0 to this many rows first (0: none)
  std::vector<int64_t> blocks{};  // sizes along the split dimension; overrides `parts`
  // Leading dimensions kept whole: "rows" and "columns" are dimensions
  // first_dim and first_dim + 1 (1 for stacked experts [E, rows, columns]).
  int first_dim = 0;
};

// A weight replicated over the group but applied inside the tensor-parallel
// region to this rank's heads only (qwen3's per-head q_norm and k_norm):
// each rank's gradient covers its own heads, so the weight's gradient is
// summed over the group in backward (it passes through
// CopyToTensorParallel). Under sequence parallelism the trainer already sums
// the gradient of every replicated weight (SumReplicatedGradients), and this
// is the identity.
torch::Tensor WeightSharedAcrossRanks(const torch::Tensor& weight, const TensorParallelShard* tp);

// Replaces every parameter of `module` by its slice for `tp.rank`, as
// `rule(name)` says. Call on the full model (the same on every rank) before
// it trains.
void ShardParameters(torch::nn::Module& module, const TensorParallelShard& tp,
                     const std::function<TensorParallelSplit(const std::string& name)>& rule);
// The same for slice `rank` of `size` (e.g. expert parallelism's share of
// the experts).
void ShardParameters(torch::nn::Module& module, int rank, int size,
                     const std::function<TensorParallelSplit(const std::string& name)>& rule);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_TENSOR_PARALLEL_H_
