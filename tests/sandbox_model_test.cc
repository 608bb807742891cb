// What the probe did with a TorchScript model, against the trial sandbox: a
// module whose forward reads a file outside its trial directory with
// torch.from_file, and one that maps a file outside read-write and fills it,
// run by the real trial runner (autoaccel-trial) as the worker runs a rank:
// the model file stored by digest in the work dir (StoreModelFile) and
// RunTrialProcess with the worker's sandbox. Each model runs sandboxed
// (the trial fails, the file is neither read nor written) and with
// --no-sandbox (it is read or written), so the test fails without the
// sandbox. The files outside are those make_models.py named at script time,
// OUT_DIR/outside/{secret,victim}.bin; the test writes their contents.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/content_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/strategy.h"
#include "tests/subprocess.h"
#include "worker/model_file_cache.h"
#include "worker/sandbox.h"
#include "worker/trial_process.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kOutsideBytes = 64;  // make_models.py OUTSIDE_BYTES

class SandboxedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* models = std::getenv("AUTOACCEL_SCRIPTED_MODELS");
    ASSERT_NE(models, nullptr) << "the scripted_models fixture sets AUTOACCEL_SCRIPTED_MODELS";
    models_ = models;
    dir_ = testing::MakeTempDir("autoaccel-sandbox-model-");
    ::chmod(dir_.c_str(), 0755);
    SandboxOptions options;
    options.work_dir = dir_;
    absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(options);
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = std::move(*sandbox);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `model` (a make_models.py file) as rank 0 of a one-step trial.
  TrialResult RunModel(const std::string& model, bool sandboxed, int attempt) {
    const std::string bytes = testing::ReadFile(absl::StrCat(models_, "/", model, ".pt"));
    TrialSpec spec;
    spec.trial_id = "t1";
    spec.attempt = attempt;
    spec.model.family = "torchscript";
    spec.model.input_spec = "input_ids:int64[B,T]<64; labels=input_ids";
    spec.model.script_digest = ContentDigest(bytes);
    spec.model.script_bytes = static_cast<int64_t>(bytes.size());
    spec.model.n_positions = ModelSpec::kTorchScriptMaxSeqLen;
    spec.seq_len = 8;
    spec.global_batch_size = 2;
    spec.strategy.micro_batch_size = 2;
    spec.warmup_steps = 1;
    spec.measured_steps = 1;
    absl::StatusOr<std::string> path =
        StoreModelFile(dir_, spec.model.script_digest, bytes, "t1-a1-r0");
    EXPECT_TRUE(path.ok()) << path.status();
    spec.model_file = path.ok() ? *path : "";
    TrialProcessOptions options;
    options.runner_path = AUTOACCEL_TRIAL_BIN;
    options.work_dir = dir_;
    options.timeout = absl::Seconds(90);
    options.sandbox = sandboxed ? sandbox_.get() : nullptr;
    return RunTrialProcess(spec, options);
  }

  std::string models_, dir_;
  std::unique_ptr<Sandbox> sandbox_;
};

TEST_F(SandboxedModelTest, AModelCannotReadAFileOutsideItsTrialDirectory) {
  const std::string secret = models_ + "/outside/secret.bin";
  std::string content;
  int sum = 0;
  for (int i = 0; i < kOutsideBytes; ++i) {
    content.push_back(static_cast<char>(i * 7 % 100));
    sum += i * 7 % 100;
  }
  testing::WriteFile(secret, content);

  TrialResult sandboxed = RunModel("reads_outside", true, 1);
  EXPECT_EQ(sandboxed.status, TrialStatus::kFailed) << sandboxed.error;
  EXPECT_THAT(sandboxed.error, HasSubstr(secret)) << "from_file's own error names the file";
  EXPECT_FALSE(sandboxed.infrastructure) << "the model's doing, not the worker's";
  EXPECT_TRUE(sandboxed.step_losses.empty());

  // The same model without the sandbox reads the secret: its loss is the
  // sum of the file's bytes.
  TrialResult open = RunModel("reads_outside", false, 2);
  ASSERT_EQ(open.status, TrialStatus::kSucceeded) << open.error;
  ASSERT_FALSE(open.step_losses.empty());
  EXPECT_DOUBLE_EQ(open.step_losses.back(), sum);
}

TEST_F(SandboxedModelTest, AModelCannotWriteAFileOutsideItsTrialDirectory) {
  const std::string victim = models_ + "/outside/victim.bin";
  const std::string untouched(kOutsideBytes, 'u');
  testing::WriteFile(victim, untouched);

  TrialResult sandboxed = RunModel("writes_outside", true, 1);
  EXPECT_EQ(sandboxed.status, TrialStatus::kFailed) << sandboxed.error;
  EXPECT_THAT(sandboxed.error, HasSubstr(victim));
  EXPECT_EQ(testing::ReadFile(victim), untouched);

  TrialResult open = RunModel("writes_outside", false, 2);
  EXPECT_EQ(open.status, TrialStatus::kSucceeded) << open.error;
  EXPECT_EQ(testing::ReadFile(victim), std::string(kOutsideBytes, 'X'))
      << "without the sandbox the model wrote the host's file";
}

TEST_F(SandboxedModelTest, AnOrdinaryModelTrainsInTheSandbox) {
  TrialResult r = RunModel("tiny_lm", true, 1);
  EXPECT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_GT(r.metrics.tokens_per_second, 0);
}

}  // namespace
}  // namespace autoaccel
