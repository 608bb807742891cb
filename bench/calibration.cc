#include "bench/calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "search/cost_model.h"
#include "search/device_catalog.h"
#include "search/searcher.h"

namespace autoaccel::bench {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The columns every row must have, in any order.
constexpr const char* kColumns[] = {"id",
                                    "group",
                                    "source",
                                    "citation",
                                    "model",
                                    "family",
                                    "n_layer",
                                    "n_embd",
                                    "n_head",
                                    "n_kv_head",
                                    "n_inner",
                                    "vocab",
                                    "seq_len",
                                    "device",
                                    "gpus",
                                    "gpus_per_node",
                                    "dp",
                                    "tp",
                                    "pp",
                                    "vpp",
                                    "cp",
                                    "cp_comm",
                                    "ep",
                                    "sp",
                                    "sharding",
                                    "mbs",
                                    "ga",
                                    "precision",
                                    "checkpoint",
                                    "checkpoint_pct",
                                    "measured_kind",
                                    "measured_value",
                                    "global_batch_tokens",
                                    "device_memory_gib",
                                    "measured_peak_memory_gib"};

class Row {
 public:
  Row(const std::map<std::string, int>* index, std::vector<std::string> cells, int line)
      : index_(index), cells_(std::move(cells)), line_(line) {}
  const std::string& Text(const char* column) const { return cells_[index_->at(column)]; }
  absl::StatusOr<double> Number(const char* column) const {
    double v = 0;
    if (!absl::SimpleAtod(Text(column), &v) || !(v > 0) || !std::isfinite(v)) {
      return Error(column, "must be a positive number");
    }
    return v;
  }
  // An empty cell is 0 (not stated); anything else a positive number.
  absl::StatusOr<double> OptionalNumber(const char* column) const {
    if (Text(column).empty()) return 0.0;
    return Number(column);
  }
  absl::StatusOr<int> Int(const char* column, int min = 1) const {
    int v = 0;
    if (!absl::SimpleAtoi(Text(column), &v) || v < min) {
      return Error(column, absl::StrCat("must be an integer >= ", min));
    }
    return v;
  }
  absl::Status Error(const char* column, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line_, ", column ", column, " ('", Text(column), "'): ", what));
  }
  int line() const { return line_; }

 private:
  const std::map<std::string, int>* index_;
  std::vector<std::string> cells_;
  int line_;
};

#define ASSIGN_OR_RETURN_CAL(lhs, expr)           \
  {                                               \
    auto value_or = (expr);                       \
    if (!value_or.ok()) return value_or.status(); \
    lhs = *value_or;                              \
  }

absl::StatusOr<PublishedRun> ParseRun(const Row& row) {
  PublishedRun r;
  ASSIGN_OR_RETURN_CAL(r.id, row.Int("id"));
  r.group = row.Text("group");
  r.source = row.Text("source");
  r.citation = row.Text("citation");
  r.model = row.Text("model");
  if (r.group.empty()) return row.Error("group", "must not be empty");
  if (r.citation.find("https://") != 0) {
    return row.Error("citation", "must start with the source's https:// address");
  }
  ModelSpec& m = r.spec;
  m.family = row.Text("family");
  ASSIGN_OR_RETURN_CAL(m.n_layer, row.Int("n_layer"));
  ASSIGN_OR_RETURN_CAL(m.n_embd, row.Int("n_embd"));
  ASSIGN_OR_RETURN_CAL(m.n_head, row.Int("n_head"));
  ASSIGN_OR_RETURN_CAL(m.n_kv_head, row.Int("n_kv_head"));
  ASSIGN_OR_RETURN_CAL(m.n_inner, row.Int("n_inner"));
  ASSIGN_OR_RETURN_CAL(m.vocab_size, row.Int("vocab"));
  ASSIGN_OR_RETURN_CAL(r.seq_len, row.Int("seq_len"));
  m.n_positions = r.seq_len;  // the runs train at their longest sequence
  if (m.family == "gpt2") m.hidden_act = "gelu_new";
  if (absl::Status s = m.Validate(); !s.ok()) {
    return row.Error("family", absl::StrCat("the model does not validate: ", s.message()));
  }
  r.device = row.Text("device");
  if (absl::StatusOr<DeviceSpec> d = PublishedDevice(r.device); !d.ok()) {
    return row.Error("device", d.status().message());
  } else if (d->type != "cuda") {
    return row.Error("device", "must be a cuda device of the catalog");
  }
  ASSIGN_OR_RETURN_CAL(r.gpus, row.Int("gpus"));
  ASSIGN_OR_RETURN_CAL(r.gpus_per_node, row.Int("gpus_per_node"));
  Strategy& s = r.strategy;
  ASSIGN_OR_RETURN_CAL(s.data_parallel, row.Int("dp"));
  ASSIGN_OR_RETURN_CAL(s.tensor_parallel, row.Int("tp"));
  ASSIGN_OR_RETURN_CAL(s.pipeline_parallel, row.Int("pp"));
  ASSIGN_OR_RETURN_CAL(s.virtual_stages, row.Int("vpp"));
  ASSIGN_OR_RETURN_CAL(s.context_parallel, row.Int("cp"));
  ASSIGN_OR_RETURN_CAL(s.expert_parallel, row.Int("ep"));
  auto cp_comm = ParseContextParallelComm(row.Text("cp_comm"));
  if (!cp_comm.ok()) return row.Error("cp_comm", cp_comm.status().message());
  s.context_parallel_comm = *cp_comm;
  int sp = 0;
  ASSIGN_OR_RETURN_CAL(sp, row.Int("sp", 0));
  s.sequence_parallel = sp != 0;
  if (s.virtual_stages > 1) s.pipeline_schedule = PipelineSchedule::kInterleaved;
  auto sharding = ParseSharding(row.Text("sharding"));
  if (!sharding.ok()) return row.Error("sharding", sharding.status().message());
  // Sharding spans the data- and context-parallel ranks (weight_replicas).
  s.sharding = s.data_parallel * s.context_parallel > 1 ? *sharding : Sharding::kNone;
  ASSIGN_OR_RETURN_CAL(s.micro_batch_size, row.Int("mbs"));
  ASSIGN_OR_RETURN_CAL(s.grad_accum_steps, row.Int("ga"));
  auto precision = ParsePrecision(row.Text("precision"));
  if (!precision.ok()) return row.Error("precision", precision.status().message());
  s.precision = *precision;
  auto checkpoint = ParseCheckpointing(row.Text("checkpoint"));
  if (!checkpoint.ok()) return row.Error("checkpoint", checkpoint.status().message());
  s.checkpointing = *checkpoint;
  ASSIGN_OR_RETURN_CAL(s.checkpoint_percent, row.Int("checkpoint_pct"));
  s.attention = Attention::kSdpa;        // every source uses a fused (flash) kernel
  s.optimizer = Optimizer::kFusedAdamW;  // every source steps one fused/foreach update
  if (absl::Status st = CheckLayout(s); !st.ok()) return row.Error("dp", st.message());
  if (absl::Status st = CheckCheckpointPercent(s); !st.ok()) {
    return row.Error("checkpoint_pct", st.message());
  }
  if (s.world_size() != r.gpus) {
    return row.Error("gpus", absl::StrCat("dp × tp × pp × cp is ", s.world_size()));
  }
  ASSIGN_OR_RETURN_CAL(r.device_memory_gib, row.OptionalNumber("device_memory_gib"));
  ASSIGN_OR_RETURN_CAL(r.measured_peak_memory_gib, row.OptionalNumber("measured_peak_memory_gib"));
  r.measured_kind = row.Text("measured_kind");
  ASSIGN_OR_RETURN_CAL(r.measured_value, row.Number("measured_value"));
  ASSIGN_OR_RETURN_CAL(r.global_batch_tokens, row.Number("global_batch_tokens"));
  const double expected_tokens =
      double(s.micro_batch_size) * s.grad_accum_steps * s.data_parallel * r.seq_len;
  if (r.global_batch_tokens != expected_tokens) {
    return row.Error("global_batch_tokens",
                     absl::StrCat("must be mbs × ga × dp × seq_len = ", expected_tokens));
  }
  if (r.measured_kind == "tokens_per_s") {
    r.step_time_s = r.global_batch_tokens / r.measured_value;
  } else if (r.measured_kind == "tokens_per_s_per_gpu") {
    r.step_time_s = r.global_batch_tokens / (r.measured_value * r.gpus);
  } else {
    return row.Error("measured_kind", "must be tokens_per_s or tokens_per_s_per_gpu");
  }
  return r;
}

// Which scale each time feature belongs to; -1 for the unfitted ones.
int ScaleOf(int feature, const DeviceSpec& device) {
  switch (feature) {
    case kFlopsFp32:
    case kFlopsBf16:
    case kFlopsFp16:
    case kFlopsPureBf16:
    case kMathAttentionFlops:
      return HasFp8TensorCores(device) ? kScaleComputeFp8Devices : kScaleCompute;
    case kFlopsFp8:
      return kScaleFp8Flops;
    case kLayerPasses:
      return kScaleLayerPass;
    case kDataParallelBytes:
      return kScaleDataParallelBytes;
    case kModelParallelBytes:
      return kScaleModelParallelBytes;
    case kFusedAttentionFlops:
      return kScaleFusedAttention;
    case kActivationElements:
      return kScaleActivationBytes;
    default:
      return -1;
  }
}

// The catalog's device with the row's devices per node.
DeviceSpec RunDevice(const PublishedRun& run) {
  DeviceSpec device = *PublishedDevice(run.device);
  device.devices_per_node = run.gpus_per_node;
  return device;
}

TimeFeatures Features(const PublishedRun& run, const DeviceSpec& device) {
  return StepTimeFeatures(run.spec, run.seq_len, run.strategy, TopologyOf(device));
}

// Per run: the prior's seconds in each scale's group, and the rest.
struct Decomposed {
  std::array<double, kNumPriorScales> by_scale{};
  double fixed = 0;
};

Decomposed Decompose(const PublishedRun& run) {
  const DeviceSpec device = RunDevice(run);
  const TimeFeatures x = Features(run, device);
  const TimeCoefficients c = PriorTimeCoefficients(device);
  Decomposed d;
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    const double seconds = x[k] * c.seconds_per_unit[k];
    const int g = ScaleOf(k, device);
    if (g < 0) {
      d.fixed += seconds;
    } else {
      d.by_scale[g] += seconds;
    }
  }
  return d;
}

// Average ranks (1-based), ties sharing their mean rank.
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<int> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean = (i + j) / 2.0 + 1;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

absl::StatusOr<std::vector<PublishedRun>> LoadPublishedRuns(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string line;
  if (!std::getline(in, line)) return absl::InvalidArgumentError(absl::StrCat(path, ": empty"));
  std::map<std::string, int> index;
  const std::vector<std::string> header = absl::StrSplit(line, ',');
  for (size_t i = 0; i < header.size(); ++i) index[header[i]] = static_cast<int>(i);
  for (const char* column : kColumns) {
    if (!index.count(column)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": header lacks column ", column));
    }
  }
  std::vector<PublishedRun> runs;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (cells.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": line ", number, " has ", cells.size(),
                                                     " cells, the header ", header.size()));
    }
    absl::StatusOr<PublishedRun> run = ParseRun(Row(&index, std::move(cells), number));
    if (!run.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", run.status().message()));
    if (run->id != static_cast<int>(runs.size()) + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": line ", number, ": ids must count 1, 2, ... in order"));
    }
    runs.push_back(*std::move(run));
  }
  if (runs.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no rows"));
  return runs;
}

absl::StatusOr<DeviceSpec> PublishedDevice(const std::string& name) {
  static const absl::StatusOr<DeviceCatalog>* const catalog =
      new absl::StatusOr<DeviceCatalog>(DeviceCatalog::BuiltIn());
  if (!catalog->ok()) return catalog->status();
  absl::StatusOr<CatalogDevice> device = (*catalog)->Get(name);
  if (!device.ok()) return device.status();
  return device->spec;
}

Split SplitRuns(const std::vector<PublishedRun>& runs) {
  Split split;
  std::map<std::string, int> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    const int position = seen[runs[i].group]++;
    (position % 2 == 0 ? split.train : split.held_out).push_back(static_cast<int>(i));
  }
  return split;
}

const char* PriorScaleName(int scale) {
  switch (scale) {
    case kScaleCompute:
      return "compute";
    case kScaleComputeFp8Devices:
      return "compute_fp8_devices";
    case kScaleFp8Flops:
      return "fp8_flops";
    case kScaleLayerPass:
      return "layer_pass";
    case kScaleDataParallelBytes:
      return "data_parallel_bytes";
    case kScaleModelParallelBytes:
      return "model_parallel_bytes";
    case kScaleFusedAttention:
      return "fused_attention";
    case kScaleActivationBytes:
      return "activation_bytes";
    default:
      return "unknown";
  }
}

PriorScales ReferenceScales() {
  PriorScales r{};
  r[kScaleCompute] = kCudaAchievedPeakFraction / 0.4;  // seconds per FLOP at 0.4 of the peak
  r[kScaleComputeFp8Devices] = kCudaAchievedPeakFractionFp8Devices / 0.4;
  r[kScaleFp8Flops] = kCudaFp8AchievedPeakFraction / 0.4;
  r[kScaleLayerPass] = 300e-6 / kCudaLayerPassSeconds;
  r[kScaleDataParallelBytes] = 1.0 / kCudaDataParallelExposure;
  r[kScaleModelParallelBytes] = 1.0 / kCudaModelParallelExposure;
  r[kScaleFusedAttention] = kCudaFusedAttentionFraction / 0.4;
  r[kScaleActivationBytes] = 150.0 / kCudaActivationBytesPerElement;
  return r;
}

TimeCoefficients ScaledPriors(const DeviceSpec& device, const PriorScales& scales) {
  TimeCoefficients c = PriorTimeCoefficients(device);
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    const int g = ScaleOf(k, device);
    if (g >= 0) c.seconds_per_unit[k] *= scales[g];
  }
  return c;
}

double PredictRun(const PublishedRun& run, const PriorScales& scales) {
  const DeviceSpec device = RunDevice(run);
  return PredictStepTime(Features(run, device), ScaledPriors(device, scales));
}

PriorScales FitScales(const std::vector<PublishedRun>& runs, const std::vector<int>& rows,
                      double lambda) {
  // Rows: (A u + f - t) / t; regularizer rows: sqrt(lambda) (u - 1).
  const int n = static_cast<int>(rows.size()), k = kNumPriorScales;
  Eigen::MatrixXd A(n + k, k);
  Eigen::VectorXd b(n + k);
  for (int i = 0; i < n; ++i) {
    const PublishedRun& run = runs[rows[i]];
    const Decomposed d = Decompose(run);
    for (int g = 0; g < k; ++g) A(i, g) = d.by_scale[g] / run.step_time_s;
    b(i) = 1.0 - d.fixed / run.step_time_s;
  }
  const double w = std::sqrt(lambda);
  const PriorScales reference = ReferenceScales();
  A.bottomRows(k).setZero();
  for (int g = 0; g < k; ++g) A(n + g, g) = w / reference[g];
  b.tail(k) = Eigen::VectorXd::Constant(k, w);
  // Exact non-negative least squares for a few scales: every active set.
  PriorScales best = kUnitScales;
  double best_cost = INFINITY;
  for (int mask = 0; mask < (1 << k); ++mask) {
    std::vector<int> free;
    for (int g = 0; g < k; ++g) {
      if (mask & (1 << g)) free.push_back(g);
    }
    Eigen::VectorXd u = Eigen::VectorXd::Zero(k);
    if (!free.empty()) {
      Eigen::MatrixXd Af(n + k, free.size());
      for (size_t j = 0; j < free.size(); ++j) Af.col(j) = A.col(free[j]);
      const Eigen::VectorXd uf = Af.colPivHouseholderQr().solve(b);
      bool feasible = true;
      for (size_t j = 0; j < free.size(); ++j) {
        if (!(uf(j) >= 0)) feasible = false;
        u(free[j]) = uf(j);
      }
      if (!feasible) continue;
    }
    const double cost = (A * u - b).squaredNorm();
    if (cost < best_cost) {
      best_cost = cost;
      for (int g = 0; g < k; ++g) best[g] = u(g);
    }
  }
  return best;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double position = std::clamp(q, 0.0, 1.0) * double(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(values.size() - 1, below + 1);
  return values[below] + (position - double(below)) * (values[above] - values[below]);
}

ErrorSummary StepTimeErrors(const std::vector<PublishedRun>& runs, const std::vector<int>& rows,
                            const PriorScales& scales) {
  std::vector<double> errors;
  for (int i : rows) {
    errors.push_back(std::abs(PredictRun(runs[i], scales) - runs[i].step_time_s) /
                     runs[i].step_time_s);
  }
  ErrorSummary summary;
  summary.rows = static_cast<int>(errors.size());
  summary.median = Quantile(errors, 0.5);
  summary.p90 = Quantile(errors, 0.9);
  return summary;
}

double MedianRelativeError(const std::vector<PublishedRun>& runs, const std::vector<int>& rows,
                           const PriorScales& scales) {
  return StepTimeErrors(runs, rows, scales).median;
}

double TunerMemoryMargin() { return SearchSetup{}.memory_margin; }

MemoryVerdict PredictMemory(const PublishedRun& run) {
  DeviceSpec device = RunDevice(run);
  if (run.device_memory_gib > 0) {
    device.memory_bytes = static_cast<int64_t>(std::llround(run.device_memory_gib * kGiB));
  }
  const int global_batch = static_cast<int>(std::llround(run.global_batch_tokens / run.seq_len));
  const CostModel model(run.spec, run.seq_len, global_batch, device);
  MemoryVerdict verdict;
  verdict.estimate = model.Predict(run.strategy).memory;
  verdict.predicted_bytes = double(verdict.estimate.total());
  verdict.device_bytes = double(device.memory_bytes);
  verdict.fits = model.Fits(run.strategy, 0.0, nullptr);
  verdict.kept_by_tuner = model.Fits(run.strategy, TunerMemoryMargin(), nullptr);
  return verdict;
}

std::vector<GroupRanking> RankGroups(const std::vector<PublishedRun>& runs, const Split& split,
                                     const PriorScales& scales) {
  std::vector<GroupRanking> groups;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < runs.size(); ++i) {
    auto [it, added] = index.emplace(runs[i].group, groups.size());
    if (added) groups.push_back(GroupRanking{runs[i].group});
    groups[it->second].rows.push_back(static_cast<int>(i));
  }
  std::vector<std::vector<int>> held_rows(groups.size());
  for (int i : split.held_out) held_rows[index.at(runs[i].group)].push_back(i);
  for (size_t g = 0; g < groups.size(); ++g) {
    GroupRanking& r = groups[g];
    r.over_held_out = held_rows[g].size() >= 3;
    r.ranked_over = r.over_held_out ? held_rows[g] : r.rows;
    std::vector<double> measured, predicted, measured_tput, predicted_tput;
    for (int i : r.ranked_over) {
      const double per_gpu = runs[i].global_batch_tokens / runs[i].gpus;
      measured.push_back(runs[i].step_time_s);
      predicted.push_back(PredictRun(runs[i], scales));
      measured_tput.push_back(per_gpu / measured.back());
      predicted_tput.push_back(per_gpu / predicted.back());
    }
    r.ranks = measured.size() >= 3 &&
              *std::max_element(measured_tput.begin(), measured_tput.end()) >
                  (1 + kRealSpread) * *std::min_element(measured_tput.begin(), measured_tput.end());
    if (r.ranks) {
      r.step_time_spearman = Spearman(predicted, measured);
      r.throughput_spearman = Spearman(predicted_tput, measured_tput);
    }
  }
  return groups;
}

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return 0;
  return sab / std::sqrt(saa * sbb);
}

}  // namespace autoaccel::bench
