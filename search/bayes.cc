// Bayesian optimisation over the candidates: a Gaussian process models how
// far the measured log throughput is from the calibrated cost model's, and
// expected improvement picks the next candidate.
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "search/searcher_internal.h"

namespace autoaccel::search_internal {
namespace {

int Log2(int v) {
  int l = 0;
  while (v > 1) {
    v >>= 1;
    ++l;
  }
  return l;
}

// The strategy as a point of [0, 1]^d: one coordinate per binary choice, one
// per category of a categorical dimension, and log2 of the sizes (scaled so
// that the largest in the space is 1). A change of one categorical value
// moves the point by sqrt(2), of one binary by 1.
class Encoder {
 public:
  explicit Encoder(const std::vector<Strategy>& space) {
    for (const Strategy& s : space) {
      max_log_mbs_ = std::max(max_log_mbs_, Log2(s.micro_batch_size));
      max_log_world_ = std::max(max_log_world_, Log2(s.world_size()));
      max_log_vpp_ = std::max(max_log_vpp_, Log2(s.virtual_stages));
    }
  }

  static constexpr int kDims = 3 + 4 + 4 + 3 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 3;

  Eigen::VectorXd Encode(const Strategy& s) const {
    Eigen::VectorXd x = Eigen::VectorXd::Zero(kDims);
    int k = 0;
    const auto scaled = [](int log, int max_log) {
      return max_log > 0 ? double(log) / max_log : 0;
    };
    x[k++] = scaled(Log2(s.data_parallel), max_log_world_);
    x[k++] = scaled(Log2(s.tensor_parallel), max_log_world_);
    x[k++] = scaled(Log2(s.pipeline_parallel), max_log_world_);
    x[k + static_cast<int>(s.sharding)] = 1;
    k += 4;
    x[k + static_cast<int>(s.precision)] = 1;
    k += 4;
    // Recompute: the kind, weighted by the share of layers it covers.
    x[k + static_cast<int>(s.checkpointing)] =
        s.checkpointing == Checkpointing::kNone ? 1.0 : s.checkpoint_percent / 100.0;
    k += 3;
    x[k++] = s.attention == Attention::kSdpa;
    x[k++] = s.optimizer == Optimizer::kFusedAdamW;
    x[k++] = s.offload == Offload::kCpu;
    x[k++] = s.pipeline_schedule == PipelineSchedule::kInterleaved;
    x[k++] = scaled(Log2(s.virtual_stages), max_log_vpp_);
    x[k++] = s.sequence_parallel;
    x[k++] = scaled(Log2(s.micro_batch_size), max_log_mbs_);
    x[k++] = scaled(Log2(s.context_parallel), max_log_world_);
    x[k++] = s.context_parallel_comm == ContextParallelComm::kAllGather;
    x[k++] = scaled(Log2(s.expert_parallel), max_log_world_);
    return x;
  }

 private:
  int max_log_mbs_ = 0, max_log_world_ = 0, max_log_vpp_ = 0;
};

double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// A zero-mean GP with a squared-exponential kernel on residuals, fitted by
// picking the (length scale, signal variance) of a small grid with the
// highest marginal likelihood.
class ResidualProcess {
 public:
  // Measurement noise of log throughput (5% step-time jitter).
  static constexpr double kNoiseVariance = 0.05 * 0.05;

  void Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
    x_ = x;
    const int n = static_cast<int>(y.size());
    mean_ = n > 0 ? y.mean() : 0;
    const Eigen::VectorXd centred = y.array() - mean_;
    const double spread = n > 1 ? centred.squaredNorm() / (n - 1) : 0.0;
    const double base_variance = std::max(spread, 0.04);  // at least 20% in throughput
    double best_likelihood = -std::numeric_limits<double>::infinity();
    for (double length : {0.7, 1.4, 2.8}) {
      for (double scale : {0.5, 1.0, 2.0}) {
        const double variance = base_variance * scale;
        Eigen::MatrixXd k = Kernel(x, x, length, variance);
        k.diagonal().array() += kNoiseVariance;
        Eigen::LLT<Eigen::MatrixXd> llt(k);
        if (llt.info() != Eigen::Success) continue;
        const Eigen::VectorXd alpha = llt.solve(centred);
        const double log_det = 2 * Eigen::MatrixXd(llt.matrixL()).diagonal().array().log().sum();
        const double likelihood = -0.5 * centred.dot(alpha) - 0.5 * log_det;
        if (likelihood > best_likelihood) {
          best_likelihood = likelihood;
          length_ = length;
          variance_ = variance;
          llt_ = llt;
          alpha_ = alpha;
        }
      }
    }
    if (n == 0) {
      variance_ = base_variance;
      length_ = 1.4;
    }
  }

  // Posterior mean and variance of the residual at each row of `q`.
  void Predict(const Eigen::MatrixXd& q, Eigen::VectorXd* mean, Eigen::VectorXd* var) const {
    *mean = Eigen::VectorXd::Constant(q.rows(), mean_);
    *var = Eigen::VectorXd::Constant(q.rows(), variance_);
    if (x_.rows() == 0) return;
    const Eigen::MatrixXd ks = Kernel(q, x_, length_, variance_);  // m x n
    *mean += ks * alpha_;
    const Eigen::MatrixXd v = llt_.matrixL().solve(ks.transpose());  // n x m
    *var -= v.colwise().squaredNorm().transpose();
    *var = var->cwiseMax(1e-12);
  }

 private:
  static Eigen::MatrixXd Kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, double length,
                                double variance) {
    const Eigen::VectorXd an = a.rowwise().squaredNorm(), bn = b.rowwise().squaredNorm();
    Eigen::MatrixXd d2 = (-2.0 * a * b.transpose()).colwise() + an;
    d2.rowwise() += bn.transpose();
    return variance * (-d2.cwiseMax(0.0) / (2 * length * length)).array().exp().matrix();
  }

  Eigen::MatrixXd x_;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::VectorXd alpha_;
  double mean_ = 0, length_ = 1.4, variance_ = 0.04;
};

class BayesSearcher : public CandidateSearcher {
 public:
  explicit BayesSearcher(SearchSetup setup) : CandidateSearcher(std::move(setup)) {
    std::vector<Strategy> space;
    for (const Candidate& c : candidates_) space.push_back(c.strategy);
    const Encoder encoder(space);
    points_.resize(static_cast<int>(candidates_.size()), Encoder::kDims);
    for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
      points_.row(i) = encoder.Encode(candidates_[i].strategy).transpose();
    }
  }

 private:
  // The model's log throughput for candidate i (0 without a model).
  double Prior(int i) const {
    const double p = candidates_[i].predicted_tokens_per_second;
    return p > 0 ? std::log(p) : 0.0;
  }

  std::optional<Proposal> Choose() override {
    const std::vector<int> open = OpenByPrediction();
    if (open.empty()) return std::nullopt;
    // Observations: every measured throughput, as its residual against the
    // (now calibrated) model.
    std::vector<int> seen;
    std::vector<double> residual;
    double incumbent = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
      const Candidate& c = candidates_[i];
      if (!c.result || c.result->status != TrialStatus::kSucceeded) continue;
      const double tps = c.result->metrics.tokens_per_second;
      if (!(tps > 0) || !std::isfinite(tps)) continue;
      seen.push_back(i);
      residual.push_back(std::log(tps) - Prior(i));
      if (IsEligible(*c.result, setup_.memory_limit_bytes)) {
        incumbent = std::max(incumbent, std::log(tps));
      }
    }
    // The process is cubic in its points: past kMaxPoints it keeps the
    // fastest measured ones (where the search is looking anyway).
    if (seen.size() > kMaxPoints) {
      std::vector<size_t> order(seen.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::partial_sort(order.begin(), order.begin() + kMaxPoints, order.end(),
                        [&](size_t a, size_t b) {
                          return candidates_[seen[a]].result->metrics.tokens_per_second >
                                 candidates_[seen[b]].result->metrics.tokens_per_second;
                        });
      std::vector<int> kept_seen;
      std::vector<double> kept_residual;
      for (size_t k = 0; k < kMaxPoints; ++k) {
        kept_seen.push_back(seen[order[k]]);
        kept_residual.push_back(residual[order[k]]);
      }
      seen.swap(kept_seen);
      residual.swap(kept_residual);
    }
    ResidualProcess gp;
    gp.Fit(Rows(seen), Eigen::Map<const Eigen::VectorXd>(residual.data(), residual.size()));
    // Trials in flight count as measured at the value the process expects
    // of them ("kriging believer"), so the next proposal looks elsewhere.
    std::vector<int> running;
    for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
      if (candidates_[i].state == State::kRunning) running.push_back(i);
    }
    if (!running.empty()) {
      Eigen::VectorXd mean, var;
      gp.Predict(Rows(running), &mean, &var);
      for (size_t k = 0; k < running.size(); ++k) {
        seen.push_back(running[k]);
        residual.push_back(mean[k]);
      }
      gp.Fit(Rows(seen), Eigen::Map<const Eigen::VectorXd>(residual.data(), residual.size()));
    }
    Eigen::VectorXd mean, var;
    gp.Predict(Rows(open), &mean, &var);
    int best = open.front();
    double best_score = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < open.size(); ++k) {
      const double mu = Prior(open[k]) + mean[k];
      const double sigma = std::sqrt(var[k]);
      double score;
      if (!std::isfinite(incumbent)) {
        score = mu + sigma;  // nothing measured yet: optimistic value
      } else {
        const double z = (mu - incumbent) / sigma;
        score = (mu - incumbent) * NormalCdf(z) + sigma * NormalPdf(z);
      }
      if (score > best_score) {  // ties: the better predicted (open is in that order)
        best_score = score;
        best = open[k];
      }
    }
    return Proposal{candidates_[best].strategy, 0, std::nullopt};
  }

  Eigen::MatrixXd Rows(const std::vector<int>& indices) const {
    Eigen::MatrixXd out(static_cast<int>(indices.size()), points_.cols());
    for (size_t k = 0; k < indices.size(); ++k) out.row(k) = points_.row(indices[k]);
    return out;
  }

  static constexpr size_t kMaxPoints = 200;
  Eigen::MatrixXd points_;  // candidate encodings, by candidate index
};

}  // namespace

std::unique_ptr<Searcher> NewBayesSearcher(SearchSetup setup) {
  return std::make_unique<BayesSearcher>(std::move(setup));
}

}  // namespace autoaccel::search_internal
