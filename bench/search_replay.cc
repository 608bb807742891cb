// Replays recorded trial tables (bench/tables/*.json) through every search
// algorithm and prints, per table: the cost model's accuracy, and per
// algorithm the trials and simulated time until its answer came within 3% of
// the true best, and the fraction of the true best it returned under budgets
// of 10%, 25% and 50% of the exhaustive trial count.
//
//   build/bin/search_replay [TABLE.json ...]   (default: bench/tables/*.json)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/replay.h"

namespace {

using autoaccel::SearchAlgorithm;
using autoaccel::SearchAlgorithmName;
namespace bench = autoaccel::bench;

std::vector<std::string> DefaultTables() {
  std::vector<std::string> out;
  for (const char* dir : {"bench/tables", AUTOACCEL_SOURCE_DIR "/bench/tables"}) {
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".json") out.push_back(e.path().string());
    }
    break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths(argv + 1, argv + argc);
  if (paths.empty()) paths = DefaultTables();
  if (paths.empty()) {
    std::fprintf(stderr, "search_replay: no tables given and none in bench/tables\n");
    return 2;
  }
  const SearchAlgorithm algorithms[] = {SearchAlgorithm::kExhaustive, SearchAlgorithm::kGreedy,
                                        SearchAlgorithm::kBayes, SearchAlgorithm::kHalving,
                                        SearchAlgorithm::kAuto};
  bool goal_met = true;
  std::vector<bench::RecordedTable> tables;
  for (const std::string& path : paths) {
    absl::StatusOr<bench::RecordedTable> table = bench::LoadTable(path);
    if (!table.ok()) {
      std::fprintf(stderr, "search_replay: %s\n", std::string(table.status().message()).c_str());
      return 1;
    }
    tables.push_back(*std::move(table));
  }
  for (const bench::RecordedTable& t : tables) {
    const bench::RecordedTable* table = &t;
    const int n = static_cast<int>(table->trials.size());
    int succeeded = 0, oom = 0;
    double seconds = 0;
    for (const bench::RecordedTrial& t : table->trials) {
      succeeded += t.status == autoaccel::TrialStatus::kSucceeded;
      oom += t.status == autoaccel::TrialStatus::kOom;
      seconds += t.duration_s;
    }
    std::printf(
        "\n== %s: %d strategies (%d succeeded, %d OOM), %s, world %d; true best %.0f tok/s; "
        "exhaustive %.0f s\n",
        table->name.c_str(), n, succeeded, oom, table->model.family.c_str(), table->world_size,
        bench::TrueBest(*table), seconds);
    const bench::ModelAccuracy acc = bench::MeasureAccuracy(*table);
    std::printf(
        "cost model on %d held-out trials (calibrated on %d): peak memory median error "
        "%.1f%% prior, %.1f%% calibrated; throughput Spearman %.2f prior, %.2f calibrated\n",
        acc.trials, acc.calibration_trials, 100 * acc.memory_error_prior,
        100 * acc.memory_error_calibrated, acc.spearman_prior, acc.spearman_calibrated);
    std::printf("%-11s %8s %9s %8s %8s %8s   %s\n", "algorithm", "to 3%", "time", "10%", "25%",
                "50%", "full run (auto's choice)");
    for (SearchAlgorithm a : algorithms) {
      bench::ReplayOptions full;
      full.algorithm = a;
      const bench::ReplayResult run = bench::Replay(*table, full);
      double fraction[3];
      const double budgets[3] = {0.10, 0.25, 0.50};
      for (int b = 0; b < 3; ++b) {
        bench::ReplayOptions o = full;
        o.max_trials = std::max(1, static_cast<int>(std::ceil(budgets[b] * n)));
        fraction[b] = bench::Replay(*table, o).fraction_of_best;
      }
      if (a == SearchAlgorithm::kAuto && fraction[1] < 0.97) goal_met = false;
      const std::string to3 = run.trials_to_3pct < 0 ? "never" : std::to_string(run.trials_to_3pct);
      std::printf("%-11s %8s %8.0fs %7.1f%% %7.1f%% %7.1f%%   %d trials, %d pruned, %.0f s%s%s\n",
                  std::string(SearchAlgorithmName(a)).c_str(), to3.c_str(),
                  run.seconds_to_3pct < 0 ? 0 : run.seconds_to_3pct, 100 * fraction[0],
                  100 * fraction[1], 100 * fraction[2], run.trials, run.pruned, run.seconds,
                  a == SearchAlgorithm::kAuto ? ", " : "",
                  a == SearchAlgorithm::kAuto ? run.description.c_str() : "");
    }
  }
  // Warm start (CostModel::WarmStart): each table's first 10 predictions,
  // cold against warmed on the other tables of its device type.
  std::vector<const bench::RecordedTable*> all;
  for (const bench::RecordedTable& t : tables) all.push_back(&t);
  constexpr int kFirst = 10;
  std::printf(
      "\nwarm start: a job's first %d predictions (the proposals of a cold auto replay, each "
      "predicted before its trial, calibrated on the ones before), cold (priors) vs warm "
      "(first calibrated on the other tables' trials of the device type): median relative error "
      "of peak memory and tokens/s, Spearman of tokens/s; and both before any trial over the "
      "whole table\n",
      kFirst);
  std::printf("%-13s %7s %6s | %8s %8s %8s %8s %8s %8s | %8s %8s %6s %6s\n", "table", "earlier",
              "judged", "mem cold", "mem warm", "tok cold", "tok warm", "rho cold", "rho warm",
              "all mem c", "mem w", "rho c", "rho w");
  for (const bench::RecordedTable& t : tables) {
    const bench::WarmStartEffect w = bench::MeasureWarmStart(t, all, kFirst);
    std::printf(
        "%-13s %7d %3d/%-2d | %7.1f%% %7.1f%% %7.1f%% %7.1f%% %8.2f %8.2f | %8.1f%% %7.1f%% %6.2f "
        "%6.2f\n",
        t.name.c_str(), w.earlier_trials, w.judged, w.proposals, 100 * w.memory_error_cold,
        100 * w.memory_error_warm, 100 * w.throughput_error_cold, 100 * w.throughput_error_warm,
        w.spearman_cold, w.spearman_warm, 100 * w.table_memory_error_cold,
        100 * w.table_memory_error_warm, w.table_spearman_cold, w.table_spearman_warm);
  }
  std::printf(
      "\ngoal (auto >= 97%% of the true best within 25%% of the exhaustive trials on "
      "every table): %s\n",
      goal_met ? "met" : "NOT met");
  return 0;
}
