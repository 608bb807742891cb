// Regression test over the recorded trial tables (bench/tables): the
// algorithms replayed against real measurements must keep finding nearly the
// best strategy in a quarter of the trials, and the calibrated cost model
// must keep its accuracy. Deterministic: nothing runs, the tables answer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/replay.h"

namespace autoaccel::bench {
namespace {

std::vector<std::string> Tables() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(AUTOACCEL_TABLES_DIR)) {
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  }
  return out;
}

TEST(SearchReplay, TheRepositoryKeepsRecordedTables) { EXPECT_GE(Tables().size(), 3u); }

TEST(SearchReplay, AutoReturnsNearlyTheBestWithinAQuarterOfTheTrials) {
  for (const std::string& path : Tables()) {
    absl::StatusOr<RecordedTable> table = LoadTable(path);
    ASSERT_TRUE(table.ok()) << table.status();
    ReplayOptions options;
    options.max_trials = static_cast<int>((table->trials.size() + 3) / 4);
    for (SearchAlgorithm a : {SearchAlgorithm::kAuto, SearchAlgorithm::kBayes}) {
      options.algorithm = a;
      const ReplayResult r = Replay(*table, options);
      EXPECT_LE(r.trials, options.max_trials) << path;
      EXPECT_GE(r.fraction_of_best, 0.97)
          << path << " " << SearchAlgorithmName(a) << ": " << r.description;
    }
  }
}

TEST(SearchReplay, EveryAlgorithmRunsEveryTableToTheEnd) {
  for (const std::string& path : Tables()) {
    absl::StatusOr<RecordedTable> table = LoadTable(path);
    ASSERT_TRUE(table.ok()) << table.status();
    for (SearchAlgorithm a :
         {SearchAlgorithm::kExhaustive, SearchAlgorithm::kGreedy, SearchAlgorithm::kHalving}) {
      ReplayOptions options;
      options.algorithm = a;
      const ReplayResult r = Replay(*table, options);
      EXPECT_GT(r.trials, 0) << path;
      EXPECT_GT(r.fraction_of_best, 0.9) << path << " " << SearchAlgorithmName(a);
      // Exhaustive settles every strategy: run or pruned.
      if (a == SearchAlgorithm::kExhaustive) {
        EXPECT_EQ(r.trials + r.pruned, static_cast<int>(table->trials.size())) << path;
        EXPECT_DOUBLE_EQ(r.fraction_of_best, 1.0) << path;
      }
    }
  }
}

TEST(SearchReplay, TheCalibratedCostModelPredictsMemoryAndRanksThroughput) {
  for (const std::string& path : Tables()) {
    absl::StatusOr<RecordedTable> table = LoadTable(path);
    ASSERT_TRUE(table.ok()) << table.status();
    const ModelAccuracy acc = MeasureAccuracy(*table);
    ASSERT_GT(acc.trials, 20) << path;
    EXPECT_LE(acc.memory_error_calibrated, 0.10) << path;
    EXPECT_GE(acc.spearman_calibrated, 0.8) << path;
    // Calibration is what gets it there.
    EXPECT_LT(acc.memory_error_calibrated, acc.memory_error_prior) << path;
    EXPECT_GT(acc.spearman_calibrated, acc.spearman_prior) << path;
  }
}

TEST(SearchReplay, SpearmanOfKnownOrders) {
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_NEAR(Spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9487, 1e-4);
  EXPECT_EQ(Spearman({1}, {2}), 0.0);
}

TEST(SearchReplay, MalformedTablesNameTheFileAndField) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/bad-table.json";
  {
    std::ofstream(path) << R"({"job": {"request": {"model": {"family": "gpt2",
        "config_json": {"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
        "n_positions": 32}}, "seq_len": 16, "global_batch_size": 4, "measured_steps": 2}},
        "workers": [{"type": "cpu", "memory_bytes": 1000}],
        "trials": [{"strategy": "mbs=3,ga=x", "status": "SUCCEEDED"}]})";
  }
  absl::StatusOr<RecordedTable> table = LoadTable(path);
  EXPECT_FALSE(table.ok());
  EXPECT_NE(std::string(table.status().message()).find("trials[0].strategy"), std::string::npos)
      << table.status();
  EXPECT_FALSE(LoadTable(dir + "/missing.json").ok());
}

}  // namespace
}  // namespace autoaccel::bench
