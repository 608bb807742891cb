// Calibrating the cost model's GPU step-time priors (search/step_time.h,
// PriorTimeCoefficients for cuda) against published training measurements:
// the table bench/tables/gpu_published.csv, one row per published run with
// the configuration it ran and what it measured, and a citation per row.
//
// The fit moves a few physically meaningful scalars of the priors (see
// PriorScale), each a factor on a group of prior coefficients, on a
// deterministic half of the rows and reports on the other half. Used by
// bench/calibrate_priors and tests/calibration_test. Pure; any thread.
#ifndef AUTOACCEL_BENCH_CALIBRATION_H_
#define AUTOACCEL_BENCH_CALIBRATION_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/memory_estimate.h"
#include "search/step_time.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel::bench {

// One published run, as the table gives it.
struct PublishedRun {
  int id = 0;            // the table's row number (1-based, its order)
  std::string group;     // rows sharing a model and a cluster (the unit of rank correlation)
  std::string source;    // "llm-foundry", "torchtitan", ...
  std::string citation;  // URL at a commit + the table and row
  std::string model;     // e.g. "mpt-7b"
  ModelSpec spec;        // the model's shape (Validate() OK)
  int seq_len = 0;
  std::string device;  // a device name PublishedDevice() knows
  int gpus = 0;
  int gpus_per_node = 0;
  Strategy strategy;  // the layout and choices of the run (world size == gpus)
  // The run's device memory when the source's devices differ from the
  // catalog entry (torchtitan's H100s have 96 GiB, the catalog's 80); 0: the
  // catalog's.
  double device_memory_gib = 0;
  // The peak device memory the source states for the run (GiB, the worst
  // rank); 0 where it states none.
  double measured_peak_memory_gib = 0;
  // What the source measured: "tokens_per_s" (the whole job) or
  // "tokens_per_s_per_gpu", and the figure.
  std::string measured_kind;
  double measured_value = 0;
  double global_batch_tokens = 0;  // global batch × sequence length
  // The measured step time the figure converts to:
  //   tokens_per_s          global_batch_tokens / value
  //   tokens_per_s_per_gpu  global_batch_tokens / (value · gpus)
  double step_time_s = 0;
};

// Reads the CSV (header row, then one row per run; see
// bench/tables/README.md for the columns). INVALID_ARGUMENT naming the line
// and the column for anything missing or malformed: an unknown column value,
// a row whose layout (dp × tp × pp × cp) does not multiply to its GPU count,
// whose expert-parallel degree does not divide dp × cp, whose global batch is
// not micro-batch × accumulation × data-parallel degree × sequence, a model
// that does not validate, an empty citation, a memory cell (optional: empty
// when the source states none) that is not a positive number.
absl::StatusOr<std::vector<PublishedRun>> LoadPublishedRuns(const std::string& path);

// The device of a run: the built-in device catalog's entry
// (search/device_catalog.json: peaks, memory bandwidth, intra- and
// inter-node links); a row's gpus_per_node replaces the entry's devices per
// node. NOT_FOUND listing the catalog's names otherwise.
absl::StatusOr<DeviceSpec> PublishedDevice(const std::string& name);

// The split: within each group, in table order, the 1st, 3rd, 5th ... row
// trains and the 2nd, 4th ... is held out (a group of one trains).
struct Split {
  std::vector<int> train;  // indices into the runs
  std::vector<int> held_out;
};
Split SplitRuns(const std::vector<PublishedRun>& runs);

// The free scalars of the cuda priors, each a factor on a group of
// PriorTimeCoefficients(device) coefficients:
//   kScaleCompute    every FLOP feature but fp8's on a device without fp8
//                    tensor cores (A100: the achieved fraction of the peak
//                    is divided by it)
//   kScaleComputeFp8Devices   the same on a device with them (H100, H200)
//   kScaleFp8Flops   the fp8 FLOP feature (fp8's achieved fraction)
//   kScaleLayerPass  the per-layer-pass overhead
//   kScaleDataParallelBytes   data-parallel bytes: the share of the
//                    data-parallel collectives' link time that compute does
//                    not hide (FSDP and bucketed DDP overlap them)
//   kScaleModelParallelBytes  tensor-, context-, expert- and pipeline-
//                    parallel bytes: the same share for them
//   kScaleFusedAttention      the fused-attention kernel's extra time per
//                    FLOP (kFusedAttentionFlops)
//   kScaleActivationBytes     the memory traffic per activation element
//                    (kActivationElements)
// Not fitted: the per-call latency and the per-step cost (far below the
// rows' noise), the math-attention penalty (no row runs unfused attention),
// the optimizer and offload (no row's share of them is measurable).
enum PriorScale : int {
  kScaleCompute,
  kScaleComputeFp8Devices,
  kScaleFp8Flops,
  kScaleLayerPass,
  kScaleDataParallelBytes,
  kScaleModelParallelBytes,
  kScaleFusedAttention,
  kScaleActivationBytes,
  kNumPriorScales
};
const char* PriorScaleName(int scale);
using PriorScales = std::array<double, kNumPriorScales>;
inline constexpr PriorScales kUnitScales = {1, 1, 1, 1, 1, 1, 1, 1};  // the shipped priors

// The scales that turn the shipped priors into the REFERENCE priors, what
// the fit's weak pull is towards, so that the fit does not depend on what
// search/step_time.cc ships: 0.4 of the peak (bf16 and fp8 alike), 300 µs per layer pass, data-
// and model-parallel bytes at the link's full cost (the priors before any
// calibration), the fused attention kernel's extra time at 0.4 of the peak
// too (as if each of its FLOPs cost twice a GEMM FLOP at that fraction), and 150 bytes per
// activation element (about 50 forward: two norms' inputs and outputs, two residual adds, the gated
// activation's three n_inner-wide tensors and the rotary embedding of q and k, each 16-bit element
// read or written once, n_inner ≈ 3.5 h; twice that backward).
PriorScales ReferenceScales();

// The prior coefficients of `device` with each group multiplied by its scale.
TimeCoefficients ScaledPriors(const DeviceSpec& device, const PriorScales& scales);

// Predicted step time of `run` (seconds) under the scaled priors.
double PredictRun(const PublishedRun& run, const PriorScales& scales);

// The scales minimizing, over `rows`,
//   sum_i ((predicted_i - measured_i) / measured_i)^2
//     + lambda * sum_g (scale_g / reference_g - 1)^2,
// every scale >= 0: relative errors (fast and slow runs weigh alike) with a
// weak pull (lambda) towards the reference priors (ReferenceScales) for what
// the rows do not pin down. Exact: every subset of scales held at 0 is solved and the best
// feasible one kept. Deterministic.
PriorScales FitScales(const std::vector<PublishedRun>& runs, const std::vector<int>& rows,
                      double lambda = 1e-1);

// |predicted - measured| / measured over `rows`, its median; 0 for none.
double MedianRelativeError(const std::vector<PublishedRun>& runs, const std::vector<int>& rows,
                           const PriorScales& scales);

// The relative step-time errors |predicted - measured| / measured over
// `rows`: their count, median and 90th percentile (linear interpolation
// between order statistics); all 0 for no rows.
struct ErrorSummary {
  int rows = 0;
  double median = 0;
  double p90 = 0;
};
ErrorSummary StepTimeErrors(const std::vector<PublishedRun>& runs, const std::vector<int>& rows,
                            const PriorScales& scales);
// The q-quantile (0..1) of `values` by linear interpolation; 0 for none.
double Quantile(std::vector<double> values, double q);

// What the cost model (search/cost_model.h, with its prior memory
// coefficients) says of a run's memory, on the run's device (the catalog's
// entry, its memory replaced by device_memory_gib where given):
//   predicted_bytes  the worst rank's predicted peak (MemoryEstimate::total)
//   fits             predicted within the device memory (what `estimate`
//                    reports; no margin)
//   kept_by_tuner    within the device memory plus the tuner's pruning
//                    margin (SearchSetup::memory_margin): a run outside it
//                    would never be tried by `tune`
struct MemoryVerdict {
  MemoryEstimate estimate;  // the breakdown
  double predicted_bytes = 0;
  double device_bytes = 0;
  bool fits = false;
  bool kept_by_tuner = false;
};
MemoryVerdict PredictMemory(const PublishedRun& run);
// The tuner's pruning margin (SearchSetup's default), read where it is set.
double TunerMemoryMargin();

// The rank correlation within each group (rows sharing a model and a
// cluster), in table order: over the group's held-out rows where it has at
// least 3 of them, else over all its rows. A group RANKS only with at least
// 3 such rows whose measured tokens/s/GPU spread by more than kRealSpread
// (closer, the order is the sources' noise). Spearman of predicted against
// measured step time, and of tokens/s/GPU (what a search ranks strategies
// by: batch sizes that differ within a group make step-time ranks easy).
inline constexpr double kRealSpread = 0.10;
struct GroupRanking {
  std::string group;
  std::vector<int> rows;         // all the group's rows (indices into the runs)
  std::vector<int> ranked_over;  // the rows the correlations are over
  bool over_held_out = false;
  bool ranks = false;
  double step_time_spearman = 0;  // 0 unless ranks
  double throughput_spearman = 0;
};
std::vector<GroupRanking> RankGroups(const std::vector<PublishedRun>& runs, const Split& split,
                                     const PriorScales& scales);

// Spearman rank correlation of the two lists (average ranks for ties); 0
// when either is constant or shorter than 2.
double Spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace autoaccel::bench

#endif  // AUTOACCEL_BENCH_CALIBRATION_H_
