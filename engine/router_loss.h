// transformers' auxiliary load-balancing loss of a mixture-of-experts
// decoder trained with output_router_logits true (MixtralForCausalLM,
// Qwen3MoeForCausalLM: load_balancing_loss_func). Over one forward pass's
// tokens and every expert layer together (the dense layers have no router):
//
//   aux = E * sum_e (C_e / N) * (P_e / N),   loss = cross-entropy + coef * aux
//
// with E experts, C_e the top-k assignments to expert e (counted from the
// softmax of the router logits in their own dtype, as transformers does),
// P_e the sum of those softmax probabilities of expert e, and N the rows
// (tokens times expert layers). Only P carries a gradient.
//
// How the gradient gets in: C and N are known only after the last expert
// layer, but each layer's P needs coef * E * C / N^2 in backward. So each
// expert layer passes its output through a node (Record) that changes
// nothing in forward and, in backward, adds that gradient to its P; the
// loss passes through a node (AddTo) that adds the value in forward and, in
// backward (which necessarily runs before any layer's, since every layer
// feeds the loss), keeps the gradient arriving at the loss (the 1 /
// grad_accum_steps and loss-scaler factors the trainer applied). A layer
// recomputed in backward (full activation checkpointing) gets its node
// again; its counts are not added twice.
//
// Parallel forms:
// - context parallelism (options.cp): each rank routes its share of the
//   sequences; C and N are summed over the group before use, and each rank
//   adds context_parallel times its own P's part, as it does for the
//   cross-entropy (ContextParallelLossScale: the group's gradients are
//   averaged), so that the group's average is the whole sequences' loss;
// - tensor parallelism (options.tp): every rank routes all of the group's
//   tokens and the router's gradients are summed over the group, so each
//   rank injects 1 / tensor_parallel of the gradient (its loss value is the
//   whole);
// - expert and data parallelism change nothing: each data-parallel rank
//   adds the loss of its own micro-batch, as transformers does under DDP.
// Pipeline stages would each hold some of the layers: not supported (the
// "router_loss_pipeline" rule, spec/compatibility.h).
//
// One forward and backward pass at a time: Begin, the layers' Record, AddTo,
// then backward; on the thread that runs them. Methods throw c10::Error.
#ifndef AUTOACCEL_ENGINE_ROUTER_LOSS_H_
#define AUTOACCEL_ENGINE_ROUTER_LOSS_H_

#include <torch/types.h>

#include <cstdint>

namespace autoaccel {

struct RunOptions;

class RouterLoss {
 public:
  // `experts` per layer, `top_k` per token, `coefficient` > 0
  // (router_aux_loss_coef).
  RouterLoss(int64_t experts, int64_t top_k, double coefficient);

  // Starts a forward pass: forgets the previous one's counts.
  void Begin();

  // An expert layer's router logits [N, E] (the tokens it routes, in the
  // logits' dtype) and its output; returns `output` unchanged, behind the
  // node that adds the loss's gradient to the layer's probabilities in
  // backward.
  torch::Tensor Record(const torch::Tensor& logits, const torch::Tensor& output);

  // `loss` (this rank's cross-entropy) plus coefficient times this rank's
  // part of the auxiliary loss, after the last layer's Record. Sums the
  // counts over options.cp's group (a collective: every rank of it calls
  // this).
  torch::Tensor AddTo(const torch::Tensor& loss, const RunOptions& options);

 private:
  class Inject;
  class Add;

  const int64_t experts_, top_k_;
  const double coefficient_;
  // Sums over the expert layers of this pass (fp32 [E], no gradient): the
  // top-k assignments and the probabilities; and the rows.
  torch::Tensor counts_, probs_;
  int64_t rows_ = 0;
  bool added_ = false;  // AddTo ran: later Records are recomputations
  // Set by AddTo: coefficient * E * C / N^2 times the rank's share
  // (context_parallel / tensor_parallel), [E] fp32; and by the backward of
  // AddTo's node: the gradient arriving at the loss (0-dim fp32).
  torch::Tensor gradient_per_prob_;
  torch::Tensor loss_gradient_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_ROUTER_LOSS_H_
