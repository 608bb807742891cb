// Tests of the LibTorch trial runner: the GPT model, the strategies it applies
// (checkpointing, attention kinds, bf16 autocast, gradient accumulation), the
// counting CPU allocator, RunTrial's error fence and the autoaccel-trial
// binary. Tiny models, so the whole file runs in seconds on two cores.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <string>

#include "engine/cpu_memory.h"
#include "engine/gpt.h"
#include "engine/trainer.h"
#include "tests/engine_test_util.h"
#include "trial_contract/json_file.h"
#include "trial_contract/trial_result.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {

namespace {

ModelSpec TinyModel() { return ::autoaccel::testing::TinyModelSpec("gpt2"); }

TrialSpec TinySpec(int mbs = 4, int ga = 1) {
  return ::autoaccel::testing::TinyTrialSpec(TinyModel(), mbs, ga);
}

using ::autoaccel::testing::ExpectSameGrads;
using ::autoaccel::testing::MakeTrainer;
using ::autoaccel::testing::MaxAbsDiff;
using ::autoaccel::testing::MediumGptTrialSpec;

TEST(GptTest, ParametersMatchModelSpecAndHuggingFaceNames) {
  Gpt model(TinyModel(), 1);
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, TinyModel().ParameterCount());
  const auto named = model->named_parameters();
  for (const char* name :
       {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.attn.c_attn.weight",
        "h.1.attn.c_proj.bias", "h.1.mlp.c_fc.weight", "h.1.mlp.c_proj.weight", "ln_f.bias"}) {
    EXPECT_NE(named.find(name), nullptr) << name;
  }
  // Same seed, same weights; another seed, other weights.
  Gpt same(TinyModel(), 1), other(TinyModel(), 2);
  EXPECT_TRUE(torch::equal(model->named_parameters()["h.0.attn.c_attn.weight"],
                           same->named_parameters()["h.0.attn.c_attn.weight"]));
  EXPECT_FALSE(torch::equal(model->named_parameters()["h.0.attn.c_attn.weight"],
                            other->named_parameters()["h.0.attn.c_attn.weight"]));
  // HF init: std 0.02, LayerNorm weights 1, biases 0.
  EXPECT_NEAR(named["wte.weight"].std().item<double>(), 0.02, 0.002);
  EXPECT_TRUE(torch::equal(named["h.0.ln_1.weight"], torch::ones({32})));
  EXPECT_TRUE(torch::equal(named["h.0.mlp.c_fc.bias"], torch::zeros({128})));
}

TEST(GptTest, LogitsHaveVocabularyShapeAndInitialLossIsNearUniform) {
  Gpt model(TinyModel(), 3);
  const torch::Tensor tokens = SyntheticTokens(96, 2, 17, 5);
  EXPECT_EQ(model->Forward(tokens.narrow(1, 0, 16)).sizes(), (std::vector<int64_t>{2, 16, 96}));
  const double loss = model->Loss(tokens.narrow(1, 0, 16), tokens.narrow(1, 1, 16)).item<double>();
  EXPECT_NEAR(loss, std::log(96.0), 0.3);
}

TEST(GptTest, SyntheticTokensAreDeterministicAndFollowOnePermutation) {
  const torch::Tensor a = SyntheticTokens(50, 8, 20, 11);
  EXPECT_TRUE(torch::equal(a, SyntheticTokens(50, 8, 20, 11)));
  EXPECT_FALSE(torch::equal(a, SyntheticTokens(50, 8, 20, 12)));
  EXPECT_GE(a.min().item<int64_t>(), 0);
  EXPECT_LT(a.max().item<int64_t>(), 50);
  // A token is always followed by the same next token.
  std::vector<int64_t> next(50, -1);
  auto acc = a.accessor<int64_t, 2>();
  for (int i = 0; i < 8; ++i) {
    for (int t = 0; t + 1 < 20; ++t) {
      int64_t& n = next[acc[i][t]];
      if (n >= 0) {
        EXPECT_EQ(n, acc[i][t + 1]);
      }
      n = acc[i][t + 1];
    }
  }
}

TEST(TrainerTest, LossDecreasesOverThirtySteps) {
  auto trainer = MakeTrainer(TinySpec());
  ASSERT_NE(trainer, nullptr);
  const double first = trainer->Step();
  double last = first;
  for (int i = 1; i < 30; ++i) last = trainer->Step();
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, 0.75 * first) << "first " << first << " last " << last;
}

TEST(TrainerTest, CheckpointingLowersPeakMemory) {
  TrialSpec spec = MediumGptTrialSpec();
  const TrialResult plain = RunTrial(spec);
  spec.strategy.checkpointing = Checkpointing::kFull;
  const TrialResult ckpt = RunTrial(spec);
  ASSERT_EQ(plain.status, TrialStatus::kSucceeded) << plain.error;
  ASSERT_EQ(ckpt.status, TrialStatus::kSucceeded) << ckpt.error;
  EXPECT_LT(ckpt.metrics.peak_memory_bytes, plain.metrics.peak_memory_bytes * 0.8)
      << "checkpointed " << ckpt.metrics.peak_memory_bytes << " vs "
      << plain.metrics.peak_memory_bytes;
  EXPECT_NEAR(ckpt.metrics.final_loss, plain.metrics.final_loss, 1e-5);
}

TEST(TrainerTest, SdpaNeedsLessMemoryThanMathAttention) {
  // The fused kernel never materialises the [B, heads, T, T] score matrix.
  TrialSpec spec = MediumGptTrialSpec();
  const TrialResult math = RunTrial(spec);
  spec.strategy.attention = Attention::kSdpa;
  const TrialResult sdpa = RunTrial(spec);
  ASSERT_EQ(math.status, TrialStatus::kSucceeded) << math.error;
  ASSERT_EQ(sdpa.status, TrialStatus::kSucceeded) << sdpa.error;
  EXPECT_LT(sdpa.metrics.peak_memory_bytes, math.metrics.peak_memory_bytes)
      << "sdpa " << sdpa.metrics.peak_memory_bytes << " vs math " << math.metrics.peak_memory_bytes;
  EXPECT_NEAR(sdpa.metrics.final_loss, math.metrics.final_loss, 1e-4);
}

TEST(TrainerTest, MathAndSdpaAttentionAgree) {
  TrialSpec math = TinySpec();
  TrialSpec sdpa = math;
  sdpa.strategy.attention = Attention::kSdpa;
  auto a = MakeTrainer(math), b = MakeTrainer(sdpa);
  ASSERT_TRUE(a && b);
  EXPECT_NEAR(a->ForwardBackward(), b->ForwardBackward(), 1e-5);
  ExpectSameGrads(a->model(), b->model(), 1e-4);
}

TEST(TrainerTest, GradAccumulationMatchesOneBigMicroBatch) {
  auto a = MakeTrainer(TinySpec(/*mbs=*/2, /*ga=*/2));
  auto b = MakeTrainer(TinySpec(/*mbs=*/4, /*ga=*/1));
  ASSERT_TRUE(a && b);
  EXPECT_NEAR(a->ForwardBackward(), b->ForwardBackward(), 1e-5);
  ExpectSameGrads(a->model(), b->model(), 1e-5);
}

TEST(TrainerTest, Bf16AutocastRunsWithFiniteLossAndPositiveMetrics) {
  TrialSpec spec = TinySpec();
  spec.strategy.precision = Precision::kBf16;
  const TrialResult r = RunTrial(spec);
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_TRUE(std::isfinite(r.metrics.final_loss));
  EXPECT_EQ(r.metrics.measured_steps, 2);
  EXPECT_GT(r.metrics.step_time_median_s, 0);
  EXPECT_GT(r.metrics.tokens_per_second, 0);
  EXPECT_GT(r.metrics.samples_per_second, 0);
  EXPECT_GT(r.metrics.achieved_tflops, 0);
  EXPECT_GT(r.metrics.peak_memory_bytes, 0);
  EXPECT_GT(r.metrics.peak_rss_bytes, 0);
}

TEST(TrainerTest, Bf16ReallyComputesInBf16AndCheckpointingKeepsAutocast) {
  TrialSpec fp32 = TinySpec();
  TrialSpec bf16 = fp32;
  bf16.strategy.precision = Precision::kBf16;
  TrialSpec bf16_ckpt = bf16;
  bf16_ckpt.strategy.checkpointing = Checkpointing::kFull;
  auto a = MakeTrainer(fp32), b = MakeTrainer(bf16), c = MakeTrainer(bf16_ckpt);
  ASSERT_TRUE(a && b && c);
  const double loss_fp32 = a->ForwardBackward(), loss_bf16 = b->ForwardBackward();
  // Lower precision changes the numbers a little, not a lot.
  EXPECT_NE(loss_fp32, loss_bf16);
  EXPECT_NEAR(loss_fp32, loss_bf16, 0.05);
  // Parameters and their gradients stay fp32 (master weights).
  for (const auto& p : b->model()->parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat);
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
  }
  // The recomputation runs under the forward pass's autocast state: were it
  // fp32, the gradients would differ at bf16 resolution (~1e-2).
  EXPECT_NEAR(c->ForwardBackward(), loss_bf16, 1e-6);
  ExpectSameGrads(b->model(), c->model(), 1e-5);
  // Autocast is off again outside the step.
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

TEST(CpuMemoryTest, CountsAtenAllocationsAndEnforcesTheLimit) {
  ASSERT_TRUE(InstallCountingCpuAllocator().ok());
  const int64_t base = CpuTensorBytesInUse();
  const int64_t mib4 = 1024 * 1024 * 4;
  {
    torch::Tensor a = torch::ones({1024, 1024});  // 4 MiB
    EXPECT_GE(CpuTensorBytesInUse() - base, mib4);
    ResetCpuPeakBytes();
    torch::Tensor c = torch::matmul(a, a).relu();  // two more 4 MiB results, one freed
    EXPECT_GE(CpuTensorBytesInUse() - base, 2 * mib4);
    EXPECT_GE(CpuTensorPeakBytes() - base, 3 * mib4);
  }
  EXPECT_EQ(CpuTensorBytesInUse(), base);
  {
    ScopedCpuTensorMemoryLimit limit(base + 1024 * 1024);
    EXPECT_THROW(torch::ones({1024, 1024}), c10::OutOfMemoryError);
    torch::Tensor small = torch::ones({1024});  // fits
    EXPECT_EQ(small.sum().item<float>(), 1024.0f);
  }
  EXPECT_EQ(CpuTensorMemoryLimit(), 0);
  EXPECT_EQ(torch::ones({1024, 1024}).sum().item<float>(), 1024.0f * 1024.0f);
}

TEST(RunTrialTest, ImpossibleMemoryLimitIsOomAndTheNextTrialRuns) {
  TrialSpec spec = TinySpec();
  spec.model.vocab_size = 1024;  // ~0.5 MiB of weights, x4 with gradients and AdamW state
  spec.memory_limit_bytes = 1024 * 1024;
  ASSERT_TRUE(InstallCountingCpuAllocator().ok());
  const int64_t before = CpuTensorBytesInUse();
  const TrialResult oom = RunTrial(spec);
  EXPECT_EQ(oom.status, TrialStatus::kOom) << oom.error;
  EXPECT_NE(oom.error.find("memory limit"), std::string::npos) << oom.error;
  EXPECT_EQ(CpuTensorBytesInUse(), before);  // everything the trial held is freed
  EXPECT_EQ(CpuTensorMemoryLimit(), 0);

  spec.memory_limit_bytes = 0;
  const TrialResult ok = RunTrial(spec);
  EXPECT_EQ(ok.status, TrialStatus::kSucceeded) << ok.error;
  EXPECT_GT(ok.metrics.peak_memory_bytes, 1024 * 1024);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

TEST(RunTrialTest, MeasuredPeakIsExactlyTheMemoryTheTrialNeeds) {
  TrialSpec spec = MediumGptTrialSpec();
  spec.num_threads = 1;  // one allocation order
  const TrialResult free_run = RunTrial(spec);
  ASSERT_EQ(free_run.status, TrialStatus::kSucceeded) << free_run.error;
  const int64_t peak = free_run.metrics.peak_memory_bytes;

  spec.memory_limit_bytes = peak;
  const TrialResult at_peak = RunTrial(spec);
  EXPECT_EQ(at_peak.status, TrialStatus::kSucceeded) << at_peak.error;
  EXPECT_EQ(at_peak.metrics.peak_memory_bytes, peak);

  // Weights and optimizer state fit, the activations do not: the OOM comes
  // from inside forward or backward (through the autograd engine).
  spec.memory_limit_bytes = peak * 9 / 10;
  const TrialResult short_run = RunTrial(spec);
  EXPECT_EQ(short_run.status, TrialStatus::kOom) << short_run.error;
  EXPECT_LE(short_run.metrics.peak_memory_bytes, spec.memory_limit_bytes);
}

TEST(RunTrialTest, BadSpecsFailWithTheFieldNamed) {
  TrialSpec spec = TinySpec(2, 2);
  spec.global_batch_size = 5;
  TrialResult r = RunTrial(spec);
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_NE(r.error.find("global_batch_size"), std::string::npos) << r.error;

  spec = TinySpec();
  spec.seq_len = 64;  // n_positions is 32
  r = RunTrial(spec);
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_NE(r.error.find("n_positions"), std::string::npos) << r.error;

  spec = TinySpec();
  spec.device = "tpu:0";
  r = RunTrial(spec);
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_NE(r.error.find("device"), std::string::npos) << r.error;

  if (!torch::cuda::is_available()) {
    spec.device = "cuda:0";
    r = RunTrial(spec);
    EXPECT_EQ(r.status, TrialStatus::kFailed);
    EXPECT_NE(r.error.find("CUDA is not available"), std::string::npos) << r.error;
  }
}

// The binary, end to end, as the worker runs it.
class TrialBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "engine_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  // Runs autoaccel-trial with `args`; returns its exit code.
  int RunBinary(const std::string& args) {
    const std::string cmd =
        std::string("'") + AUTOACCEL_TRIAL_BINARY + "' " + args + " 2>'" + dir_ + "/stderr.txt'";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  TrialResult ReadResult() {
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(dir_ + "/result.json");
    EXPECT_TRUE(j.ok()) << j.status();
    if (!j.ok()) return {};
    absl::StatusOr<TrialResult> r = TrialResultFromJson(*j);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : TrialResult{};
  }

  std::string ReadStderr() {
    std::ifstream in(dir_ + "/stderr.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string Args() {
    return "--spec '" + dir_ + "/spec.json' --result '" + dir_ + "/result.json'";
  }

  std::string dir_;
};

TEST_F(TrialBinaryTest, RunsASpecAndWritesASucceededResult) {
  TrialSpec spec = TinySpec(2, 2);
  spec.strategy.attention = Attention::kSdpa;
  ASSERT_TRUE(WriteJsonFile(dir_ + "/spec.json", TrialSpecToJson(spec)).ok());
  ASSERT_EQ(RunBinary(Args()), 0) << ReadStderr();
  const TrialResult r = ReadResult();
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_GT(r.metrics.tokens_per_second, 0);
  EXPECT_GT(r.metrics.peak_memory_bytes, 0);
  EXPECT_GT(r.metrics.peak_rss_bytes, r.metrics.peak_memory_bytes);
  EXPECT_TRUE(std::isfinite(r.metrics.final_loss));
  EXPECT_GT(r.metrics.final_loss, 0);
  const std::string err = ReadStderr();
  EXPECT_NE(err.find("step 1/3 warmup"), std::string::npos) << err;
  EXPECT_NE(err.find("step 3/3 measured"), std::string::npos) << err;
}

TEST_F(TrialBinaryTest, BadSpecsGiveAFailedResultWithTheReason) {
  TrialSpec spec = TinySpec(2, 2);
  spec.global_batch_size = 3;
  ASSERT_TRUE(WriteJsonFile(dir_ + "/spec.json", TrialSpecToJson(spec)).ok());
  ASSERT_EQ(RunBinary(Args()), 0) << ReadStderr();
  TrialResult r = ReadResult();
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_NE(r.error.find("global_batch_size"), std::string::npos) << r.error;

  std::ofstream(dir_ + "/spec.json") << "{ not json";
  ASSERT_EQ(RunBinary(Args()), 0) << ReadStderr();
  r = ReadResult();
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_NE(r.error.find("invalid trial spec"), std::string::npos) << r.error;

  nlohmann::json j = TrialSpecToJson(TinySpec());
  j["model_config"].erase("n_head");
  ASSERT_TRUE(WriteJsonFile(dir_ + "/spec.json", j).ok());
  ASSERT_EQ(RunBinary(Args()), 0) << ReadStderr();
  r = ReadResult();
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_NE(r.error.find("n_head"), std::string::npos) << r.error;
}

TEST_F(TrialBinaryTest, BadArgumentsExitNonZeroWithUsage) {
  EXPECT_EQ(RunBinary(""), 2);
  EXPECT_NE(ReadStderr().find("usage:"), std::string::npos);
  EXPECT_EQ(RunBinary("--spec '" + dir_ + "/spec.json'"), 2);
  EXPECT_EQ(RunBinary("--bogus x"), 2);
  // A result that cannot be written is the one other non-zero exit.
  ASSERT_TRUE(WriteJsonFile(dir_ + "/spec.json", TrialSpecToJson(TinySpec())).ok());
  EXPECT_EQ(RunBinary("--spec '" + dir_ + "/spec.json' --result /nonexistent/dir/result.json"), 1);
}

}  // namespace
}  // namespace autoaccel
