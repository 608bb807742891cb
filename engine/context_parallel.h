// Context parallelism: each sample's sequence split over a group of ranks,
// with attention still computed over the whole sequence.
//
// The sequence of T tokens is cut into 2 * size chunks of T / (2 * size);
// rank c holds chunks c and 2 * size - 1 - c, in that order (the zig-zag
// that gives every rank the same share of causal attention work). Every
// position-dependent piece of a model reads its tokens' true positions from
// ContextParallelPositions: rotary angles, learned position embeddings and
// the attention mask.
//
// Attention (RingAttend, GatherKeyValues) needs every earlier token's keys and
// values, which other ranks hold:
//   - p2p: a ring. Each of `size` steps attends to the key/value block in
//     hand while passing it to the next rank (send and receive overlap the
//     block's attention), and merges the blocks' results by their running
//     maximum and sum (online softmax). Of another rank's block causality
//     lets half be seen (its first chunk by every query, or all of it by
//     the rank's second chunk), and only that half is computed. Backward recomputes each block from
//     q, the blocks and the saved log-sum-exp, passing each block's key and
//     value gradients along the ring with it until they reach their owner.
//     Nothing of size T x T is ever kept.
//   - all_gather: the keys and values of the whole sequence are gathered
//     (their gradients reduce-scattered in backward), then attention runs as
//     on one device with the mask built from true positions.
//
// The loss over the whole sequence is the mean over every rank's tokens:
// each rank's mean is rescaled by its share of the group's tokens
// (ContextParallelLossScale), and the gradients of the weights, which every
// rank of the group holds whole, are reduced over the data- and
// context-parallel ranks together (distributed.h's data_context group).
//
// With `cp` null (or of size 1) every function is the single-device
// operation. Functions throw c10::Error like any LibTorch code; the
// collectives run over `cp->group` and must be called by every rank of it in
// the same order.
#ifndef AUTOACCEL_ENGINE_CONTEXT_PARALLEL_H_
#define AUTOACCEL_ENGINE_CONTEXT_PARALLEL_H_

#include <torch/types.h>

#include <cstdint>

#include "engine/distributed.h"
#include "spec/strategy.h"

namespace autoaccel {

struct AttentionShape;

// This rank's place in a context-parallel group.
struct ContextParallelShard {
  Group* group = nullptr;
  int rank = 0;
  int size = 1;
  int64_t seq_len = 0;  // the whole sequence, T
  ContextParallelComm comm = ContextParallelComm::kP2p;
};

// True when `cp` splits the sequence (more than one rank).
bool ContextParallel(const ContextParallelShard* cp);

// This rank's part of `x` along dimension `dim` (length T): its two chunks,
// concatenated. `x` itself without context parallelism.
torch::Tensor ContextShardOf(const torch::Tensor& x, int64_t dim, const ContextParallelShard* cp);

// The positions in the whole sequence (int64, on `device`) of this rank's
// `local_len` tokens, in local order; 0 .. local_len - 1 without context
// parallelism. REQUIRES: local_len == cp->seq_len / cp->size.
torch::Tensor ContextParallelPositions(const ContextParallelShard* cp, int64_t local_len,
                                       const torch::Device& device);

// The whole sequence's length: cp->seq_len, or `local_len` without context
// parallelism (what rope scalings that depend on the length read).
int64_t WholeSequenceLength(const ContextParallelShard* cp, int64_t local_len);

// p2p: causal attention of this rank's queries q [B, H, t, D] over the whole
// sequence, given this rank's keys and values k, v [B, H_kv, t, D] (t = T /
// size), as model.h's Attend computes it on one device with the math kernel
// (scale, soft-cap, sliding window, grouped-query heads, attention sinks
// counted once per row, not per block), each block in
// fp32. Returns [B, t, H * D] in q's dtype. REQUIRES: shape.causal, and `cp`
// splits the sequence.
torch::Tensor RingAttend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const AttentionShape& shape, const ContextParallelShard& cp);

// all_gather: the whole sequence's keys and values [B, H_kv, T, D] (ranks'
// blocks in rank order; backward reduce-scatters their gradients), and
// `shape` with the true positions of this rank's queries and of the gathered
// keys, so that Attend masks by position. REQUIRES: `cp` splits the sequence.
// Gathers k and v and fills `shape_out` (a copy of `shape` with positions).
void GatherKeyValues(const torch::Tensor& k, const torch::Tensor& v, const AttentionShape& shape,
                     const ContextParallelShard& cp, torch::Tensor* k_out, torch::Tensor* v_out,
                     AttentionShape* shape_out);

// The factor that turns this rank's mean loss over its counted tokens
// (`counted`: true where a target counts, on the model's device) into its
// part of the whole sequence's mean, given that the group's gradients are
// averaged over its ranks: size * local count / (the group's total count),
// a 0-dim fp64 tensor on that device. All-reduces the count over the group.
torch::Tensor ContextParallelLossScale(const torch::Tensor& counted,
                                       const ContextParallelShard& cp);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_CONTEXT_PARALLEL_H_
