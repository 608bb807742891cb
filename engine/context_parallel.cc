#include "engine/context_parallel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <torch/autograd.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "engine/autograd_pointers.h"
#include "engine/model.h"

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// Message tags of the ring's passes (gloo matches a receive to a send by
// tag; NCCL by order, which every rank keeps the same).
constexpr int kForwardTag = 0;
constexpr int kBackwardTag = 1 << 10;
constexpr int kGradientTag = 2 << 10;

// The positions of rank `rank`'s tokens: chunks rank and 2 * size - 1 - rank.
torch::Tensor PositionsOf(const ContextParallelShard& cp, int rank, const torch::Device& device) {
  const int64_t chunk = cp.seq_len / (2 * int64_t{cp.size});
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(device);
  return torch::cat(
      {torch::arange(rank * chunk, (rank + 1) * chunk, options),
       torch::arange((2 * cp.size - 1 - rank) * chunk, (2 * cp.size - rank) * chunk, options)});
}

// Which keys each query may attend to: [t_q, t_k].
torch::Tensor Allowed(const torch::Tensor& query_positions, const torch::Tensor& key_positions,
                      int64_t window) {
  const torch::Tensor query = query_positions.unsqueeze(1), key = key_positions.unsqueeze(0);
  torch::Tensor allowed = key <= query;
  if (window > 0) allowed = allowed & (key > query - window);
  return allowed;
}

// [B, H_kv, t, D] -> [B, H, t, D] (each key/value head serves H / H_kv
// consecutive query heads), and the reverse sum for gradients.
torch::Tensor RepeatHeads(const torch::Tensor& x, int64_t heads) {
  const int64_t B = x.size(0), kv_heads = x.size(1), t = x.size(2), D = x.size(3);
  if (kv_heads == heads) return x;
  return x.unsqueeze(2).expand({B, kv_heads, heads / kv_heads, t, D}).reshape({B, heads, t, D});
}
torch::Tensor SumHeads(const torch::Tensor& x, int64_t kv_heads) {
  const int64_t B = x.size(0), heads = x.size(1), t = x.size(2), D = x.size(3);
  if (kv_heads == heads) return x;
  return x.view({B, kv_heads, heads / kv_heads, t, D}).sum(/*dim=*/2);
}

// One rank's keys and values in one flat buffer, for the ring's passes.
torch::Tensor Pack(const torch::Tensor& k, const torch::Tensor& v) {
  return torch::cat({k.reshape({-1}), v.reshape({-1})});
}
// (Values may be narrower than keys: latent attention's.)
std::pair<torch::Tensor, torch::Tensor> Unpack(const torch::Tensor& packed,
                                               c10::IntArrayRef k_shape, c10::IntArrayRef v_shape) {
  const int64_t n = c10::multiply_integers(k_shape);
  return {packed.narrow(0, 0, n).view(k_shape),
          packed.narrow(0, n, packed.numel() - n).view(v_shape)};
}

// Sends `out` to the next rank of the ring and receives `in` from the
// previous one, both started at once: even ranks send first, odd ranks
// receive first, so that two ranks that are each other's neighbours (a ring
// of two) start the matching halves in the same order.
struct RingPass {
  c10::intrusive_ptr<c10d::Work> send, recv;
};
RingPass StartPass(const ContextParallelShard& cp, torch::Tensor& out, torch::Tensor& in, int tag) {
  const int next = (cp.rank + 1) % cp.size, previous = (cp.rank + cp.size - 1) % cp.size;
  RingPass pass;
  if (cp.rank % 2 == 0) {
    pass.send = cp.group->SendAsync(out, next, tag);
    pass.recv = cp.group->RecvAsync(in, previous, tag);
  } else {
    pass.recv = cp.group->RecvAsync(in, previous, tag);
    pass.send = cp.group->SendAsync(out, next, tag);
  }
  return pass;
}
void FinishPass(const ContextParallelShard& cp, const RingPass& pass) {
  cp.group->Wait(pass.send);
  cp.group->Wait(pass.recv);
}

// The key/value block a step of the ring holds, and the next one on its
// way: step s holds rank (rank - s)'s block and, unless it is the last
// step, passes it on while receiving the next (tags `tag` + s).
class RingBlocks {
 public:
  RingBlocks(const ContextParallelShard& cp, torch::Tensor first, int tag)
      : cp_(cp), block_(std::move(first)), tag_(tag) {}

  void Begin(int step) {
    step_ = step;
    passes_ = step + 1 < cp_.size;
    if (passes_) {
      next_ = torch::empty_like(block_);
      pass_ = StartPass(cp_, block_, next_, tag_ + step);
    }
  }
  int source() const { return (cp_.rank + cp_.size - step_) % cp_.size; }
  const torch::Tensor& block() const { return block_; }
  // Waits for the step's pass and takes the received block in hand.
  void Advance() {
    if (!passes_) return;
    FinishPass(cp_, pass_);
    block_ = next_;
  }

 private:
  const ContextParallelShard& cp_;
  torch::Tensor block_, next_;
  RingPass pass_;
  int tag_, step_ = 0;
  bool passes_ = false;
};

// The part of rank `source`'s block that this rank's causal attention can
// see, as ranges of its t queries and of the block's t keys: its own block
// whole; an earlier rank's first chunk (its second comes after both of
// this rank's chunks) to every query; a later rank's whole block to this
// rank's second chunk of queries only (its first chunk comes before both).
// The rest is masked whatever the window, so the ring does not compute it.
struct VisiblePart {
  int64_t query_begin, queries, key_begin, keys;
};
VisiblePart Visible(const ContextParallelShard& cp, int source, int64_t t) {
  const int64_t half = t / 2;
  if (source == cp.rank) return {0, t, 0, t};
  if (source < cp.rank) return {0, t, 0, half};
  return {half, half, 0, t};
}

// The scores of queries q [B, H, t, D] (fp32) against one block's keys
// [B, H, t_k, D] (fp32): q k^T * scale, soft-capped when softcap > 0.
// `capped_tanh` receives tanh(raw / softcap) for the backward pass.
torch::Tensor BlockScores(const torch::Tensor& q, const torch::Tensor& keys, double scale,
                          double softcap, torch::Tensor* capped_tanh) {
  torch::Tensor scores = q.matmul(keys.transpose(-2, -1)).mul_(scale);
  if (softcap > 0) {
    *capped_tanh = (scores / softcap).tanh();
    scores = *capped_tanh * softcap;
  }
  return scores;
}

// The ring's attention as one autograd node: forward keeps q, k, v, the
// output and the rows' log-sum-exp; backward recomputes every block. Of
// another rank's block only the visible half is computed (VisiblePart).
class RingAttention : public torch::autograd::Function<RingAttention> {
 public:
  // `sinks` [H] (empty: none; autograd inputs must be defined) joins every
  // row's sum once, after the last block: a column of the softmax whose
  // value is zero.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& sinks, int64_t shard,
                               double scale, double softcap, int64_t window) {
    const ContextParallelShard& cp = *FromPointerHandle<const ContextParallelShard>(shard);
    const AutocastScope no_autocast(q.device().type(), false, torch::kFloat);
    const int64_t B = q.size(0), H = q.size(1), t = q.size(2), Dv = v.size(3);
    const torch::Tensor q32 = q.to(torch::kFloat);
    const torch::Tensor query_positions = PositionsOf(cp, cp.rank, q.device());
    const auto stats = q32.options();
    torch::Tensor row_max = torch::full({B, H, t}, kMinusInfinity, stats);
    torch::Tensor row_sum = torch::zeros({B, H, t}, stats);
    torch::Tensor acc = torch::zeros({B, H, t, Dv}, stats);
    RingBlocks ring(cp, Pack(k, v).contiguous(), kForwardTag);
    for (int step = 0; step < cp.size; ++step) {
      ring.Begin(step);
      const int source = ring.source();
      auto [kb, vb] = Unpack(ring.block(), k.sizes(), v.sizes());
      const VisiblePart part = Visible(cp, source, t);
      const auto keys_of = [&](const torch::Tensor& x) {
        return RepeatHeads(x.narrow(2, part.key_begin, part.keys).to(torch::kFloat), H);
      };
      torch::Tensor unused;
      torch::Tensor scores = BlockScores(q32.narrow(2, part.query_begin, part.queries), keys_of(kb),
                                         scale, softcap, &unused);
      scores.masked_fill_(
          Allowed(query_positions.narrow(0, part.query_begin, part.queries),
                  PositionsOf(cp, source, q.device()).narrow(0, part.key_begin, part.keys), window)
              .logical_not(),
          kMinusInfinity);
      // The visible rows' running statistics, updated in place. Every query
      // sees itself in the first block (its own), so the running maximum is
      // finite from then on.
      torch::Tensor max_rows = row_max.narrow(2, part.query_begin, part.queries);
      const torch::Tensor new_max = torch::maximum(max_rows, std::get<0>(scores.max(/*dim=*/-1)));
      const torch::Tensor weights = (scores - new_max.unsqueeze(-1)).exp_();
      const torch::Tensor carried = (max_rows - new_max).exp_();
      row_sum.narrow(2, part.query_begin, part.queries).mul_(carried).add_(weights.sum(/*dim=*/-1));
      acc.narrow(2, part.query_begin, part.queries)
          .mul_(carried.unsqueeze(-1))
          .add_(weights.matmul(keys_of(vb)));
      max_rows.copy_(new_max);
      ring.Advance();
    }
    const bool has_sinks = sinks.numel() > 0;
    if (has_sinks) {
      // The sink's term, by the larger of it and the running maximum.
      const torch::Tensor sink = sinks.to(torch::kFloat).view({1, H, 1}).expand({B, H, t});
      const torch::Tensor new_max = torch::maximum(row_max, sink);
      const torch::Tensor carried = (row_max - new_max).exp_();
      row_sum = row_sum * carried + (sink - new_max).exp();
      acc = acc * carried.unsqueeze(-1);
      row_max = new_max;
    }
    const torch::Tensor out = acc / row_sum.unsqueeze(-1);
    const torch::Tensor lse = row_max + row_sum.log();
    ctx->saved_data["sinks"] = has_sinks;
    ctx->save_for_backward({q, k, v, out, lse, sinks});
    ctx->saved_data["shard"] = shard;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["window"] = window;
    return out.to(q.scalar_type()).transpose(1, 2).reshape({B, t, H * Dv});
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const ContextParallelShard& cp = *SavedPointer<const ContextParallelShard>(ctx, "shard");
    const double scale = ctx->saved_data["scale"].toDouble();
    const double softcap = ctx->saved_data["softcap"].toDouble();
    const int64_t window = ctx->saved_data["window"].toInt();
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3],
                        &lse = saved[4];
    const AutocastScope no_autocast(q.device().type(), false, torch::kFloat);
    const int64_t B = q.size(0), H = q.size(1), t = q.size(2), Dv = v.size(3);
    const int64_t kv_heads = k.size(1);
    const torch::Tensor q32 = q.to(torch::kFloat);
    const torch::Tensor d_out =
        grad_outputs[0].reshape({B, t, H, Dv}).transpose(1, 2).to(torch::kFloat);
    const torch::Tensor delta = (d_out * out).sum(/*dim=*/-1, /*keepdim=*/true);
    const torch::Tensor query_positions = PositionsOf(cp, cp.rank, q.device());
    torch::Tensor d_q = torch::zeros_like(q32);
    RingBlocks ring(cp, Pack(k, v).contiguous(), kBackwardTag);
    // The gradients of the block in hand, which travel the ring with it.
    torch::Tensor d_block = torch::zeros({ring.block().numel()}, q32.options());
    for (int step = 0; step < cp.size; ++step) {
      ring.Begin(step);
      const int source = ring.source();
      auto [kb, vb] = Unpack(ring.block(), k.sizes(), v.sizes());
      const VisiblePart part = Visible(cp, source, t);
      const auto rows = [&](const torch::Tensor& x) {
        return x.narrow(2, part.query_begin, part.queries);
      };
      const auto keys_of = [&](const torch::Tensor& x) {
        return x.narrow(2, part.key_begin, part.keys);
      };
      const torch::Tensor keys = RepeatHeads(keys_of(kb).to(torch::kFloat), H);
      const torch::Tensor values = RepeatHeads(keys_of(vb).to(torch::kFloat), H);
      const torch::Tensor queries = rows(q32), d_rows = rows(d_out);
      torch::Tensor capped_tanh;
      const torch::Tensor scores = BlockScores(queries, keys, scale, softcap, &capped_tanh);
      const torch::Tensor allowed =
          Allowed(query_positions.narrow(0, part.query_begin, part.queries),
                  PositionsOf(cp, source, q.device()).narrow(0, part.key_begin, part.keys), window);
      const torch::Tensor probs =
          (scores - rows(lse.unsqueeze(-1))).exp_().masked_fill_(allowed.logical_not(), 0.0);
      const torch::Tensor d_values = probs.transpose(-2, -1).matmul(d_rows);
      torch::Tensor d_scores = probs * (d_rows.matmul(values.transpose(-2, -1)) - rows(delta));
      if (softcap > 0) d_scores = d_scores * (1 - capped_tanh * capped_tanh);
      rows(d_q).add_(d_scores.matmul(keys), scale);
      const torch::Tensor d_keys = d_scores.transpose(-2, -1).matmul(queries).mul_(scale);
      auto [d_block_k, d_block_v] = Unpack(d_block, k.sizes(), v.sizes());
      keys_of(d_block_k).add_(SumHeads(d_keys, kv_heads));
      keys_of(d_block_v).add_(SumHeads(d_values, kv_heads));
      ring.Advance();
      // This block's gradients follow it to the next rank; after the last
      // step that is the block's owner.
      torch::Tensor d_next = torch::empty_like(d_block);
      FinishPass(cp, StartPass(cp, d_block, d_next, kGradientTag + step));
      d_block = d_next;
    }
    auto [d_k, d_v] = Unpack(d_block, k.sizes(), v.sizes());
    torch::Tensor d_sinks;
    if (ctx->saved_data["sinks"].toBool()) {
      // The sink's column has value 0: its score's gradient is -p * delta.
      const torch::Tensor& sinks = saved[5];
      const torch::Tensor p_sink = (sinks.to(torch::kFloat).view({1, H, 1}) - lse).exp();
      d_sinks =
          (-p_sink * delta.squeeze(-1)).sum(std::vector<int64_t>{0, 2}).to(sinks.scalar_type());
    }
    return {
        d_q.to(q.scalar_type()), d_k.to(k.scalar_type()), d_v.to(v.scalar_type()), d_sinks,
        torch::Tensor(),         torch::Tensor(),         torch::Tensor(),         torch::Tensor()};
  }
};

// [B, H, t, D] blocks along dim 2 <-> the gathered [B, H, size * t, D] in
// rank order, through [t, H, B, D] so that each rank's block is one
// contiguous piece of the collective.
torch::Tensor GatheredBlocks(const ContextParallelShard& cp, const torch::Tensor& x) {
  torch::Tensor local = x.transpose(0, 2).contiguous();
  std::vector<int64_t> shape = local.sizes().vec();
  shape[0] *= cp.size;
  torch::Tensor all = torch::empty(shape, local.options());
  cp.group->AllGather(all, local);
  return all.transpose(0, 2);
}
torch::Tensor ScatteredBlockSum(const ContextParallelShard& cp, const torch::Tensor& x) {
  torch::Tensor all = x.transpose(0, 2).contiguous();
  std::vector<int64_t> shape = all.sizes().vec();
  shape[0] /= cp.size;
  torch::Tensor mine = torch::empty(shape, all.options());
  cp.group->Wait(cp.group->ReduceScatterAsync(mine, all));
  return mine.transpose(0, 2);
}

class GatherBlocks : public torch::autograd::Function<GatherBlocks> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t shard) {
    ctx->saved_data["shard"] = shard;
    return GatheredBlocks(*FromPointerHandle<const ContextParallelShard>(shard), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto* cp = SavedPointer<const ContextParallelShard>(ctx, "shard");
    return {ScatteredBlockSum(*cp, grad[0]), torch::Tensor()};
  }
};

int64_t Handle(const ContextParallelShard& cp) { return PointerHandle(&cp); }

}  // namespace

bool ContextParallel(const ContextParallelShard* cp) { return cp != nullptr && cp->size > 1; }

torch::Tensor ContextShardOf(const torch::Tensor& x, int64_t dim, const ContextParallelShard* cp) {
  if (!ContextParallel(cp)) return x;
  const int64_t chunk = x.size(dim) / (2 * int64_t{cp->size});
  TORCH_CHECK(chunk * 2 * cp->size == x.size(dim), "a sequence of ", x.size(dim),
              " does not split into 2 * ", cp->size, " context-parallel chunks");
  return torch::cat({x.narrow(dim, cp->rank * chunk, chunk),
                     x.narrow(dim, (2 * int64_t{cp->size} - 1 - cp->rank) * chunk, chunk)},
                    dim);
}

torch::Tensor ContextParallelPositions(const ContextParallelShard* cp, int64_t local_len,
                                       const torch::Device& device) {
  if (!ContextParallel(cp)) {
    return torch::arange(local_len, torch::TensorOptions().dtype(torch::kLong).device(device));
  }
  TORCH_CHECK(local_len * cp->size == cp->seq_len, "a context-parallel rank holds ",
              cp->seq_len / cp->size, " of the sequence's ", cp->seq_len, " tokens, not ",
              local_len);
  return PositionsOf(*cp, cp->rank, device);
}

int64_t WholeSequenceLength(const ContextParallelShard* cp, int64_t local_len) {
  return ContextParallel(cp) ? cp->seq_len : local_len;
}

torch::Tensor RingAttend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const AttentionShape& shape, const ContextParallelShard& cp) {
  TORCH_CHECK(shape.causal, "context parallelism splits causal attention only");
  const double scale = shape.scale > 0 ? shape.scale : 1.0 / std::sqrt(double(q.size(3)));
  const torch::Tensor sinks =
      shape.sinks.defined() ? shape.sinks : torch::empty({0}, q.options().dtype(torch::kFloat));
  return RingAttention::apply(q, k, v, sinks, Handle(cp), scale, shape.softcap, shape.window);
}

void GatherKeyValues(const torch::Tensor& k, const torch::Tensor& v, const AttentionShape& shape,
                     const ContextParallelShard& cp, torch::Tensor* k_out, torch::Tensor* v_out,
                     AttentionShape* shape_out) {
  TORCH_CHECK(shape.causal, "context parallelism splits causal attention only");
  *k_out = GatherBlocks::apply(k, Handle(cp));
  *v_out = GatherBlocks::apply(v, Handle(cp));
  *shape_out = shape;
  shape_out->query_positions = PositionsOf(cp, cp.rank, k.device());
  std::vector<torch::Tensor> keys;
  for (int r = 0; r < cp.size; ++r) keys.push_back(PositionsOf(cp, r, k.device()));
  shape_out->key_positions = torch::cat(keys);
}

torch::Tensor ContextParallelLossScale(const torch::Tensor& counted,
                                       const ContextParallelShard& cp) {
  // On the device, so that the step does not wait for it.
  const torch::Tensor local = counted.sum().to(torch::kDouble).reshape({1});
  torch::Tensor total = local.clone();
  cp.group->AllReduce(total);
  return (local * cp.size / total).squeeze(0);
}

}  // namespace autoaccel
