#include "search/cost_model.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace autoaccel {

namespace {

// Lawson and Hanson's active-set method: argmin ||A x - b|| subject to
// x >= 0. A must have full column rank (the callers' prior rows see to it).
Eigen::VectorXd SolveNonNegativeLeastSquares(const Eigen::MatrixXd& A, const Eigen::VectorXd& b) {
  const Eigen::Index n = A.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(n, false);
  const double tolerance = 1e-12 * std::max(1.0, A.norm() * b.norm());
  for (int outer = 0; outer < 3 * n + 10; ++outer) {
    const Eigen::VectorXd w = A.transpose() * (b - A * x);
    Eigen::Index best = -1;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!passive[j] && w[j] > tolerance && (best < 0 || w[j] > w[best])) best = j;
    }
    if (best < 0) break;  // Kuhn-Tucker conditions hold
    passive[best] = true;
    for (int inner = 0; inner < 3 * n + 10; ++inner) {
      std::vector<Eigen::Index> columns;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[j]) columns.push_back(j);
      }
      Eigen::MatrixXd sub(A.rows(), static_cast<Eigen::Index>(columns.size()));
      for (size_t i = 0; i < columns.size(); ++i) sub.col(i) = A.col(columns[i]);
      const Eigen::VectorXd z = sub.colPivHouseholderQr().solve(b);
      if ((z.array() > 0).all()) {
        x.setZero();
        for (size_t i = 0; i < columns.size(); ++i) x[columns[i]] = z[i];
        break;
      }
      // Step from x towards z until the first passive variable reaches 0,
      // and let it go.
      double alpha = 1.0;
      for (size_t i = 0; i < columns.size(); ++i) {
        if (z[i] <= 0) {
          const double xi = x[columns[i]];
          alpha = std::min(alpha, xi / (xi - z[i]));
        }
      }
      for (size_t i = 0; i < columns.size(); ++i) {
        double& xi = x[columns[i]];
        xi += alpha * (z[i] - xi);
        if (xi <= 1e-15) {
          xi = 0;
          passive[columns[i]] = false;
        }
      }
      if (std::none_of(passive.begin(), passive.end(), [](bool p) { return p; })) break;
    }
  }
  return x;
}

// Time calibration. Row i of `relative` is p_k x_ik / t_i: observation i's
// time shares under the prior, so that u = 1 is the prior and a u with
// relative · u = 1 fits every observation. Returns argmin over u >= 0 of
// |relative · u - 1|^2 + lambda |u - 1|^2.
// A weighted observation's row and target are both scaled by the root of
// its weight (`target` holds those roots: 1 for the job's own).
Eigen::VectorXd FitRelativeToPrior(const Eigen::MatrixXd& relative, const Eigen::VectorXd& target,
                                   double lambda) {
  const Eigen::Index rows = relative.rows(), cols = relative.cols();
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(rows + cols, cols);
  A.topRows(rows) = relative;
  const double root_lambda = std::sqrt(lambda);
  for (Eigen::Index j = 0; j < cols; ++j) A(rows + j, j) = root_lambda;
  Eigen::VectorXd b(rows + cols);
  b.head(rows) = target;
  b.tail(cols).setConstant(root_lambda);
  return SolveNonNegativeLeastSquares(A, b);
}

// The prior's weight lambda. Too strong, it holds on to the prior where the
// observations say otherwise (a feature that takes a small share of every
// observed step barely moves, and the big ones make up for it); too weak,
// it lets measurement noise drive the coefficients the data pins down
// poorly. With enough observations the weight is chosen among a few by
// cross-validation (leave-one-out, or 10-fold past 10 observations; ties go
// to the stronger prior); before that, kDefaultPriorWeight: a prior worth
// about one observation's 3% noise on coefficients known within 2x.
constexpr double kDefaultPriorWeight = 1e-3;
constexpr int kMinObservationsToValidate = 6;
// *cv_error: the chosen weight's root-mean-square residual over the folds
// (0 when there are too few observations to validate).
double ChoosePriorWeight(const Eigen::MatrixXd& relative, const Eigen::VectorXd& target,
                         double* cv_error) {
  const Eigen::Index n = relative.rows();
  *cv_error = 0;
  if (n < kMinObservationsToValidate) return kDefaultPriorWeight;
  const Eigen::Index folds = std::min<Eigen::Index>(n, 10);
  double best = kDefaultPriorWeight, best_error = std::numeric_limits<double>::infinity();
  for (double lambda : {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6}) {
    double error = 0;
    for (Eigen::Index fold = 0; fold < folds; ++fold) {
      const Eigen::Index train_rows = n - (n - fold + folds - 1) / folds;
      Eigen::MatrixXd train(train_rows, relative.cols());
      Eigen::VectorXd train_target(train_rows);
      Eigen::Index r = 0;
      for (Eigen::Index i = 0; i < n; ++i) {
        if (i % folds == fold) continue;
        train.row(r) = relative.row(i);
        train_target[r++] = target[i];
      }
      const Eigen::VectorXd u = FitRelativeToPrior(train, train_target, lambda);
      for (Eigen::Index i = fold; i < n; i += folds) {
        const double residual = relative.row(i).dot(u) - target[i];
        error += residual * residual;
      }
    }
    if (error < best_error) {
      best = lambda;
      best_error = error;
    }
  }
  *cv_error = std::sqrt(best_error / double(n));
  return best;
}

// Memory calibration: the weight of the pull towards f = 1, o = 0.
constexpr double kMemoryPriorWeight = 1e-3;

std::string FormatBytes(double bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  if (std::abs(bytes) >= kGiB) return absl::StrFormat("%.1f GiB", bytes / kGiB);
  if (std::abs(bytes) >= kMiB) return absl::StrFormat("%.1f MiB", bytes / kMiB);
  if (std::abs(bytes) >= kKiB) return absl::StrFormat("%.1f KiB", bytes / kKiB);
  return absl::StrFormat("%.0f bytes", bytes);
}

}  // namespace

CostModel::CostModel(ModelSpec model, int seq_len, int global_batch_size, DeviceSpec device)
    : model_(std::move(model)),
      seq_len_(seq_len),
      global_batch_size_(global_batch_size),
      device_(std::move(device)),
      topology_(TopologyOf(device_)),
      features_(model_, seq_len_, topology_),
      memory_estimator_(model_, seq_len_),
      time_prior_(PriorTimeCoefficients(device_)),
      time_(time_prior_) {}

CostModel::Prediction CostModel::Predict(const Strategy& s) const {
  Prediction p;
  p.memory = memory_estimator_(s, memory_);
  p.step_time_s = PredictStepTime(features_(s), time_);
  if (p.step_time_s > 0) {
    p.tokens_per_second = double(global_batch_size_) * seq_len_ / p.step_time_s;
  }
  return p;
}

bool CostModel::Fits(const MemoryEstimate& memory, double margin) const {
  if (model_.IsTorchScript() || device_.memory_bytes <= 0) return true;
  return double(memory.total()) <= double(device_.memory_bytes) * (1.0 + margin);
}

bool CostModel::Fits(const Strategy& s, double margin, std::string* reason) const {
  if (model_.IsTorchScript() || device_.memory_bytes <= 0) return true;
  const MemoryEstimate e = memory_estimator_(s, memory_);
  if (Fits(e, margin)) return true;
  const double limit = double(device_.memory_bytes) * (1.0 + margin);
  if (reason != nullptr) {
    std::vector<std::pair<int64_t, absl::string_view>> parts = {
        {e.activations, "activations"}, {e.model_state(), "model state"},
        {e.gathered, "gathered layer"}, {e.fp8_weights, "fp8 weight copies"},
        {e.logits, "logits"},           {e.overhead, "overhead"}};
    std::stable_sort(parts.begin(), parts.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> named;
    for (const auto& [bytes, name] : parts) {
      if (bytes <= 0 || named.size() == 3) break;  // sorted: the three biggest
      named.push_back(absl::StrCat(name, " ", FormatBytes(bytes)));
    }
    *reason = absl::StrCat("predicted ", FormatBytes(double(e.total())), " per device (",
                           absl::StrJoin(named, ", "), ") exceeds the device's ",
                           FormatBytes(double(device_.memory_bytes)));
    if (margin != 0) {
      absl::StrAppend(reason, " (", FormatBytes(limit), " with the ",
                      absl::StrFormat("%g", margin * 100), "% margin)");
    }
  }
  return false;
}

TrialPrediction CostModel::PredictTrial(const Strategy& s) const {
  const Prediction p = Predict(s);
  TrialPrediction out;
  out.step_time_s = p.step_time_s;
  out.tokens_per_second = p.tokens_per_second;
  if (!model_.IsTorchScript()) out.peak_memory_bytes = std::max<int64_t>(0, p.memory.total());
  return out;
}

bool CostModel::AddMeasured(const ModelSpec& model, int seq_len, const Strategy& s,
                            const TrialMetrics& measured, double weight) {
  bool used = false;
  if (measured.step_time_median_s > 0 && std::isfinite(measured.step_time_median_s)) {
    time_observations_.push_back(
        {StepTimeFeatures(model, seq_len, s, topology_), measured.step_time_median_s, weight});
    used = true;
  }
  if (measured.peak_memory_bytes > 0 && !model.IsTorchScript()) {
    const MemoryEstimate e = EstimateMemory(model, seq_len, s);  // factor 1, no overhead
    memory_observations_.push_back({double(e.total() - e.activations - e.overhead),
                                    double(e.activations), double(measured.peak_memory_bytes),
                                    weight});
    used = true;
  }
  return used;
}

int CostModel::WarmStart(const std::vector<EarlierTrial>& trials) {
  int usable = 0;
  for (const EarlierTrial& t : trials) usable += !t.model.IsTorchScript() && t.seq_len > 0;
  if (usable == 0) return 0;
  const double weight = std::min(1.0, kEarlierTrialsWeight / usable);
  int used = 0;
  for (const EarlierTrial& t : trials) {
    if (t.model.IsTorchScript() || t.seq_len <= 0) continue;
    if (AddMeasured(t.model, t.seq_len, t.strategy, t.metrics, weight)) ++used;
  }
  if (used == 0) return 0;
  RefitTime();
  RefitMemory();
  earlier_observations_ += used;
  return used;
}

void CostModel::UseProxy(ProxyMapping mapping) {
  ModelSpec model = mapping.proxy_model();
  proxy_ = std::make_shared<const ProxyParts>(
      ProxyParts{std::move(mapping), StepTimeFeaturizer(model, seq_len_, topology_),
                 MemoryEstimator(model, seq_len_)});
}

std::optional<CostModel::Prediction> CostModel::PredictProxy(const Strategy& s) const {
  if (!proxy_) return std::nullopt;
  absl::StatusOr<ProxyTrial> t = proxy_->mapping.TrialOf(s);
  if (!t.ok()) return std::nullopt;
  return PredictProxy(*t);
}

CostModel::Prediction CostModel::PredictProxy(const ProxyTrial& t) const {
  Prediction p;
  p.memory = proxy_->memory(t.strategy, memory_);
  p.step_time_s = PredictStepTime(proxy_->features(t.strategy), time_);
  if (p.step_time_s > 0) {
    p.tokens_per_second = double(t.setup.global_batch_size) * seq_len_ / p.step_time_s;
  }
  return p;
}

void CostModel::Observe(const Strategy& full, const TrialMetrics& measured, TrialStatus status) {
  // What ran: the candidate, or in proxy mode its proxy trial.
  const ModelSpec* model = &model_;
  const MemoryEstimator* estimator = &memory_estimator_;
  Strategy s = full;
  if (proxy_) {
    absl::StatusOr<ProxyTrial> t = proxy_->mapping.TrialOf(full);
    if (!t.ok()) return;
    s = t->strategy;
    model = &proxy_->mapping.proxy_model();
    estimator = &proxy_->memory;
  }
  if (status == TrialStatus::kOom && device_.memory_bytes > 0 && !model_.IsTorchScript()) {
    const MemoryEstimate e = (*estimator)(s);  // factor 1, no overhead
    oom_observations_.push_back({double(e.total() - e.activations - e.overhead),
                                 double(e.activations), double(device_.memory_bytes)});
    RefitMemory();
    ++observations_;
    return;
  }
  if (status != TrialStatus::kSucceeded) return;
  const size_t times = time_observations_.size(), peaks = memory_observations_.size();
  if (!AddMeasured(*model, seq_len_, s, measured, 1.0)) return;
  if (time_observations_.size() > times && time_schedule_.CountAndDue()) RefitTime();
  if (memory_observations_.size() > peaks && memory_schedule_.CountAndDue()) RefitMemory();
  ++observations_;
}

bool CostModel::RefitSchedule::CountAndDue() {
  ++seen;
  if (seen > kRefitEveryObservationUpTo && seen < refit_at * (1 + kRefitGrowth)) return false;
  refit_at = seen;
  return true;
}

void CostModel::RefitTime() {
  ++fits_;
  // u_k = c_k / p_k over the features the data exercises; the others keep
  // u_k = 1 (their prior).
  std::vector<int> columns;
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    for (const TimeObservation& o : time_observations_) {
      if (o.x[k] != 0) {
        columns.push_back(k);
        break;
      }
    }
  }
  time_ = time_prior_;
  if (columns.empty()) return;
  Eigen::MatrixXd relative(static_cast<Eigen::Index>(time_observations_.size()),
                           static_cast<Eigen::Index>(columns.size()));
  Eigen::VectorXd target(relative.rows());
  for (Eigen::Index i = 0; i < relative.rows(); ++i) {
    const TimeObservation& o = time_observations_[i];
    target[i] = std::sqrt(o.weight);
    for (Eigen::Index j = 0; j < relative.cols(); ++j) {
      const int k = columns[j];
      relative(i, j) = target[i] * time_prior_.seconds_per_unit[k] * o.x[k] / o.seconds;
    }
  }
  const double lambda = ChoosePriorWeight(relative, target, &time_fit_error_);
  const Eigen::VectorXd u = FitRelativeToPrior(relative, target, lambda);
  for (Eigen::Index j = 0; j < relative.cols(); ++j) {
    time_.seconds_per_unit[columns[j]] = time_prior_.seconds_per_unit[columns[j]] * u[j];
  }
}

void CostModel::RefitMemory() {
  ++fits_;
  memory_ = MemoryCoefficients{};
  // The rows: the measured peaks once there are two (one cannot tell
  // activations from overhead), and the out-of-memory lower bounds the fit
  // would otherwise violate, added a round at a time (with one of them, a
  // single measured peak counts too).
  std::vector<const MemoryObservation*> rows;
  bool peaks_in = false;
  const auto add_peaks = [&] {
    if (peaks_in) return;
    for (const MemoryObservation& o : memory_observations_) rows.push_back(&o);
    peaks_in = true;
  };
  if (memory_observations_.size() >= 2) add_peaks();
  std::vector<bool> bound(oom_observations_.size(), false);
  while (true) {
    if (!rows.empty()) {
      double scale = 0;
      for (const MemoryObservation* o : rows) scale += o->peak;
      scale /= double(rows.size());
      // v = (f, o / scale): rows (activations_i, scale) / peak_i against
      // (peak_i - fixed_i) / peak_i, then the priors f = 1, o = 0.
      const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
      Eigen::MatrixXd A = Eigen::MatrixXd::Zero(n + 2, 2);
      Eigen::VectorXd b = Eigen::VectorXd::Zero(n + 2);
      for (Eigen::Index i = 0; i < n; ++i) {
        const MemoryObservation& o = *rows[i];
        const double w = std::sqrt(o.weight);
        A(i, 0) = w * o.activations / o.peak;
        A(i, 1) = w * scale / o.peak;
        b[i] = w * (o.peak - o.fixed) / o.peak;
      }
      const double root_lambda = std::sqrt(kMemoryPriorWeight);
      A(n, 0) = root_lambda;
      b[n] = root_lambda;         // f = 1
      A(n + 1, 1) = root_lambda;  // o = 0
      const Eigen::VectorXd v = SolveNonNegativeLeastSquares(A, b);
      memory_.activation_factor = v[0];
      memory_.overhead_bytes = static_cast<int64_t>(std::llround(v[1] * scale));
    }
    bool added = false;
    for (size_t k = 0; k < oom_observations_.size(); ++k) {
      const MemoryObservation& o = oom_observations_[k];
      const double predicted =
          o.fixed + memory_.activation_factor * o.activations + memory_.overhead_bytes;
      if (bound[k] || predicted >= o.peak) continue;
      add_peaks();
      bound[k] = true;
      rows.push_back(&o);
      added = true;
    }
    if (!added) return;
  }
}

}  // namespace autoaccel
