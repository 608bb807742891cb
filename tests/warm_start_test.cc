// Warm start's reading of earlier jobs: the model each measured is the one
// validated at its admission and stored with it, not its request re-read;
// jobs stored before that was kept still count through their requests.
#include "server/warm_start.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "server/tune_request.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::TuneRequest Request(int seq_len) {
  v1::TuneRequest r;
  r.mutable_model()->set_family("gpt2");
  r.mutable_model()->set_config_json(
      R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "vocab_size": 64, "n_positions": 64})");
  // An override the validated model carries: a request re-read would need
  // to apply it again.
  r.mutable_model()->add_overrides("n_layer=3");
  r.set_seq_len(seq_len);
  r.set_global_batch_size(4);
  r.set_time_limit_seconds(60);
  return r;
}

JobSpec Validated(const v1::TuneRequest& r) {
  absl::StatusOr<JobSpec> spec = ValidateTuneRequest(r, TuneDefaults());
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.value_or(JobSpec{});
}

void AddJob(Store& store, const std::string& id, int64_t created_s, const std::string& request_json,
            const std::string& model_json) {
  JobRecord job;
  job.job_id = id;
  job.created_at = absl::FromUnixSeconds(created_s);
  job.request_json = request_json;
  job.model_json = model_json;
  ASSERT_TRUE(store.CreateJob(job).ok());
  TrialRecord t;
  t.trial_id = id + "-t0000";
  t.job_id = id;
  t.strategy_text =
      "mbs=4,ga=1,precision=fp32,checkpoint=none,attention=sdpa,"
      "optimizer=adamw,offload=none";
  t.status = TrialStatus::kSucceeded;
  t.metrics.tokens_per_second = 100;
  t.metrics.step_time_median_s = 0.1;
  ASSERT_TRUE(store.UpsertTrial(t).ok());
}

TEST(WarmStartTest, EarlierJobsCountWithTheModelValidatedAtTheirAdmission) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  const JobSpec spec = Validated(Request(32));
  const std::string model_json = MeasuredModelJson(spec);
  ASSERT_FALSE(model_json.empty());
  // Stored with its model: its request is not read (here it names no model,
  // and another sequence length).
  AddJob(**store, "new", 30, R"({"seq_len": 999})", model_json);
  // Stored before models were kept: its request is read.
  AddJob(**store, "old", 20, ProtoToJson(Request(16)), "");
  // Neither (its request no longer makes a model): skipped.
  AddJob(**store, "lost", 10, R"({"seq_len": 16})", "");
  absl::StatusOr<EarlierTrials> earlier = LoadEarlierTrials(store->get(), "cpu");
  ASSERT_TRUE(earlier.ok()) << earlier.status();
  ASSERT_EQ(earlier->trials.size(), 2u);
  EXPECT_EQ(earlier->skipped, 1);
  EXPECT_EQ(earlier->trials[0].seq_len, 32);
  EXPECT_EQ(earlier->trials[0].model.n_layer, 3) << "the override as validated";
  EXPECT_EQ(earlier->trials[1].seq_len, 16);
  EXPECT_EQ(earlier->trials[1].model.n_layer, 3);
}

TEST(WarmStartTest, LauncherJobsAndTorchScriptModelsStoreNoMeasuredModel) {
  JobSpec launcher = Validated(Request(32));
  launcher.launcher = v1::Launcher();
  EXPECT_THAT(MeasuredModelJson(launcher), IsEmpty());
  JobSpec script = Validated(Request(32));
  script.model.family = "torchscript";
  EXPECT_THAT(MeasuredModelJson(script), IsEmpty());
}

}  // namespace
}  // namespace autoaccel
