// The cost model: how many bytes a strategy needs on each device and how
// long one optimizer step takes, from the model's shape and the device, with
// a few free coefficients refitted from measured trials as a job runs.
//
// MEMORY (EstimateMemory).
//
// Model state (Rajbhandari et al., ZeRO): per parameter on the device, fp32
// and autocast (bf16, fp16) keep 4 bytes of weights, 4 of gradients and 8 of
// AdamW moments (16); pure_bf16 keeps 2 + 2 + 12 (moments and the fp32
// master copy). With data-parallel degree N, zero1 divides the optimizer
// part by N, zero2 also the gradients, fsdp everything (plus one gathered
// layer at a time); offload=cpu moves the optimizer part to host memory.
// Tensor parallelism divides the parameters by tp, pipeline stages take
// their share of the layers (the worst stage also holds the embedding).
// Mixtral's model state counts every expert (ParameterCount does).
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
// are, grouped-query attention or not); qwen3's per-head q/k norms add
// 4·A/(h·t) (their inputs), gemma2's two extra norms 4 (their inputs). The
// MLP part follows the model's width f = n_inner and kind instead:
//   gpt2, bert (GELU)       4·f/h       (16 at f = 4h: Korthikanti's figure)
//   decoders (gated: SwiGLU, GeGLU; fused gate_up or not)
//                           8·f/h       (gate, up, act(gate), their product)
//   mixtral (top-k MoE)     k·(8·f/h + 4), and 6·E/h outside the /t:
//                           each token goes through its k = num_experts_per_tok
//                           experts: their SwiGLU tensors plus the expert's
//                           gathered input and its output before the routing
//                           weight (h each); the router keeps its logits
//                           (16-bit) and fp32 probabilities over the E experts.
// Activations are doubled for fp32 and scaled by the calibrated activation
// factor. A pipeline stage keeps min(ga, pp) micro-batches in flight under
// 1F1B (interleaved: min(ga, pp + ceil((pp - 1) / vpp))), one without
// pipelining; the last stage adds the logits (fp32, and their gradient).
//
// TIME (StepTimeFeatures, PredictStepTime): a linear model over physical
// quantities of one step on the slowest rank; see TimeFeature.
//
// CALIBRATION (CostModel::Observe): after each measured trial both halves'
// coefficients are refitted from every observation so far, by
// non-negative least squares on relative errors with a pull towards the
// priors (see CostModel).
//
// The free functions are pure and safe from any thread.
#ifndef AUTOACCEL_SEARCH_COST_MODEL_H_
#define AUTOACCEL_SEARCH_COST_MODEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "search/model_spec.h"
#include "search/strategy.h"
#include "search/trial.h"

namespace autoaccel {

// ---------------------------------------------------------------------------
// Memory.

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
  int64_t overhead = 0;

  int64_t model_state() const { return parameters + gradients + optimizer; }
  int64_t total() const {
    return parameters + gradients + optimizer + gathered + activations + logits + overhead;
  }
};

// Peak device memory of the worst rank of `strategy` training `model` on
// sequences of `seq_len`. REQUIRES: model.Validate() OK, positive degrees.
// A torchscript model's shape is unknown: every figure is 0 then.
MemoryEstimate EstimateMemory(const ModelSpec& model, int seq_len, const Strategy& strategy,
                              const MemoryCoefficients& coefficients = {});

// ---------------------------------------------------------------------------
// Time.

// What the coordinator knows about one device of the pool.
struct DeviceSpec {
  std::string type = "cpu";  // "cpu" | "cuda"; anything else is treated as "cpu"
  PeakTflops peak;           // dense peak per precision of ONE device; 0 = unknown
  int64_t memory_bytes = 0;  // 0 = unknown (never prune then)
};

// Linear step-time model: predicted seconds per optimizer step of the
// slowest rank = sum_k coefficient[k] * feature[k]. Features are physical
// quantities of one step on the slowest rank (pipeline: the stage with the
// most compute FLOPs); coefficients are seconds per unit. Below, T = b·s
// tokens of a micro-batch, ga micro-batches per step, t/n/pp the tensor,
// data and pipeline degrees; "ar" is a ring all-reduce's 2(n-1)/n and "rs"
// a reduce-scatter's or all-gather's (n-1)/n of the buffer, per rank.
enum TimeFeature : int {
  // Compute FLOPs of the rank at the strategy's precision (the other three
  // are 0): model FLOPs (ModelSpec::TrainingFlopsPerToken split into the
  // stage's layers and, on the last stage, the LM head) / t, plus what
  // recomputation adds: a full-recompute layer's forward (1/3 of its FLOPs),
  // a selective one's attention products forward.
  kFlopsFp32,
  kFlopsBf16,
  kFlopsFp16,
  kFlopsPureBf16,
  // attention=math only (0 for sdpa): the attention core's QK^T and AV FLOPs
  // as the unfused kernel computes them — the whole s×s score matrix, masked
  // half included (12·s·h per token and layer forward + backward, 4·s·h more
  // per recomputed layer), / t. The penalty of the unfused kernel.
  kMathAttentionFlops,
  // Forward+backward passes of one micro-batch through one layer on this
  // rank, ga·(layers of the stage + full-recompute layers / 3): the fixed
  // per-op overhead (kernel launches, dispatch). A recomputed forward counts
  // 1/3 of a pass because a backward launches about twice a forward's ops.
  kLayerPasses,
  // Parameters this rank's optimizer updates on the device (its share of
  // the stage's parameters / t, / n under any sharding): adamw (one
  // parameter tensor at a time) or fused_adamw. 0 with offload=cpu.
  kOptimizerParams,
  kFusedOptimizerParams,
  // offload=cpu: bytes moved between device and host per step (gradients
  // down, weights up: 2 × weight bytes per updated parameter). Its
  // coefficient also carries the host's optimizer step (memory-bound, in
  // proportion to the same parameters).
  kOffloadBytes,
  // Bytes each rank sends in data-parallel collectives per step, G and W
  // the gradient and weight bytes of the rank's parameters (4 per parameter,
  // 2 for pure_bf16):
  //   none   ar·G (one all-reduce per step)
  //   zero1  ar·G + rs·W (the updated shards all-gathered)
  //   zero2  ga·rs·G + rs·W (reduce-scatter every micro-batch)
  //   fsdp   ga·rs·(2·W_layers + W_rest + G) (layers gathered for forward and
  //          again for backward, the rest once, gradients reduce-scattered)
  kDataParallelBytes,
  // Tensor parallelism (Megatron), per micro-batch, with A = T·h activation
  // elements: 4 all-reduces of A per layer (ring factor 2(t-1)/t): 2 forward
  // of the row-parallel outputs (the matmul's dtype: 4 bytes for fp32, else
  // 2) and 2 backward of the column-parallel inputs' gradients (the norms'
  // dtype: 2 bytes for pure_bf16, else 4); 2 more per full-recompute layer, one
  // each for the embedding's output (first stage) and the LM head's input
  // gradient (last stage), and the vocabulary-parallel cross-entropy's 3
  // small ones; sequence parallelism swaps each all-reduce for an
  // all-gather + reduce-scatter (same bytes, twice the calls) and adds the
  // all-reduce of every replicated parameter's gradient. Pipeline
  // parallelism: each stage boundary's point-to-point send of A (/t under
  // sequence parallelism; in the weights' dtype) per micro-batch and
  // direction, and on the first
  // and last stage the all-reduce of a tied embedding's gradient per step.
  kModelParallelBytes,
  // Collective and point-to-point calls per step (their latency): gradient
  // buckets of 25 MiB (none, zero1, zero2) or fsdp units, the step's loss
  // and fp16 overflow all-reduces, the tensor-parallel calls above and
  // pipeline sends and receives.
  kCollectives,
  kStep,  // 1: fixed per-step cost (zeroing, the loss read back, the scaler)
  kNumTimeFeatures
};

// "flops_fp32", "flops_bf16", "flops_fp16", "flops_pure_bf16",
// "math_attention_flops", "layer_passes", "optimizer_params",
// "fused_optimizer_params", "offload_bytes", "data_parallel_bytes",
// "model_parallel_bytes", "collectives", "step"; "unknown" out of range.
// Stable: logs and stored fits use them.
absl::string_view TimeFeatureName(int feature);

using TimeFeatures = std::array<double, kNumTimeFeatures>;

// The features of one step of `strategy`. A pipelined strategy (pp > 1)
// pays Megatron's bubble: its compute features (FLOPs, math attention,
// layer passes) are multiplied by 1 + (pp - 1) / (vpp · ga) — the stage
// idles (pp - 1) / vpp micro-batch slots per ga it computes. REQUIRES:
// model.Validate() OK, positive degrees and sizes. A torchscript model
// (shape unknown) gets only kStep = 1 and kLayerPasses = ga (all else 0).
TimeFeatures StepTimeFeatures(const ModelSpec& model, int seq_len, const Strategy& strategy);

struct TimeCoefficients {
  std::array<double, kNumTimeFeatures> seconds_per_unit{};
};

// Priors from the device (every one strictly positive):
//   FLOPs          1 / (0.4 · peak at the precision); pure_bf16 and bf16 use
//                  the bf16 peak. Unknown peaks: cpu 0.2 TFLOP/s fp32 and
//                  bf16/fp16 at half of fp32 (CPUs without AMX emulate them);
//                  cuda 20 TFLOP/s fp32 and 100 TFLOP/s bf16/fp16; a cuda
//                  device with a known fp32 but no half-precision figure
//                  (bf16 before Ampere) runs it at its fp32 rate.
//   math attention the attention FLOPs again at the fp32 rate.
//   layer pass     cpu 500 µs, cuda 300 µs.
//   optimizer      memory-bound, ~28 bytes per parameter (read p, g, m, v;
//                  write p, m, v) at 70% of the device's memory bandwidth
//                  (cpu 20 GB/s, cuda 1.5 TB/s): fused_adamw cpu 2e-9 s,
//                  cuda 3e-11 s per parameter; adamw (a chain of elementwise
//                  ops per tensor) 3x that.
//   offload        PCIe ~10 GB/s plus the host's adamw step per 8 bytes
//                  moved: 8e-10 s per byte.
//   collectives    cpu (gloo, loopback) 2 GB/s and 50 µs per call; cuda
//                  (nccl) 50 GB/s and 20 µs per call.
//   step           2 ms.
TimeCoefficients PriorTimeCoefficients(const DeviceSpec& device);

// sum_k x[k] · c[k], in seconds.
double PredictStepTime(const TimeFeatures& x, const TimeCoefficients& c);

// ---------------------------------------------------------------------------
// The whole model for one job: memory and time, with online calibration.
//
// Calibration, after every observation, from all observations so far:
//   time    minimises sum_i ((x_i·c - t_i) / t_i)^2
//                     + lambda · sum_k ((c_k - p_k) / p_k)^2,  c >= 0,
//           p the prior: relative errors, so that fast and slow trials
//           weigh alike. A feature no observation exercised keeps its prior.
//           lambda is 1e-3 (a prior worth about one observation with 3%
//           noise, on coefficients known within ~2x) until 6 observations,
//           then the one of 1e-1 ... 1e-6 with the least cross-validated
//           error (leave-one-out, 10-fold past 10 observations): a fixed
//           weight either holds on to the prior where the data disagrees (a
//           feature with a small share of every observed step barely moves
//           and the big ones make up for it) or lets noise move what the
//           data pins down poorly. Refits from the first observation.
//   memory  measured_peak_i - (model state + gathered + logits)_i
//               ~= f · activations_i + o,  f, o >= 0,
//           relative to measured_peak_i, with a weak pull (lambda 1e-3)
//           towards f = 1 (scale 1) and o = 0 (scale: the mean measured
//           peak). Needs 2 observations; the priors (the papers' figures)
//           stand until then.
// Both are non-negative least squares (Lawson and Hanson's active set) in
// u_k = c_k / p_k. A refit costs up to 60 small solves (6 weights x 10
// folds) of observations x 13: about 20 ms at 300 observations.
//
// Not thread-safe: const members may run concurrently with each other, but
// Observe() needs the caller's exclusive access (the searcher's lock).
class CostModel {
 public:
  // REQUIRES: model.Validate() OK, seq_len > 0, global_batch_size > 0.
  CostModel(ModelSpec model, int seq_len, int global_batch_size, DeviceSpec device);

  struct Prediction {
    MemoryEstimate memory;         // per device, worst rank, calibrated coefficients
    double step_time_s = 0;        // calibrated
    double tokens_per_second = 0;  // global_batch_size * seq_len / step_time_s; 0 if no time
  };
  // REQUIRES: the strategy's degrees and sizes positive.
  Prediction Predict(const Strategy& s) const;

  // True when the strategy's calibrated memory estimate fits the device:
  // memory.total() <= device.memory_bytes * (1 + margin), or memory_bytes is
  // 0 (unknown), or the model is torchscript (its shape is unknown). When it
  // does not fit, *reason (if not null) says why, with the biggest parts, e.g.
  // "predicted 41.2 GiB per device (activations 30.1 GiB, model state 9.0
  // GiB, logits 1.5 GiB) exceeds the device's 39.4 GiB"; it is left alone
  // when the strategy fits.
  bool Fits(const Strategy& s, double margin, std::string* reason) const;

  // Records a measured trial and refits the coefficients of both halves
  // from all observations. A kSucceeded trial counts with its metrics:
  // step_time_median_s > 0 feeds the time half and peak_memory_bytes > 0 the
  // memory half (a torchscript model has no memory half). A kOom trial is a
  // lower bound for the memory half when the device's memory is known: the
  // strategy needed more than the device has, so a fit that predicts less
  // for it is refitted with it held at the device's memory (repeated until
  // no out-of-memory strategy is predicted to fit). Anything else is ignored.
  void Observe(const Strategy& s, const TrialMetrics& measured,
               TrialStatus status = TrialStatus::kSucceeded);

  // Trials Observe() has recorded (those that fed at least one half).
  int observations() const { return observations_; }
  const TimeCoefficients& time_coefficients() const { return time_; }
  const TimeCoefficients& prior_time_coefficients() const { return time_prior_; }
  const MemoryCoefficients& memory_coefficients() const { return memory_; }
  const DeviceSpec& device() const { return device_; }

 private:
  struct TimeObservation {
    TimeFeatures x;
    double seconds;
  };
  struct MemoryObservation {
    double fixed;        // model state + gathered + logits: no free coefficient
    double activations;  // at activation factor 1
    double peak;
  };
  void RefitTime();
  void RefitMemory();

  ModelSpec model_;
  int seq_len_;
  int global_batch_size_;
  DeviceSpec device_;
  TimeCoefficients time_prior_;
  TimeCoefficients time_;
  MemoryCoefficients memory_;
  std::vector<TimeObservation> time_observations_;
  std::vector<MemoryObservation> memory_observations_;
  // Out-of-memory trials: `peak` is the device's memory, a lower bound.
  std::vector<MemoryObservation> oom_observations_;
  int observations_ = 0;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_COST_MODEL_H_
