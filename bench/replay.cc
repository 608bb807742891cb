#include "bench/replay.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <queue>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"
#include "spec/config_override.h"
#include "spec/step_statistics.h"

namespace autoaccel::bench {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// A number that protobuf's JSON may have written as a string (int64).
double Number(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return std::strtod(j.get<std::string>().c_str(), nullptr);
  return 0;
}

// The first device object ({"type": ...}) anywhere under `j`.
const json* FindDevice(const json& j) {
  if (j.is_object()) {
    if (j.contains("type") && j.contains("memory_bytes")) return &j;
    for (const auto& [key, value] : j.items()) {
      if (const json* d = FindDevice(value)) return d;
    }
  } else if (j.is_array()) {
    for (const json& value : j) {
      if (const json* d = FindDevice(value)) return d;
    }
  }
  return nullptr;
}

// Deterministic noise in [-1, 1] from a strategy's text.
double Jitter(const std::string& text) {
  const uint64_t h = Fnv1a64(text);
  return static_cast<double>(h % 20001) / 10000.0 - 1.0;
}

}  // namespace

absl::StatusOr<RecordedTable> LoadTable(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  const json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Bad(path, "not a JSON object");
  RecordedTable table;
  table.name = root.value("name", path);
  if (!root.contains("job") || !root["job"].contains("request"))
    return Bad(path, "job.request: missing");
  const json& request = root["job"]["request"];
  const json model = request.value("model", json::object());
  const std::string family = model.value("family", "");
  json config = model.value("config_json", json::object());
  if (config.is_string()) config = json::parse(config.get<std::string>(), nullptr, false);
  if (!config.is_object()) return Bad(path, "job.request.model.config_json: not a JSON object");
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const json& o : model.value("overrides", json::array())) {
    absl::StatusOr<std::pair<std::string, std::string>> kv = ParseOverride(o.get<std::string>());
    if (!kv.ok()) return Bad(path, std::string(kv.status().message()));
    overrides.push_back(*kv);
  }
  if (absl::Status s = ApplyOverrides(overrides, &config); !s.ok()) {
    return Bad(path, std::string(s.message()));
  }
  absl::StatusOr<ModelSpec> spec = ModelSpecFromJson(family, config);
  if (!spec.ok()) return Bad(path, std::string(spec.status().message()));
  table.model = *spec;
  table.seq_len = static_cast<int>(Number(request.value("seq_len", json(0))));
  table.global_batch_size = static_cast<int>(Number(request.value("global_batch_size", json(0))));
  table.world_size = std::max(1, static_cast<int>(Number(request.value("world_size", json(1)))));
  table.warmup_steps = static_cast<int>(Number(request.value("warmup_steps", json(0))));
  table.measured_steps = static_cast<int>(Number(request.value("measured_steps", json(0))));
  if (table.seq_len <= 0 || table.global_batch_size <= 0 || table.measured_steps <= 0) {
    return Bad(path, "job.request: seq_len, global_batch_size and measured_steps must be positive");
  }
  const json workers = root.value("workers", json::array());
  const json* device = FindDevice(workers);
  if (device == nullptr) return Bad(path, "workers: no device");
  table.device.type = device->value("type", "cpu");
  table.device.memory_bytes = static_cast<int64_t>(Number((*device)["memory_bytes"]));
  if (device->contains("peak_tflops")) {
    absl::StatusOr<PeakTflops> peak = PeakTflopsFromJson((*device)["peak_tflops"]);
    if (peak.ok()) table.device.peak = *peak;
  }
  const json trials = root.value("trials", json::array());
  for (size_t i = 0; i < trials.size(); ++i) {
    const json& t = trials[i];
    const std::string where = absl::StrCat("trials[", i, "]");
    RecordedTrial r;
    absl::StatusOr<Strategy> s = ParseStrategyText(t.value("strategy", ""));
    if (!s.ok()) return Bad(path, absl::StrCat(where, ".strategy: ", s.status().message()));
    r.strategy = *s;
    absl::StatusOr<TrialStatus> status = ParseTrialStatus(t.value("status", ""));
    if (!status.ok()) return Bad(path, absl::StrCat(where, ".status: ", status.status().message()));
    r.status = *status;
    absl::StatusOr<TrialMetrics> m = TrialMetricsFromJson(t.value("metrics", json::object()));
    if (!m.ok()) return Bad(path, absl::StrCat(where, ".metrics: ", m.status().message()));
    r.metrics = *m;
    r.duration_s = Number(t.value("duration_s", json(0)));
    table.trials.push_back(std::move(r));
  }
  if (table.trials.empty()) return Bad(path, "trials: none");
  return table;
}

double TrueBest(const RecordedTable& table) {
  double best = 0;
  for (const RecordedTrial& t : table.trials) {
    if (t.status == TrialStatus::kSucceeded) best = std::max(best, t.metrics.tokens_per_second);
  }
  return best;
}

ReplayResult Replay(const RecordedTable& table, const ReplayOptions& options) {
  std::map<std::string, const RecordedTrial*> by_text;
  SearchSetup setup;
  setup.algorithm = options.algorithm;
  for (const RecordedTrial& t : table.trials) {
    by_text[StrategyToText(t.strategy)] = &t;
    setup.candidates.push_back(t.strategy);
  }
  setup.cost_model.emplace(table.model, table.seq_len, table.global_batch_size, table.device);
  FakeClock clock;
  const absl::Time start = clock.Now();
  setup.clock = &clock;
  setup.budget.max_trials = options.max_trials;
  setup.parallel_trials = options.parallel;
  setup.warmup_steps = table.warmup_steps;
  setup.measured_steps = table.measured_steps;
  ReplayResult result;
  absl::StatusOr<std::unique_ptr<Searcher>> created = CreateSearcher(std::move(setup));
  if (!created.ok()) {
    result.description = std::string(created.status().message());
    return result;
  }
  Searcher& searcher = **created;
  result.description = searcher.Describe();
  const double true_best = TrueBest(table);

  struct Running {
    absl::Time done;
    int order;
    ScoredTrial trial;
    bool operator>(const Running& o) const {
      return done != o.done ? done > o.done : order > o.order;
    }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running;
  int started = 0, finished = 0;
  while (true) {
    while (static_cast<int>(running.size()) < options.parallel) {
      std::optional<Proposal> p = searcher.Next();
      if (!p) break;
      const RecordedTrial& rec = *by_text.at(StrategyToText(p->strategy));
      if (p->predicted) result.proposals.push_back({*p->predicted, &rec});
      ScoredTrial trial;
      trial.strategy = rec.strategy;
      trial.status = rec.status;
      trial.metrics = rec.metrics;
      double seconds = rec.duration_s;
      const int steps = p->measured_steps > 0 ? p->measured_steps : table.measured_steps;
      if (steps < table.measured_steps && rec.status == TrialStatus::kSucceeded) {
        const double step = rec.metrics.step_time_median_s;
        seconds = std::max(0.0, seconds - (table.measured_steps - steps) * step);
        const double spread =
            step > 0 ? (rec.metrics.step_time_max_s - rec.metrics.step_time_min_s) / step : 0;
        const double error = 0.5 * spread / std::sqrt(static_cast<double>(steps)) *
                             Jitter(absl::StrCat(StrategyToText(rec.strategy), "/", steps));
        trial.metrics.tokens_per_second *= 1 + error;
        trial.metrics.measured_steps = steps;
      }
      running.push(Running{clock.Now() + absl::Seconds(seconds), started++, trial});
    }
    result.pruned += static_cast<int>(searcher.TakePruned().size());
    if (running.empty()) break;
    Running next = running.top();
    running.pop();
    clock.SetTime(next.done);
    searcher.Report(next.trial);
    ++finished;
    result.pruned += static_cast<int>(searcher.TakePruned().size());
    if (std::optional<ScoredTrial> best = searcher.Best(); best && result.trials_to_3pct < 0) {
      const double real = by_text.at(StrategyToText(best->strategy))->metrics.tokens_per_second;
      if (real >= 0.97 * true_best) {
        result.trials_to_3pct = finished;
        result.seconds_to_3pct = absl::ToDoubleSeconds(clock.Now() - start);
      }
    }
  }
  result.trials = started;
  result.seconds = absl::ToDoubleSeconds(clock.Now() - start);
  if (std::optional<ScoredTrial> best = searcher.Best(); best && true_best > 0) {
    result.fraction_of_best =
        by_text.at(StrategyToText(best->strategy))->metrics.tokens_per_second / true_best;
  }
  return result;
}

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n < 2 || b.size() != n) return 0;
  const auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&v](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[order[j + 1]] == v[order[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[order[k]] = (i + j) / 2.0;
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) ma += ra[i], mb += rb[i];
  ma /= n;
  mb /= n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < n; ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

std::vector<EarlierTrial> EarlierTrialsOf(const RecordedTable& table) {
  std::vector<EarlierTrial> out;
  for (const RecordedTrial& t : table.trials) {
    if (t.status != TrialStatus::kSucceeded) continue;
    out.push_back(EarlierTrial{table.model, table.seq_len, t.strategy, t.metrics});
  }
  return out;
}

namespace {

// Two models' predictions of the same SUCCEEDED trials against what they
// measured.
struct Paired {
  std::vector<double> measured_tps, tps[2], memory_error[2], tps_error[2];
  void Add(const RecordedTrial& t, const CostModel& a, const CostModel& b) {
    const double tps_measured = t.metrics.tokens_per_second;
    const double peak = static_cast<double>(t.metrics.peak_memory_bytes);
    measured_tps.push_back(tps_measured);
    for (int m = 0; m < 2; ++m) {
      const TrialPrediction p = (m == 0 ? a : b).PredictTrial(t.strategy);
      tps[m].push_back(p.tokens_per_second);
      if (tps_measured > 0) {
        tps_error[m].push_back(std::abs(p.tokens_per_second - tps_measured) / tps_measured);
      }
      if (peak > 0) memory_error[m].push_back(std::abs(double(p.peak_memory_bytes) - peak) / peak);
    }
  }
  int size() const { return static_cast<int>(measured_tps.size()); }
  double MemoryError(int m) const { return Median(memory_error[m]); }
  double ThroughputError(int m) const { return Median(tps_error[m]); }
  double Rho(int m) const { return Spearman(tps[m], measured_tps); }
};

}  // namespace

std::vector<EarlierTrial> WarmStartTrials(const RecordedTable& target,
                                          const std::vector<const RecordedTable*>& others) {
  std::vector<std::vector<EarlierTrial>> pools;
  for (const RecordedTable* o : others) {
    if (o != &target && o->device.type == target.device.type) pools.push_back(EarlierTrialsOf(*o));
  }
  std::vector<EarlierTrial> out;
  for (size_t i = 0; static_cast<int>(out.size()) < kMaxEarlierTrials; ++i) {
    bool any = false;
    for (const std::vector<EarlierTrial>& pool : pools) {
      if (i >= pool.size() || static_cast<int>(out.size()) >= kMaxEarlierTrials) continue;
      out.push_back(pool[i]);
      any = true;
    }
    if (!any) break;
  }
  return out;
}

WarmStartEffect MeasureWarmStart(const RecordedTable& target,
                                 const std::vector<const RecordedTable*>& others, int count) {
  WarmStartEffect out;
  CostModel cold(target.model, target.seq_len, target.global_batch_size, target.device);
  CostModel warm = cold;
  out.earlier_trials = warm.WarmStart(WarmStartTrials(target, others));
  // Whole table, before any trial.
  Paired table;
  for (const RecordedTrial& t : target.trials) {
    if (t.status == TrialStatus::kSucceeded) table.Add(t, cold, warm);
  }
  out.table_trials = table.size();
  out.table_memory_error_cold = table.MemoryError(0);
  out.table_memory_error_warm = table.MemoryError(1);
  out.table_spearman_cold = table.Rho(0);
  out.table_spearman_warm = table.Rho(1);
  // The first `count` proposals of a cold job, each predicted by both
  // models calibrated on the trials before it.
  ReplayOptions options;
  options.max_trials = count;
  const ReplayResult run = Replay(target, options);
  Paired first;
  for (const ReplayedProposal& p : run.proposals) {
    const RecordedTrial& t = *p.measured;
    if (t.status == TrialStatus::kSucceeded) first.Add(t, cold, warm);
    cold.Observe(t.strategy, t.metrics, t.status);
    warm.Observe(t.strategy, t.metrics, t.status);
  }
  out.proposals = static_cast<int>(run.proposals.size());
  out.judged = first.size();
  out.memory_error_cold = first.MemoryError(0);
  out.memory_error_warm = first.MemoryError(1);
  out.throughput_error_cold = first.ThroughputError(0);
  out.throughput_error_warm = first.ThroughputError(1);
  out.spearman_cold = first.Rho(0);
  out.spearman_warm = first.Rho(1);
  return out;
}

ModelAccuracy MeasureAccuracy(const RecordedTable& table, int stride) {
  ModelAccuracy out;
  const CostModel prior(table.model, table.seq_len, table.global_batch_size, table.device);
  CostModel calibrated = prior;
  std::vector<const RecordedTrial*> held_out;
  int k = 0;
  for (const RecordedTrial& t : table.trials) {
    if (t.status != TrialStatus::kSucceeded) continue;
    if (k++ % stride == 0) {
      calibrated.Observe(t.strategy, t.metrics);
      ++out.calibration_trials;
    } else {
      held_out.push_back(&t);
    }
  }
  std::vector<double> measured_tps, prior_tps, calibrated_tps, prior_error, calibrated_error;
  for (const RecordedTrial* t : held_out) {
    const CostModel::Prediction p = prior.Predict(t->strategy);
    const CostModel::Prediction c = calibrated.Predict(t->strategy);
    measured_tps.push_back(t->metrics.tokens_per_second);
    prior_tps.push_back(p.tokens_per_second);
    calibrated_tps.push_back(c.tokens_per_second);
    const double peak = static_cast<double>(t->metrics.peak_memory_bytes);
    if (peak > 0) {
      prior_error.push_back(std::abs(p.memory.total() - peak) / peak);
      calibrated_error.push_back(std::abs(c.memory.total() - peak) / peak);
    }
  }
  out.trials = static_cast<int>(held_out.size());
  out.memory_error_prior = Median(prior_error);
  out.memory_error_calibrated = Median(calibrated_error);
  out.spearman_prior = Spearman(prior_tps, measured_tps);
  out.spearman_calibrated = Spearman(calibrated_tps, measured_tps);
  return out;
}

}  // namespace autoaccel::bench
