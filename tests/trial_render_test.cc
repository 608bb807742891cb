// The CLI's trial table and trial JSON show the cost model's prediction
// beside each measurement (client/render.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/render.h"

namespace autoaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Trial Measured() {
  v1::Trial t;
  t.set_trial_id("job-t0003");
  t.set_index(3);
  t.set_status("SUCCEEDED");
  t.mutable_strategy()->set_text("mbs=4,ga=2,precision=bf16");
  t.mutable_metrics()->set_tokens_per_second(5000);
  t.mutable_metrics()->set_step_time_median_s(0.2048);
  t.mutable_metrics()->set_peak_memory_bytes(int64_t{300} << 20);
  t.mutable_predicted()->set_step_time_s(0.25);
  t.mutable_predicted()->set_peak_memory_bytes(int64_t{280} << 20);
  t.mutable_predicted()->set_tokens_per_second(4096);
  return t;
}

// The row's whitespace-separated cells.
std::vector<std::string> Cells(const std::string& row) {
  return absl::StrSplit(row, ' ', absl::SkipEmpty());
}

TEST(TrialTable, EachMeasurementHasThePredictionBesideIt) {
  const std::vector<std::string> header = Cells(TrialTableHeader());
  // "step ms" and "pred ms" are two words each: the columns by position.
  EXPECT_THAT(header, ElementsAre("#", "status", "tokens/s", "step", "ms", "pred", "ms", "comm",
                                  "ms", "peak", "MiB", "pred", "MiB", "MFU", "loss", "strategy"));
  EXPECT_THAT(Cells(TrialRow(Measured())),
              ElementsAre("3", "SUCCEEDED", "5000", "204.8", "250.0", "0.0", "300.0", "280.0", "-",
                          "0.000", "mbs=4,ga=2,precision=bf16"));
}

TEST(TrialTable, ATrialThatRanOutOfMemoryShowsWhatTheModelExpectedItToNeed) {
  v1::Trial t = Measured();
  t.set_status("OOM");
  t.clear_metrics();
  t.set_reason("out of memory");
  EXPECT_THAT(Cells(TrialRow(t)),
              ElementsAre("3", "OOM", "-", "-", "250.0", "-", "-", "280.0", "-", "-",
                          "mbs=4,ga=2,precision=bf16", "(out", "of", "memory)"));
}

TEST(TrialTable, NoPredictionIsADashNotAZero) {
  v1::Trial t = Measured();
  t.clear_predicted();
  std::vector<std::string> cells = Cells(TrialRow(t));
  ASSERT_GE(cells.size(), 8u);
  EXPECT_EQ(cells[4], "-");
  EXPECT_EQ(cells[7], "-");
  // A torchscript model's memory is unknown: time predicted, memory not.
  t = Measured();
  t.mutable_predicted()->set_peak_memory_bytes(0);
  cells = Cells(TrialRow(t));
  EXPECT_EQ(cells[4], "250.0");
  EXPECT_EQ(cells[7], "-");
}

TEST(TrialJson, CarriesThePredictionOrNull) {
  const nlohmann::json j = TrialJson(Measured());
  EXPECT_EQ(j["predicted"]["step_time_s"], 0.25);
  EXPECT_EQ(j["predicted"]["peak_memory_bytes"], int64_t{280} << 20);
  EXPECT_EQ(j["predicted"]["tokens_per_second"], 4096);
  EXPECT_EQ(j["metrics"]["step_time_median_s"], 0.2048);
  v1::Trial none = Measured();
  none.clear_predicted();
  EXPECT_TRUE(TrialJson(none)["predicted"].is_null());
  v1::Trial script = Measured();
  script.mutable_predicted()->set_peak_memory_bytes(0);
  EXPECT_TRUE(TrialJson(script)["predicted"]["peak_memory_bytes"].is_null());
  // Whole documents carry it per trial too.
  v1::Job job;
  std::vector<v1::Trial> trials = {Measured()};
  EXPECT_EQ(JobJson(job, &trials)["trials"][0]["predicted"]["step_time_s"], 0.25);
}

}  // namespace
}  // namespace autoaccel
