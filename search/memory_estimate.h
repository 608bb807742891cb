// The memory half of the cost model (search/cost_model.h): how many bytes a
// strategy needs on each device, from the model's shape, with the two free
// coefficients the cost model refits from measured trials.
//
// MEMORY (EstimateMemory).
//
// Model state (Rajbhandari et al., ZeRO): per parameter on the device, fp32
// and autocast (bf16, fp16) keep 4 bytes of weights, 4 of gradients and 8 of
// AdamW moments (16); pure_bf16 keeps 2 + 2 + 12 (moments and the fp32
// master copy). With N = data-parallel times context-parallel degree (the
// ranks that hold the same weights), zero1 divides the optimizer
// part by N, zero2 also the gradients, fsdp everything (plus one gathered
// layer at a time); offload=cpu moves the optimizer part to host memory.
// Tensor parallelism divides the parameters by tp, pipeline stages take
// their share of the layers (the worst stage also holds the embedding).
// A mixture of experts' model state counts every expert (ParameterCount
// does); expert parallelism (ep) divides the routed experts' share by ep,
// and sharding divides that share over the N / ep ranks that hold the same
// experts. Activations assume balanced routing (every expert gets its
// share of the tokens), so expert parallelism leaves them as they are: a
// rank computes k experts' worth of its own tokens either way.
//
// Activations (Korthikanti et al., "Reducing Activation Recomputation in
// Large Transformer Models"), bytes per layer and micro-batch for 16-bit
// activations, s = sequence, b = micro-batch, h = hidden, a = heads,
// t = tensor-parallel degree:
//   no recompute            s·b·h·(10 + 24/t + 5·a·s/(h·t))
//   sequence parallel       s·b·h·(34/t + 5·a·s/(h·t))
//   selective recompute     the 5·a·s/(h·t) term dropped (the attention core)
//   SDPA                    the same term dropped (no s² tensors kept)
//   full recompute          2·s·b·h (the layer's input; /t with sequence parallel)
// The 24/t is 8/t of attention (Q, K, V, the output projection's input)
// and 16/t of a GELU MLP of width 4h (its two 4h-wide tensors: the first
// linear's output and the GELU's). Attention's 8/t is scaled by A/h, A =
// n_head·head_dim the attention width (a decoder whose head_dim is not
// h/a, e.g. gemma's; K and V are counted at that width as Korthikanti's
// are, grouped-query attention or not; latent attention's A is the mean of
// its query/key and value widths, n_head·(QkHeadDim() + VHeadDim()) / 2);
// qwen3's per-head q/k norms add 4·A/(h·t) (their inputs), gemma2's two
// extra norms 4 (their inputs). The MLP part follows the model's width f =
// n_inner and kind instead:
//   gpt2, bert (GELU)       4·f/h       (16 at f = 4h: Korthikanti's figure)
//   decoders (gated: SwiGLU, GeGLU; fused gate_up or not)
//                           8·f/h       (gate, up, act(gate), their product)
//   expert layers (mixtral, qwen3_moe, deepseek_v3)
//                           k·(8·f_e/h + 4) + 8·n_s·f_e/h, and 6·E/h outside
//                           the /t: each token goes through its k =
//                           num_experts_per_tok experts of width f_e =
//                           ExpertWidth(): their SwiGLU tensors plus the
//                           expert's gathered input and its output before the
//                           routing weight (h each); n_s = n_shared_experts
//                           shared experts' SwiGLU; the router keeps its logits
//                           (16-bit) and fp32 probabilities over the E experts.
//                           A model whose layers differ (qwen3_moe's and
//                           deepseek_v3's dense layers, 8·f/h) counts the
//                           layers' average.
// Context parallelism (cp ranks share each sequence): every rank keeps the
// activations of s/cp tokens, so s·b·h above counts s/cp, while the
// attention core's scores still span the whole sequence's keys (5·a·s/(h·t)
// with the whole s) unless p2p, whose ring keeps no scores (it recomputes
// its blocks in backward); all_gather also keeps the other ranks' keys and
// values, 4·(cp - 1)·K/(h·t) with K = n_kv_head·head_dim. The logits are
// the rank's s/cp positions'.
// fp8 (its linear layers keep 1-byte copies of their inputs for backward,
// each its own): the attention input's 2 becomes 1 per projection reading
// it (3 for q, k, v; 1 fused (phi3, gpt2); 2 for latent attention), the
// MLP input's 2 becomes 1 per first linear (2 for gate and up; 1 fused or
// GELU), the output projection's input and the down projections' inputs
// (2·f/h, expert layers 2·f_e/h·(k + n_s)) are halved; and every layer
// that keeps its activations keeps its weights' fp8 copy (1 byte per
// parameter of the rank's layer, whole under fsdp), once however many
// micro-batches are in flight (cast once per step, shared by them), plus
// one layer being recomputed (fp8_weights). Model state as pure_bf16's.
// Activations are doubled for fp32 and scaled by the calibrated activation
// factor. A pipeline stage keeps min(ga, pp) micro-batches in flight under
// 1F1B (interleaved: min(ga, pp + (pp - 1) / vpp) stages' worth, Megatron's
// warm-up of 2(pp - 1) + (vpp - 1)·pp chunk micro-batches plus the one
// computing, each 1/vpp of the stage), one without pipelining; full
// recompute adds the working set of the layer whose backward is running (its
// no-recompute activations of one micro-batch, less its checkpoint); the
// last stage adds the logits (fp32, and their gradient).
//
//
// Pure; safe from any thread.
#ifndef AUTOACCEL_SEARCH_MEMORY_ESTIMATE_H_
#define AUTOACCEL_SEARCH_MEMORY_ESTIMATE_H_

#include <cstdint>

#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

// The memory model's free coefficients, refitted from measured trials; the
// defaults are the papers' figures.
struct MemoryCoefficients {
  double activation_factor = 1.0;  // measured / formula activation bytes
  int64_t overhead_bytes = 0;      // per device: framework, allocator, workspace
};

struct MemoryEstimate {
  int64_t parameters = 0;  // weights held between steps
  int64_t gradients = 0;
  int64_t optimizer = 0;    // AdamW moments and fp32 masters on the device
  int64_t gathered = 0;     // fsdp: one layer's full weights and gradients while it runs
  int64_t activations = 0;  // kept for backward, every micro-batch in flight
  int64_t logits = 0;       // the LM head's output and its gradient (last stage)
  int64_t fp8_weights = 0;  // fp8: the layers' 1-byte weight copies kept for backward
  int64_t overhead = 0;

  int64_t model_state() const { return parameters + gradients + optimizer; }
  int64_t total() const {
    return parameters + gradients + optimizer + gathered + activations + logits + fp8_weights +
           overhead;
  }
};

// Peak device memory of the worst rank of `strategy` training `model` on
// sequences of `seq_len`. REQUIRES: model.Validate() OK, positive degrees.
// A torchscript model's shape is unknown: every figure is 0 then.
MemoryEstimate EstimateMemory(const ModelSpec& model, int seq_len, const Strategy& strategy,
                              const MemoryCoefficients& coefficients = {});

// EstimateMemory of one model at one sequence length for many strategies:
// what depends on the model alone (parameter counts, the MLP's activation
// units, a loop over the layers) is computed once, at construction, rather
// than per candidate. Immutable; safe from any thread.
class MemoryEstimator {
 public:
  MemoryEstimator(ModelSpec model, int seq_len);
  MemoryEstimate operator()(const Strategy& strategy,
                            const MemoryCoefficients& coefficients = {}) const;

  // The MLP's activations in units of s·b·h 16-bit elements' bytes, split
  // as Korthikanti's are: `wide` is divided by t, `narrow` only under
  // sequence parallelism (see above for the figures).
  struct MlpUnits {
    double wide = 0;
    double narrow = 0;
    double down_inputs = 0;  // of wide: the down-projections' inputs (halved by fp8)
  };

 private:
  ModelSpec model_;
  int seq_len_;
  int64_t outside_ = 0;            // parameters outside the layers (embeddings, head)
  int64_t per_layer_ = 0;          // a layer's parameters, on average
  int64_t experts_per_layer_ = 0;  // of which routed experts', on average
  MlpUnits mlp_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_MEMORY_ESTIMATE_H_
