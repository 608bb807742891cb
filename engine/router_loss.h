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
//   sequences; the sums are summed over the group before use, and each rank
//   adds context_parallel times its own P's gradient, as it does for the
//   cross-entropy (ContextParallelLossScale: the group's gradients are
//   averaged);
// - tensor parallelism (options.tp): every rank routes all of the group's
//   tokens and the router's gradients are summed over the group, so each
//   rank injects 1 / tensor_parallel of the gradient (its loss value is the
//   whole);
// - pipeline stages (pipeline.h) each hold some of the layers: a stage
//   hands its sums on with its activations (Close, Continue), the last one
//   adds the loss, and the gradient per probability goes back with the
//   activations' gradients (Gradient, ReceiveGradient);
// - expert and data parallelism change nothing: each data-parallel rank
//   adds the loss of its own micro-batches, as transformers does under DDP.
//
// One object per forward pass in flight (one micro-batch); on the thread
// that runs it. Methods throw c10::Error.
#ifndef AUTOACCEL_ENGINE_ROUTER_LOSS_H_
#define AUTOACCEL_ENGINE_ROUTER_LOSS_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>

#include "spec/model_spec.h"

namespace autoaccel {

struct RunOptions;

class RouterLoss {
 public:
  // `experts` per layer, `top_k` per token, `coefficient` > 0
  // (router_aux_loss_coef).
  RouterLoss(int64_t experts, int64_t top_k, double coefficient);
  // The loss `model` trains with (its experts, top-k and
  // router_aux_loss_coef), or null when it has none.
  static std::unique_ptr<RouterLoss> For(const ModelSpec& model);

  // Starts a forward pass: forgets the previous one's sums and gradient.
  void Begin();
  // Begin, then carry on from the sums an earlier pipeline stage Closed.
  void Continue(const torch::Tensor& sums);

  // An expert layer's router logits [N, E] (the tokens it routes, in the
  // logits' dtype) and its output; returns `output` unchanged, behind the
  // node that adds the loss's gradient to the layer's probabilities in
  // backward.
  torch::Tensor Record(const torch::Tensor& logits, const torch::Tensor& output);

  // The pass's sums so far, [2E + 1] fp64: C, P and N (zeros before any
  // expert layer), on `options`' device, for the next pipeline stage (a
  // copy); later Records are recomputations, which add nothing.
  torch::Tensor Close(const torch::TensorOptions& options);

  // `loss` (this rank's cross-entropy) plus coefficient times the auxiliary
  // loss, after the last expert layer's Record. Sums C, P and N over
  // options.cp's group (a collective: every rank of it calls this).
  torch::Tensor AddTo(const torch::Tensor& loss, const RunOptions& options);

  // The gradient each expert layer's probabilities receive [E] (fp32):
  // known once the loss's gradient has passed AddTo's node, or as received.
  torch::Tensor Gradient() const;
  void ReceiveGradient(const torch::Tensor& gradient);

 private:
  class Inject;
  class Add;

  const int64_t experts_, top_k_;
  const double coefficient_;
  torch::Tensor sums_;   // [2E + 1] fp64: C, P, N; undefined before any
  bool closed_ = false;  // AddTo or Close ran: later Records are recomputations
  // Set by AddTo: coefficient * E * C / N^2 times the rank's share
  // (context_parallel / tensor_parallel), [E] fp32; by the backward of
  // AddTo's node: the gradient arriving at the loss (0-dim fp32); or by
  // ReceiveGradient: their product, from a later stage.
  torch::Tensor gradient_per_prob_;
  torch::Tensor loss_gradient_;
  torch::Tensor received_gradient_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_ROUTER_LOSS_H_
