// The published-runs table (bench/tables/gpu_published.csv) and the
// calibration of the cuda step-time priors against it (bench/calibration.h):
// the table parses whole, with a citation on every row and a measured step
// time that follows from its figures; a malformed row is refused naming its
// line and column; the split is the documented one; and the priors in
// search/step_time.cc are the fit of this table (refitting moves no scale),
// so a change to the table, the features or the priors without a refit fails;
// and the figures docs/BENCHMARKS.md reports hold: the held-out step-time
// median and p90, the rank correlation within groups, the peak-memory error
// and which published runs are predicted not to fit.
#include "bench/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace autoaccel::bench {
namespace {

using ::testing::HasSubstr;

const std::string kTable = std::string(AUTOACCEL_SOURCE_DIR) + "/bench/tables/gpu_published.csv";

std::vector<PublishedRun> Runs() {
  absl::StatusOr<std::vector<PublishedRun>> runs = LoadPublishedRuns(kTable);
  EXPECT_TRUE(runs.ok()) << runs.status();
  return runs.ok() ? *runs : std::vector<PublishedRun>{};
}

// The table's header and first row, with `column` of the row set to `value`.
std::string TableWith(const std::string& column, const std::string& value) {
  std::ifstream in(kTable);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  std::vector<std::string> names, cells;
  for (std::string* line : {&header, &row}) {
    std::vector<std::string>& out = line == &header ? names : cells;
    size_t start = 0;
    while (true) {
      const size_t comma = line->find(',', start);
      out.push_back(line->substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::string edited;
  for (size_t i = 0; i < cells.size(); ++i) {
    edited += (i ? "," : "") + (names[i] == column ? value : cells[i]);
  }
  const std::string path = ::testing::TempDir() + "/calibration_" + column + ".csv";
  std::ofstream(path) << header << "\n" << edited << "\n";
  return path;
}

TEST(PublishedRuns, EveryRowParsesWithACitationAndAStepTime) {
  const std::vector<PublishedRun> runs = Runs();
  ASSERT_GE(runs.size(), 30u);
  std::set<std::string> sources;
  for (const PublishedRun& r : runs) {
    EXPECT_THAT(r.citation, HasSubstr("https://github.com/")) << r.id;
    EXPECT_THAT(r.citation, HasSubstr(" table '")) << r.id;
    EXPECT_EQ(r.strategy.world_size(), r.gpus) << r.id;
    EXPECT_GT(r.step_time_s, 0) << r.id;
    // The step time is the figure converted, nothing else.
    const double per_second =
        r.measured_kind == "tokens_per_s" ? r.measured_value : r.measured_value * r.gpus;
    EXPECT_DOUBLE_EQ(r.step_time_s * per_second, r.global_batch_tokens) << r.id;
    sources.insert(r.source);
  }
  EXPECT_GE(sources.size(), 2u);
}

TEST(PublishedRuns, TheNewColumnsCarryContextParallelismAndStatedMemory) {
  int context_parallel = 0, all_gather = 0, stated = 0, own_memory = 0, model_parallel = 0;
  for (const PublishedRun& r : Runs()) {
    context_parallel += r.strategy.context_parallel > 1;
    all_gather += r.strategy.context_parallel_comm == ContextParallelComm::kAllGather;
    stated += r.measured_peak_memory_gib > 0;
    own_memory += r.device_memory_gib > 0;
    model_parallel += r.strategy.tensor_parallel > 1 || r.strategy.pipeline_parallel > 1;
    // Sharding spans the data- and context-parallel ranks: a run of one
    // data-parallel rank and cp 8 (torchtitan's FSDP 1, CP 8) still shards.
    if (r.strategy.data_parallel == 1 && r.strategy.context_parallel > 1) {
      EXPECT_EQ(r.strategy.sharding, Sharding::kFsdp) << r.id;
    }
  }
  EXPECT_GE(context_parallel, 5);
  EXPECT_GE(all_gather, 3);
  EXPECT_GE(stated, 9);
  EXPECT_GE(own_memory, 10);
  EXPECT_GE(model_parallel, 8);
}

TEST(PublishedRuns, TheMptShapesGiveTheParameterCountsTheSourcePrints) {
  // llm-foundry's table prints NumParams per row; the GPT-2-shaped spec of
  // the row (learned positions of the run's sequence length, biases, tied
  // head) must count the same, which checks the transcribed shapes.
  const std::map<std::string, int64_t> printed = {
      {"mpt-7b", 6658859008}, {"mpt-13b", 12853954560}, {"mpt-30b", 29975214080}};
  int checked = 0;
  for (const PublishedRun& r : Runs()) {
    if (r.seq_len != 2048 || !printed.count(r.model)) continue;
    EXPECT_EQ(r.spec.ParameterCount(), printed.at(r.model)) << r.id << " " << r.model;
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(PublishedRuns, AMalformedRowIsRefusedNamingItsLineAndColumn) {
  struct Case {
    const char* column;
    const char* value;
    const char* says;
  };
  for (const Case& c :
       {Case{"gpus", "16", "dp × tp × pp × cp is 8"}, Case{"cp", "0", "integer >= 1"},
        Case{"ep", "x", "integer >= 1"}, Case{"measured_peak_memory_gib", "-3", "positive number"},
        Case{"device_memory_gib", "lots", "positive number"},
        Case{"cp_comm", "ring", "context_parallel_comm"},
        Case{"global_batch_tokens", "1000", "mbs × ga × dp × seq_len"},
        Case{"citation", "llm-foundry README", "https://"},
        Case{"device", "tpu-v5", "device catalog"}, Case{"sharding", "zero9", "sharding"},
        Case{"measured_kind", "mfu", "tokens_per_s"}}) {
    absl::StatusOr<std::vector<PublishedRun>> runs =
        LoadPublishedRuns(TableWith(c.column, c.value));
    ASSERT_FALSE(runs.ok()) << c.column;
    EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument) << c.column;
    EXPECT_THAT(std::string(runs.status().message()),
                HasSubstr("line 2, column " + std::string(c.column)));
    EXPECT_THAT(std::string(runs.status().message()), HasSubstr(c.says)) << c.column;
  }
}

TEST(PublishedRuns, TheSplitAlternatesWithinEachGroup) {
  const std::vector<PublishedRun> runs = Runs();
  const Split split = SplitRuns(runs);
  EXPECT_EQ(split.train.size() + split.held_out.size(), runs.size());
  std::map<std::string, std::vector<bool>> by_group;  // held out, in table order
  std::vector<bool> held(runs.size(), false);
  for (int i : split.held_out) held[i] = true;
  for (size_t i = 0; i < runs.size(); ++i) by_group[runs[i].group].push_back(held[i]);
  int groups_of_three = 0;
  for (const auto& [name, flags] : by_group) {
    for (size_t p = 0; p < flags.size(); ++p) EXPECT_EQ(flags[p], p % 2 == 1) << name << " " << p;
    if (flags.size() >= 3) ++groups_of_three;
  }
  EXPECT_GE(groups_of_three, 5);
}

TEST(ErrorSummary, QuantilesInterpolateBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(Quantile({5, 1, 3, 2, 4}, 0.5), 3);
  EXPECT_DOUBLE_EQ(Quantile({5, 1, 3, 2, 4}, 0.9), 4.6);
  EXPECT_DOUBLE_EQ(Quantile({1, 2}, 0.5), 1.5);
  EXPECT_EQ(Quantile({}, 0.5), 0);
  const std::vector<PublishedRun> runs = Runs();
  const Split split = SplitRuns(runs);
  const ErrorSummary e = StepTimeErrors(runs, split.held_out, kUnitScales);
  EXPECT_EQ(e.rows, static_cast<int>(split.held_out.size()));
  EXPECT_DOUBLE_EQ(e.median, MedianRelativeError(runs, split.held_out, kUnitScales));
  EXPECT_GE(e.p90, e.median);
}

TEST(Spearman, RanksWithTiesAndOrder) {
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_NEAR(Spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9487, 1e-4);
  EXPECT_EQ(Spearman({1, 1, 1}, {1, 2, 3}), 0.0);
}

TEST(Calibration, TheCudaPriorsAreTheFitOfThePublishedTable) {
  // Refitting from the priors in search/step_time.cc moves no scale by more
  // than 3%: they are this table's fit (rounded). Update both together:
  // build/bin/calibrate_priors prints the fit.
  const std::vector<PublishedRun> runs = Runs();
  const Split split = SplitRuns(runs);
  const PriorScales fitted = FitScales(runs, split.train);
  for (int g = 0; g < kNumPriorScales; ++g) {
    EXPECT_NEAR(fitted[g], 1.0, 0.03) << PriorScaleName(g);
  }
  // And the fit is deterministic.
  EXPECT_EQ(FitScales(runs, split.train), fitted);
}

TEST(Calibration, ThePriorsPredictTheHeldOutRunsWithin9PercentMedianAnd20PercentP90) {
  // What the shipped priors reach on the held-out rows (docs/BENCHMARKS.md,
  // "GPU priors": 8.8% and 19.3%; before the fused-attention, activation-
  // element, per-generation and model-parallel terms: 21.9% and 52.0%).
  const std::vector<PublishedRun> runs = Runs();
  const ErrorSummary e = StepTimeErrors(runs, SplitRuns(runs).held_out, kUnitScales);
  EXPECT_GE(e.rows, 40);
  EXPECT_LE(e.median, 0.09);
  EXPECT_LE(e.p90, 0.20);
}

TEST(Calibration, EveryGroupWithARealSpreadRanksThroughputAbove0_8) {
  // But torchtitan's Llama 2 13B on 64 A100s: its two recomputing rows
  // measure 1914 and 1904 tokens/s/GPU, 0.5% apart, which no model orders
  // but by chance (docs/BENCHMARKS.md).
  const std::vector<PublishedRun> runs = Runs();
  int ranked = 0;
  for (const GroupRanking& g : RankGroups(runs, SplitRuns(runs), kUnitScales)) {
    if (!g.ranks) continue;
    ++ranked;
    if (g.group == "torchtitan llama2-13b a100-80gb x64") continue;
    EXPECT_GE(g.throughput_spearman, 0.8) << g.group;
  }
  EXPECT_GE(ranked, 13);
}

TEST(Calibration, PeakMemoryAndFitOfThePublishedRuns) {
  // Over the rows that state a measured peak: the median error the memory
  // model reaches (docs/BENCHMARKS.md: 50.8%, was 54.0%); and the only runs
  // predicted not to fit are the four the docs explain (torchtitan's op-
  // level selective checkpointing mapped to `selective`, and Megatron-
  // Bridge's Llama 3 70B at TP 4 × PP 8) — a fifth fails this.
  const std::vector<PublishedRun> runs = Runs();
  std::vector<double> errors;
  std::set<int> not_fit;
  for (const PublishedRun& r : runs) {
    const MemoryVerdict v = PredictMemory(r);
    if (r.measured_peak_memory_gib > 0) {
      const double measured = r.measured_peak_memory_gib * 1024 * 1024 * 1024;
      errors.push_back(std::abs(v.predicted_bytes - measured) / measured);
    }
    if (!v.fits) not_fit.insert(r.id);
    if (!v.kept_by_tuner) EXPECT_FALSE(v.fits) << r.id;  // the margin only widens
  }
  EXPECT_GE(errors.size(), 15u);
  EXPECT_LE(Quantile(errors, 0.5), 0.51);
  EXPECT_EQ(not_fit, (std::set<int>{62, 67, 68, 83}));
  EXPECT_DOUBLE_EQ(TunerMemoryMargin(), 0.1);
}

}  // namespace
}  // namespace autoaccel::bench
