// Replaying recorded trial tables: the search algorithms run against results
// measured earlier (bench/tables/*.json, written by bench/record_table)
// instead of live devices, on a simulated clock. Used by bench/search_replay
// and by the regression test tests/search_replay_test.
#ifndef AUTOACCEL_BENCH_REPLAY_H_
#define AUTOACCEL_BENCH_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/cost_model.h"
#include "search/searcher.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"
#include "spec/trial.h"

namespace autoaccel::bench {

struct RecordedTrial {
  Strategy strategy;
  TrialStatus status = TrialStatus::kSucceeded;
  TrialMetrics metrics;
  double duration_s = 0;  // wall time of the trial, process start to answer
};

struct RecordedTable {
  std::string name;
  ModelSpec model;
  int seq_len = 0;
  int global_batch_size = 0;
  int world_size = 1;
  int warmup_steps = 0;
  int measured_steps = 0;
  DeviceSpec device;
  std::vector<RecordedTrial> trials;  // one per strategy, in the space's order
};

// Reads a table written by bench/record_table. INVALID_ARGUMENT naming the
// file and the field for anything missing or malformed.
absl::StatusOr<RecordedTable> LoadTable(const std::string& path);

// The highest measured throughput of the table (SUCCEEDED trials).
double TrueBest(const RecordedTable& table);

struct ReplayOptions {
  SearchAlgorithm algorithm = SearchAlgorithm::kAuto;
  int max_trials = 0;  // 0 = no budget
  int parallel = 1;    // trials in flight at once
};

// One proposal of a replay: what the job's cost model predicted when it
// proposed the strategy, and what the table measured for it.
struct ReplayedProposal {
  TrialPrediction predicted;
  const RecordedTrial* measured = nullptr;  // into the replayed table
};

struct ReplayResult {
  std::string description;  // the searcher's Describe()
  int trials = 0;           // trials run (halving may run a strategy twice)
  int pruned = 0;
  double seconds = 0;  // simulated wall time to the end of the search
  // The table's throughput of the strategy the search returned (0 if none),
  // as a fraction of TrueBest().
  double fraction_of_best = 0;
  // Trials finished and simulated seconds when the answer first came within
  // 3% of the true best; -1 when it never did.
  int trials_to_3pct = -1;
  double seconds_to_3pct = -1;
  // Every proposal, in order (those with a prediction).
  std::vector<ReplayedProposal> proposals;
};

// Runs `options.algorithm` over the table's strategies with the table's
// model and device, answering each proposal from the table. A proposal
// measured with fewer steps than the table's (successive halving) takes
// proportionally less of the trial's step time, and its throughput is moved
// by a deterministic error of up to half the recorded step-time spread,
// shrinking with the square root of the steps.
ReplayResult Replay(const RecordedTable& table, const ReplayOptions& options);

struct ModelAccuracy {
  int trials = 0;  // SUCCEEDED trials compared
  // Median of |predicted - measured| / measured peak memory.
  double memory_error_prior = 0;
  double memory_error_calibrated = 0;
  // Spearman rank correlation of predicted and measured throughput.
  double spearman_prior = 0;
  double spearman_calibrated = 0;
  int calibration_trials = 0;
};

// The cost model before any calibration, and calibrated on every
// `stride`-th SUCCEEDED trial, judged on the others (out of sample).
ModelAccuracy MeasureAccuracy(const RecordedTable& table, int stride = 4);

// The table's SUCCEEDED trials as earlier trials of another job
// (CostModel::WarmStart), in the table's order.
std::vector<EarlierTrial> EarlierTrialsOf(const RecordedTable& table);

// What a warm start does to a job's first predictions. The sequence: the
// first `count` proposals of the target table replayed cold (auto, one
// trial at a time). Each is predicted twice before its trial is measured,
// by the cold model (the priors) and by the warm one (WarmStart on the
// SUCCEEDED trials of `others` of the target's device type, the target
// itself left out: at most kMaxEarlierTrials, taken from each table in
// turn), both calibrated on the sequence's trials before it; the same
// strategies and the same calibration, so the difference is the warm start
// alone. Also both models before any trial, over the whole table.
struct WarmStartEffect {
  int earlier_trials = 0;  // what the warm model started from
  int proposals = 0;
  int judged = 0;  // SUCCEEDED trials among the proposals
  // Median of |predicted - measured| / measured peak memory.
  double memory_error_cold = 0;
  double memory_error_warm = 0;
  // Spearman of predicted and measured tokens/s.
  double spearman_cold = 0;
  double spearman_warm = 0;
  // Median of |predicted - measured| / measured tokens/s.
  double throughput_error_cold = 0;
  double throughput_error_warm = 0;
  // Before any trial, every SUCCEEDED strategy of the table.
  int table_trials = 0;
  double table_memory_error_cold = 0;
  double table_memory_error_warm = 0;
  double table_spearman_cold = 0;
  double table_spearman_warm = 0;
};
// The earlier trials a warm start of `target` gets from `others` (above).
std::vector<EarlierTrial> WarmStartTrials(const RecordedTable& target,
                                          const std::vector<const RecordedTable*>& others);
WarmStartEffect MeasureWarmStart(const RecordedTable& target,
                                 const std::vector<const RecordedTable*>& others, int count);

// Spearman's rank correlation (average ranks for ties); 0 for < 2 points.
double Spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace autoaccel::bench

#endif  // AUTOACCEL_BENCH_REPLAY_H_
