// The time half of the cost model (search/cost_model.h): how long one
// optimizer step of a strategy takes, as a linear model over physical
// quantities of the step, with coefficients that start at priors from the
// device and that the cost model refits from measured trials.
//
// TIME (StepTimeFeatures, PredictStepTime): a linear model over physical
// quantities of one step on the slowest rank; see TimeFeature.
//
//
// Pure; safe from any thread.
#ifndef AUTOACCEL_SEARCH_STEP_TIME_H_
#define AUTOACCEL_SEARCH_STEP_TIME_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "spec/compatibility.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"
#include "spec/trial.h"

namespace autoaccel {

// One kind of link between devices, as one device sees it.
struct LinkSpec {
  double bandwidth_bytes_per_s = 0;  // per direction, per device; 0 = unknown
  double latency_s = 0;              // per collective call; 0 = unknown
};

// What the coordinator knows about one device of the pool, or what the
// device catalog (search/device_catalog.h) says of a device type. Every
// figure 0 is unknown, and an unknown figure leaves the model as it was
// before the catalog existed (the fixed priors below, one node).
struct DeviceSpec {
  std::string type = "cpu";                 // "cpu" | "cuda"; anything else is treated as "cpu"
  PeakTflops peak;                          // dense peak per precision of ONE device; 0 = unknown
  int64_t memory_bytes = 0;                 // 0 = unknown (never prune then)
  double memory_bandwidth_bytes_per_s = 0;  // device memory; 0 = unknown
  LinkSpec intra_node{};                    // between devices of one node (NVLink, PCIe)
  LinkSpec inter_node{};                    // across nodes (InfiniBand, RoCE), per device
  int devices_per_node = 0;                 // 0 = unknown: every rank on one node
};

// What the compatibility rules read of a device (TrainingSetup's device
// facts), from what is known of it: an accelerator unless a CPU; a CUDA
// device computes bf16 (fp8) when its bf16 (fp8) peak is known (> 0; fp8:
// compute capability 8.9 or newer), or when none of its peaks is known (an
// unknown GPU: its trials tell); a CPU device computes both (LibTorch
// emulates fp8's scaled products there).
void SetDeviceFacts(const DeviceSpec& device, TrainingSetup* setup);

// TOPOLOGY. Ranks sit on nodes in Megatron's order: rank = tp_rank + t ·
// (dp_rank + n · pp_rank) (tensor innermost, then data, then pipeline),
// devices_per_node consecutive ranks to a node. A group whose ranks sit on
// more than one node (any of its kind: its collectives wait for the
// slowest) runs at the inter-node link. Rather than a feature per link, the
// communication features count in INTRA-NODE EQUIVALENTS: a byte that
// crosses nodes counts bytes_factor = intra bandwidth / inter bandwidth
// bytes, a call that crosses nodes calls_factor = inter latency / intra
// latency calls. So each communication coefficient keeps one meaning
// (seconds per intra-node byte or call), the calibration fits the same 13
// coefficients, and with one node or unknown links (factors 1) the
// features are what they were.
struct LinkTopology {
  int devices_per_node = 0;   // 0: every rank on one node
  double bytes_factor = 1.0;  // inter-node seconds per byte / intra-node's
  double calls_factor = 1.0;  // inter-node seconds per call / intra-node's
};

// The topology of `device`: its devices_per_node; factors from its links
// where both are known (> 0), else 1.
LinkTopology TopologyOf(const DeviceSpec& device);

// Which of a strategy's groups cross nodes under `topology` (Megatron's rank
// order above). All false when devices_per_node is 0 or holds the world.
struct GroupPlacement {
  bool tensor_crosses = false;
  bool context_crosses = false;
  bool data_crosses = false;  // the data- and context-parallel ranks together
  bool pipeline_crosses = false;
  bool expert_crosses = false;  // ep consecutive data-and-context-parallel ranks
};
GroupPlacement PlaceGroups(const Strategy& strategy, const LinkTopology& topology);

// Linear step-time model: predicted seconds per optimizer step of the
// slowest rank = sum_k coefficient[k] * feature[k]. Features are physical
// quantities of one step on the slowest rank (pipeline: the stage with the
// most compute FLOPs); coefficients are seconds per unit. Below, T = b·s/cp
// tokens of a micro-batch on one rank (cp the context-parallel degree), ga
// micro-batches per step, t/pp the tensor and pipeline degrees, n the data-
// times the context-parallel degree (the ranks that reduce gradients
// together); "ar" is a ring all-reduce's 2(n-1)/n and "rs"
// a reduce-scatter's or all-gather's (n-1)/n of the buffer, per rank.
enum TimeFeature : int {
  // Compute FLOPs of the rank at the strategy's precision (the others are 0;
  // fp8 splits its FLOPs between kFlopsFp8 and kFlopsPureBf16): model FLOPs
  // (ModelSpec::TrainingFlopsPerToken split into the
  // stage's layers and, on the last stage, the LM head) / t, plus what
  // recomputation adds: a full-recompute layer's forward (1/3 of its FLOPs),
  // a selective one's attention products forward.
  kFlopsFp32,
  kFlopsBf16,
  kFlopsFp16,
  kFlopsPureBf16,
  // fp8: the FLOPs of the transformer layers' linear layers (the layer's
  // FLOPs but its attention core's, and their share of full recompute),
  // computed in fp8; the attention core, selective recompute and the LM
  // head count as kFlopsPureBf16. The per-tensor scaling (an absolute
  // maximum and a cast of each input, weight and output gradient) is
  // memory-bound work in proportion to these FLOPs: its coefficient
  // carries it.
  kFlopsFp8,
  // attention=math only (0 for sdpa): the attention core's QK^T and AV FLOPs
  // as the unfused kernel computes them — the whole s×s score matrix, masked
  // half included (12·s·h per token and layer forward + backward, 4·s·h more
  // per recomputed layer), / t. The penalty of the unfused kernel. Under
  // the context-parallel p2p ring, which computes only what causality lets
  // each block see, (1 + (cp - 1)/2)/cp of it.
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
  // Bytes each rank sends in data-parallel collectives per step (times the
  // topology's bytes_factor when the data-parallel group crosses nodes), G and W
  // the gradient and weight bytes of the rank's parameters (4 per parameter,
  // 2 for pure_bf16):
  //   none   ar·G (one all-reduce per step)
  //   zero1  ar·G + rs·W (the updated shards all-gathered)
  //   zero2  ga·rs·G + rs·W (reduce-scatter every micro-batch)
  //   fsdp   ga·rs·(2·W_layers + W_rest + G) (layers gathered for forward and
  //          again for backward, the rest once, gradients reduce-scattered)
  // Under expert parallelism (ep) the routed experts' share (1/ep of them
  // per rank) is reduced that way over the n/ep ranks that hold the same
  // experts, the rest over n.
  kDataParallelBytes,
  // Model-parallel bytes, each part times bytes_factor when its group
  // crosses nodes (the tied embedding's all-reduce: the pipeline group's).
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
  // Context parallelism, per micro-batch and layer, K = this rank's key and
  // value elements / t in the projections' dtype: (cp - 1)·K forward (again
  // per fully recomputed layer) and in backward (cp - 1)·K more plus, for
  // p2p, the fp32 gradients' cp·K passes along the ring (all_gather: their
  // reduce-scatter of (cp - 1)·K).
  // Expert parallelism, per micro-batch and layer: the all-to-all of the
  // T·k·h routed elements' (ep - 1)/ep share that leaves the rank (k =
  // num_experts_per_tok; routing assumed balanced), dispatched (the norm's
  // dtype) and combined (the matmul's) in forward, again per fully
  // recomputed layer, and both once more in backward.
  kModelParallelBytes,
  // Collective and point-to-point calls per step (their latency): gradient
  // buckets of 25 MiB (none, zero1, zero2) or fsdp units, the step's loss
  // and fp16 overflow all-reduces, the tensor-parallel calls above and
  // pipeline sends and receives. A call of a group that crosses nodes
  // counts calls_factor (the step's loss: the data-parallel group's; the
  // loss over the stages and fp16's found_inf: the pipeline group's).
  kCollectives,
  kStep,  // 1: fixed per-step cost (zeroing, the loss read back, the scaler)
  // attention=sdpa only (0 for math): the attention core's FLOPs as a fused
  // (flash) kernel executes them, / t: its forward's QK^T and AV over the
  // keys each query attends (causal: half the score matrix; sliding
  // windows: the window), its backward's 2.5 times that (the scores are
  // recomputed, then dV, dP, dQ, dK), and once more per recomputed layer
  // (full or selective). The FLOP features already charge the model's count
  // of these products at the GEMM rate; this feature's coefficient is the
  // EXTRA time per FLOP of the fused kernel, which reaches a lower fraction
  // of the peak than a GEMM (softmax, masking and the online rescaling
  // between its two products). Its share of a step grows with the sequence:
  // the attention FLOPs per token grow with the keys attended, the rest of
  // the layer's do not, which is how long sequences come to run at the
  // kernel's rate rather than the GEMM's.
  kFusedAttentionFlops,
  // Bytes of activations the memory-bound kernels (norms, residual adds, the
  // MLP's activation function and gating, dropout-free casts) read and write
  // per step, in units of one 16-bit element of the layer's width per token:
  // ga · T · h · (layers + full-recompute layers) / t, times the pipeline
  // bubble as the FLOPs are. Their time is the device memory's, not the
  // tensor cores': a device with a higher ratio of peak FLOPs to memory
  // bandwidth (an H100 against an A100) spends a larger share of its step
  // here, which a single achieved fraction of the peak cannot express.
  kActivationElements,
  kNumTimeFeatures
};

// "flops_fp32", "flops_bf16", "flops_fp16", "flops_pure_bf16", "flops_fp8",
// "math_attention_flops", "layer_passes", "optimizer_params",
// "fused_optimizer_params", "offload_bytes", "data_parallel_bytes",
// "model_parallel_bytes", "collectives", "step", "fused_attention_flops",
// "activation_elements"; "unknown" out of range.
// Stable: logs and stored fits use them.
absl::string_view TimeFeatureName(int feature);

using TimeFeatures = std::array<double, kNumTimeFeatures>;

// The features of one step of `strategy`. A pipelined strategy (pp > 1)
// pays Megatron's bubble: its compute features (FLOPs, math attention,
// layer passes, fused attention, activation elements) are multiplied by
// 1 + (pp - 1) / (vpp · ga) — the stage
// idles (pp - 1) / vpp micro-batch slots per ga it computes. REQUIRES:
// model.Validate() OK, positive degrees and sizes. A torchscript model
// (shape unknown) gets only kStep = 1 and kLayerPasses = ga (all else 0).
// `topology` weighs the communication features (see TOPOLOGY; the
// default: one node).
TimeFeatures StepTimeFeatures(const ModelSpec& model, int seq_len, const Strategy& strategy,
                              const LinkTopology& topology = {});

// kModelParallelBytes by the dimension that sends it (each part weighted
// as the feature weighs it); tensor includes sequence parallelism's
// exchanges, pipeline a tied embedding's gradient all-reduce.
struct ModelParallelBytes {
  double tensor = 0;
  double context = 0;
  double expert = 0;
  double pipeline = 0;
  double total() const { return tensor + context + expert + pipeline; }
};

// StepTimeFeatures of many strategies of one model, sequence length and
// topology, with what depends on the model alone (its parameter and FLOP
// parts) computed once: what the cost model uses to rank a whole space.
// Immutable after construction; safe from any thread.
struct ModelParts;
class StepTimeFeaturizer {
 public:
  StepTimeFeaturizer(ModelSpec model, int seq_len, const LinkTopology& topology = {});
  TimeFeatures operator()(const Strategy& strategy) const;
  // The same step's kModelParallelBytes by dimension (the stage
  // operator() takes: the slowest).
  ModelParallelBytes ModelParallelByDimension(const Strategy& strategy) const;

 private:
  ModelSpec model_;
  int seq_len_;
  LinkTopology topology_;
  std::shared_ptr<const ModelParts> parts_;  // null: torchscript or no layers

  // The slowest stage's features, and its model-parallel bytes by
  // dimension when `by_dimension` is not null.
  TimeFeatures Slowest(const Strategy& strategy, ModelParallelBytes* by_dimension) const;
};

struct TimeCoefficients {
  std::array<double, kNumTimeFeatures> seconds_per_unit{};
};

// The cuda priors' calibrated scalars: the fit of
// bench/tables/gpu_published.csv (92 published training runs of
// llm-foundry, torchtitan, NeMo and Megatron-Bridge on A100, H100 and H200
// GPUs, each row cited), made by bench/calibrate_priors on alternate rows of
// each group; the figures on the held-out rows are in docs/BENCHMARKS.md
// ("GPU priors"). tests/calibration_test.cc fails when these stop being the
// table's fit.
//   achieved fraction   of the dense peak that the FLOP features (the
//                       GEMMs) run at, on a device without fp8 tensor cores
//                       (A100) and on one with them (H100, H200: a
//                       generation whose peak needs asynchronous warpgroup
//                       kernels that the frameworks' GEMMs reach less of;
//                       keyed by HasFp8TensorCores), and the fp8 FLOP
//                       feature's fraction of the fp8 peak (per-tensor
//                       scaling's casts and amax reductions included)
//   layer pass          seconds per layer forward+backward of a
//                       micro-batch beyond its FLOPs and activation bytes:
//                       kernel launches and dispatch
//   data-parallel       share of the data-parallel collectives' link time
//     exposure          that shows in the step: FSDP prefetches each layer's
//                       gather behind the previous layer's compute and
//                       reduce-scatters behind the backward; bucketed DDP
//                       all-reduces behind the backward
//   model-parallel      the same share for tensor-, context-, expert- and
//     exposure          pipeline-parallel bytes: Megatron and Transformer
//                       Engine overlap tensor-parallel collectives with the
//                       neighbouring GEMMs (NeMo's recipes turn it on), ring
//                       attention its K/V passes with the blocks' attention,
//                       and the pipeline's sends run beside the next
//                       micro-batch
//   fused-attention     the extra seconds per executed fused-attention FLOP
//     fraction          (kFusedAttentionFlops) are 1 / (this fraction of
//                       the bf16 peak)
//   activation bytes    bytes of device memory traffic per activation
//                       element (kActivationElements): what the memory-
//                       bound kernels read and write, forward and backward
inline constexpr double kCudaAchievedPeakFraction = 0.852;
inline constexpr double kCudaAchievedPeakFractionFp8Devices = 0.517;
inline constexpr double kCudaFp8AchievedPeakFraction = 0.61;
inline constexpr double kCudaLayerPassSeconds = 270e-6;
inline constexpr double kCudaDataParallelExposure = 0.0914;
inline constexpr double kCudaModelParallelExposure = 0.925;
inline constexpr double kCudaFusedAttentionFraction = 0.342;
inline constexpr double kCudaActivationBytesPerElement = 134.7;

// A cuda device whose tensor cores compute fp8 (its fp8 peak known: compute
// capability 8.9 or newer, as SetDeviceFacts reads it).
bool HasFp8TensorCores(const DeviceSpec& device);

// Priors from the device (every one strictly positive but the cpu's
// fused-attention and activation-element coefficients, 0: a CPU's step is
// what the FLOP features and the layer passes say, as before they existed):
//   FLOPs          1 / (f · peak at the precision), f =
//                  kCudaAchievedPeakFraction on cuda
//                  (kCudaAchievedPeakFractionFp8Devices where
//                  HasFp8TensorCores; kCudaFp8AchievedPeakFraction for the
//                  fp8 feature at the fp8 peak), 0.4 on cpu; pure_bf16 and bf16 use
//                  the bf16 peak. Unknown peaks: cpu 0.2 TFLOP/s fp32 and
//                  bf16/fp16 at half of fp32 (CPUs without AMX emulate them);
//                  cuda 20 TFLOP/s fp32 and 100 TFLOP/s bf16/fp16; a cuda
//                  device with a known fp32 but no half-precision figure
//                  (bf16 before Ampere) runs it at its fp32 rate.
//   math attention the attention FLOPs again at the fp32 rate.
//   layer pass     cpu 500 µs, cuda kCudaLayerPassSeconds.
//   optimizer      memory-bound, ~28 bytes per parameter (read p, g, m, v;
//                  write p, m, v) at 70% of the device's memory bandwidth
//                  (a cuda device's memory_bandwidth_bytes_per_s where known,
//                  else cpu 20 GB/s, cuda 1.5 TB/s): fused_adamw cpu 2e-9 s,
//                  cuda 28 / (0.7 · bandwidth), 3e-11 s per parameter at the
//                  default; adamw (a chain of elementwise ops per tensor) 3x
//                  that.
//   offload        PCIe ~10 GB/s plus the host's adamw step per 8 bytes
//                  moved: 8e-10 s per byte.
//   collectives    cpu (gloo, loopback) 2 GB/s and 50 µs per call; cuda
//                  (nccl) 75% of the intra-node link's bandwidth (NCCL's bus
//                  bandwidth falls short of the link's) and its latency per
//                  call where known, else 50 GB/s and 20 µs per call: the
//                  model-parallel bytes' coefficient; cuda data-parallel
//                  bytes cost kCudaDataParallelExposure of the link's
//                  time and model-parallel bytes kCudaModelParallelExposure
//                  (the shares that overlap with compute does not hide);
//                  cpu's both the link's.
//   fused attention cuda: 1 / (kCudaFusedAttentionFraction · bf16 peak);
//                  cpu 0.
//   activation     cuda: kCudaActivationBytesPerElement / the memory
//     elements     bandwidth (1.5 TB/s where unknown); cpu 0.
//   step           2 ms.
TimeCoefficients PriorTimeCoefficients(const DeviceSpec& device);

// sum_k x[k] · c[k], in seconds.
double PredictStepTime(const TimeFeatures& x, const TimeCoefficients& c);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_STEP_TIME_H_
