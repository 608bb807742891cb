// The coordinator's side of launcher jobs (the user's own script as the
// trial): what a launcher does to a request's model and space, which
// workers may run it, what each rank is told of its neighbours, and the
// signature its answers are kept under.
#include "server/launcher_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "server/rank_request.h"
#include "server/signature.h"
#include "server/tune_request.h"
#include "server/worker_pool.h"
#include "spec/strategy_fields.h"
#include "tests/register_request.h"
#include "tests/test_matchers.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {
namespace {

template <typename M>
auto InvalidArgument(M message_matcher) {
  return StatusIs(absl::StatusCode::kInvalidArgument, message_matcher);
}

constexpr char kTinyLlama[] = R"({"model_type": "llama", "hidden_size": 64,
  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128})";

v1::Launcher MakeLauncher(const std::string& name, const std::string& format,
                          std::vector<std::string> dimensions) {
  v1::Launcher l;
  l.set_name(name);
  l.set_format(format);
  for (std::string& d : dimensions) l.add_dimensions(std::move(d));
  return l;
}

v1::TuneRequest LauncherRequest(const std::string& launcher, int world_size = 1) {
  v1::TuneRequest r;
  r.set_launcher(launcher);
  r.set_seq_len(32);
  r.set_global_batch_size(8);
  r.set_world_size(world_size);
  r.set_time_limit_seconds(60);
  return r;
}

std::set<std::string> Values(const std::vector<Strategy>& space,
                             std::string (*of)(const Strategy&)) {
  std::set<std::string> out;
  for (const Strategy& s : space) out.insert(of(s));
  return out;
}
std::string PrecisionOf(const Strategy& s) { return std::string(PrecisionName(s.precision)); }
std::string CheckpointingOf(const Strategy& s) {
  return std::string(CheckpointingName(s.checkpointing));
}
std::string ShardingOf(const Strategy& s) { return std::string(ShardingName(s.sharding)); }
std::string AccumulationOf(const Strategy& s) { return std::to_string(s.grad_accum_steps); }
std::string TensorParallelOf(const Strategy& s) { return std::to_string(s.tensor_parallel); }
std::string ExpertParallelOf(const Strategy& s) { return std::to_string(s.expert_parallel); }
std::string ContextParallelOf(const Strategy& s) {
  return absl::StrCat(s.context_parallel, "/", ContextParallelCommName(s.context_parallel_comm));
}

TEST(LauncherJobTest, WithoutAModelConfigTheModelIsOneTheSearchCannotSeeInside) {
  const v1::Launcher launcher = MakeLauncher("hf", "hf-trainer", {});
  absl::StatusOr<JobSpec> spec =
      ValidateTuneRequest(LauncherRequest("hf"), TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(IsUnknownLauncherModel(spec->model));
  ASSERT_TRUE(spec->launcher.has_value());
  EXPECT_EQ(spec->launcher->format(), "hf-trainer");
  // The engine's limits for a model it cannot see (no checkpointing of
  // unknown layers) are not the script's: it checkpoints its own model.
  EXPECT_THAT(Values(spec->space, &CheckpointingOf), ElementsAre("full", "none", "selective"));
  // The rank's spec carries the opaque model to the worker and back.
  absl::StatusOr<TrialSpec> back =
      TrialSpecFromJson(nlohmann::json{{"seq_len", 32},
                                       {"global_batch_size", 8},
                                       {"model_family", spec->model.family},
                                       {"model_config", spec->model.ToConfigJson()},
                                       {"strategy", StrategyToJson(spec->space.front())}});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(IsUnknownLauncherModel(back->model));
}

TEST(LauncherJobTest, AModelConfigIsReadAsForTheEnginesJobs) {
  const v1::Launcher launcher = MakeLauncher("hf", "hf-trainer", {"precision"});
  v1::TuneRequest r = LauncherRequest("hf");
  r.mutable_model()->set_family("llama");
  r.mutable_model()->set_config_json(kTinyLlama);
  absl::StatusOr<JobSpec> spec = ValidateTuneRequest(r, TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model.family, "llama");
  EXPECT_EQ(spec->model.n_layer, 2);
  // A config without its family, and a TorchScript module, are refused.
  r.mutable_model()->clear_family();
  EXPECT_THAT(ValidateTuneRequest(r, TuneDefaults(), &launcher).status(),
              InvalidArgument(HasSubstr("model.family")));
  r.mutable_model()->set_family("torchscript");
  EXPECT_THAT(ValidateTuneRequest(r, TuneDefaults(), &launcher).status(),
              InvalidArgument(HasSubstr("TorchScript")));
}

TEST(LauncherJobTest, TheSpaceVariesOnlyTheDimensionsTheScriptHonours) {
  const v1::Launcher launcher = MakeLauncher("hf", "", {"precision"});
  absl::StatusOr<JobSpec> spec =
      ValidateTuneRequest(LauncherRequest("hf"), TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(Values(spec->space, &PrecisionOf), ElementsAre("bf16", "fp16", "fp32", "pure_bf16"));
  for (const Strategy& s : spec->space) {
    EXPECT_EQ(s.checkpointing, Checkpointing::kNone) << StrategyToText(s);
    EXPECT_EQ(s.attention, Attention::kMath) << StrategyToText(s);
    EXPECT_EQ(s.optimizer, Optimizer::kAdamW) << StrategyToText(s);
    // The micro-batch split is the script's: the whole batch at once.
    EXPECT_EQ(s.grad_accum_steps, 1) << StrategyToText(s);
    EXPECT_EQ(s.micro_batch_size, 8) << StrategyToText(s);
  }
  EXPECT_EQ(spec->space.size(), 4u);
}

// A script that declares context parallelism is told both its degree and
// its exchange; one that does not is refused the candidates.
TEST(LauncherJobTest, AScriptThatDeclaresContextParallelismHasItSearched) {
  const v1::Launcher launcher =
      MakeLauncher("titan", "", {"context_parallel", "context_parallel_comm"});
  v1::TuneRequest r = LauncherRequest("titan", 2);
  r.add_context_parallel_sizes(1);
  r.add_context_parallel_sizes(2);
  absl::StatusOr<JobSpec> spec = ValidateTuneRequest(r, TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(Values(spec->space, &ContextParallelOf),
              ElementsAre("1/p2p", "2/all_gather", "2/p2p"));
  const v1::Launcher other = MakeLauncher("ddp", "", {"sharding"});
  r.set_launcher("ddp");
  EXPECT_THAT(ValidateTuneRequest(r, TuneDefaults(), &other).status(),
              InvalidArgument(HasSubstr("context_parallel_sizes: launcher 'ddp' does not honour "
                                        "context_parallel")));
}

// Expert parallelism likewise: the script spreads its own experts (the
// model is one the search cannot see inside, so no rule needs experts).
TEST(LauncherJobTest, AScriptThatDeclaresExpertParallelismHasItSearched) {
  const v1::Launcher launcher = MakeLauncher("moe", "", {"expert_parallel", "sharding"});
  v1::TuneRequest r = LauncherRequest("moe", 2);
  r.add_expert_parallel_sizes(1);
  r.add_expert_parallel_sizes(2);
  absl::StatusOr<JobSpec> spec = ValidateTuneRequest(r, TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(Values(spec->space, &ExpertParallelOf), ElementsAre("1", "2"));
  const v1::Launcher other = MakeLauncher("ddp", "", {"sharding"});
  r.set_launcher("ddp");
  EXPECT_THAT(ValidateTuneRequest(r, TuneDefaults(), &other).status(),
              InvalidArgument(HasSubstr("expert_parallel_sizes: launcher 'ddp' does not honour "
                                        "expert_parallel")));
}

TEST(LauncherJobTest, MicroBatchAndAccumulationVaryTogetherWhenEitherIsHonoured) {
  for (const char* key : {"micro_batch_size", "grad_accum_steps"}) {
    const v1::Launcher launcher = MakeLauncher("hf", "", {key});
    absl::StatusOr<JobSpec> spec =
        ValidateTuneRequest(LauncherRequest("hf"), TuneDefaults(), &launcher);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_THAT(Values(spec->space, &AccumulationOf), ElementsAre("1", "2", "4", "8")) << key;
  }
}

TEST(LauncherJobTest, AnUnhonouredPerRankBatchThatIsNoPowerOfTwoIsStillOneMicroBatch) {
  const v1::Launcher launcher = MakeLauncher("ddp", "", {"sharding"});
  v1::TuneRequest r = LauncherRequest("ddp", 2);
  r.set_global_batch_size(12);  // 6 per rank
  absl::StatusOr<JobSpec> spec = ValidateTuneRequest(r, TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  for (const Strategy& s : spec->space) {
    EXPECT_EQ(s.grad_accum_steps, 1) << StrategyToText(s);
    EXPECT_EQ(s.micro_batch_size * s.data_parallel, 12) << StrategyToText(s);
  }
  EXPECT_THAT(Values(spec->space, &ShardingOf), ElementsAre("fsdp", "none", "zero1", "zero2"));
}

TEST(LauncherJobTest, CandidatesForADimensionTheScriptIgnoresAreRefused) {
  const v1::Launcher launcher = MakeLauncher("hf", "", {"micro_batch_size", "sharding"});
  v1::TuneRequest r = LauncherRequest("hf");
  r.add_precisions("bf16");
  EXPECT_THAT(ValidateTuneRequest(r, TuneDefaults(), &launcher).status(),
              InvalidArgument(AllOf(HasSubstr("precisions: launcher 'hf' does not honour "
                                              "precision"),
                                    HasSubstr("micro_batch_size, sharding"))));
  const v1::Launcher odd = MakeLauncher("odd", "", {"warp_speed"});
  EXPECT_THAT(ValidateTuneRequest(LauncherRequest("odd"), TuneDefaults(), &odd).status(),
              InvalidArgument(HasSubstr("'warp_speed', which is no strategy field")));
}

TEST(LauncherJobTest, EveryStrategyFieldIsADimensionALauncherMayList) {
  std::vector<std::string> keys;
  ForEachRow(kStrategyFields, [&](const auto& field) { keys.emplace_back(field.name); });
  EXPECT_EQ(LauncherDimensionKeys(), keys);
  // And restricting to each alone gives a valid, non-empty space.
  for (const std::string& key : keys) {
    const v1::Launcher launcher = MakeLauncher("one", "", {key});
    absl::StatusOr<JobSpec> spec =
        ValidateTuneRequest(LauncherRequest("one", 2), TuneDefaults(), &launcher);
    ASSERT_TRUE(spec.ok()) << key << ": " << spec.status();
    EXPECT_FALSE(spec->space.empty()) << key;
  }
}

TEST(LauncherJobTest, CombinationsTheFormatRejectsAreNotTried) {
  // torchtitan has no ZeRO-1 or ZeRO-2: its replicated or FSDP2 data
  // parallelism only.
  const v1::Launcher titan = MakeLauncher("titan", "torchtitan", {"sharding"});
  absl::StatusOr<JobSpec> spec =
      ValidateTuneRequest(LauncherRequest("titan", 2), TuneDefaults(), &titan);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(Values(spec->space, &ShardingOf), ElementsAre("fsdp", "none"));
  // Nothing left: the format's reason for the first.
  v1::TuneRequest zero = LauncherRequest("titan", 2);
  zero.add_shardings("zero1");
  EXPECT_THAT(ValidateTuneRequest(zero, TuneDefaults(), &titan).status(),
              InvalidArgument(AllOf(HasSubstr("rejects all"), HasSubstr("ZeRO-1"))));
  // Tensor parallelism where the script's framework has it.
  const v1::Launcher megatron = MakeLauncher("mega", "megatron", {"tensor_parallel"});
  spec = ValidateTuneRequest(LauncherRequest("mega", 2), TuneDefaults(), &megatron);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(Values(spec->space, &TensorParallelOf), ElementsAre("1", "2"));
}

TEST(LauncherJobTest, AnyDeviceTypeTheScriptDrivesIsAcceptedByName) {
  const v1::Launcher launcher = MakeLauncher("hf", "", {"offload"});
  v1::TuneRequest r = LauncherRequest("hf");
  r.set_device_type("musa");
  absl::StatusOr<JobSpec> spec = ValidateTuneRequest(r, TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device_type, "musa");
  // An accelerator: offloading to the host is a choice there.
  EXPECT_EQ(spec->space.size(), 2u);
  for (const char* bad : {"MUSA", "mu sa", "9xpu", "a/b"}) {
    r.set_device_type(bad);
    EXPECT_THAT(ValidateTuneRequest(r, TuneDefaults(), &launcher).status(),
                InvalidArgument(HasSubstr("device_type")))
        << bad;
  }
  // Without a launcher only the engine's devices.
  v1::TuneRequest engine = r;
  engine.clear_launcher();
  engine.mutable_model()->set_family("llama");
  engine.mutable_model()->set_config_json(kTinyLlama);
  engine.set_device_type("musa");
  EXPECT_THAT(ValidateTuneRequest(engine, TuneDefaults()).status(),
              InvalidArgument(HasSubstr("allowed: cpu, cuda")));
}

TEST(LauncherJobTest, AnswersOfALauncherAreKeptApartFromTheEnginesAndOtherFormats) {
  const ModelSpec model = UnknownLauncherModel();
  const v1::Launcher hf = MakeLauncher("hf", "hf-trainer", {"precision"});
  const v1::Launcher ds = MakeLauncher("hf", "deepspeed", {"precision"});
  const std::string a = ComputeSignature(model, 32, 8, 2, "cpu", &hf);
  EXPECT_THAT(a, HasSubstr("launcher-hf-"));
  EXPECT_NE(a, ComputeSignature(model, 32, 8, 2, "cpu", &ds));
  EXPECT_NE(a, ComputeSignature(model, 32, 8, 2, "cpu"));
  EXPECT_EQ(a, ComputeSignature(model, 32, 8, 2, "cpu", &hf));
}

v1::RegisterRequest WithLaunchers(v1::RegisterRequest r, std::vector<v1::Launcher> launchers) {
  for (v1::Launcher& l : launchers) *r.add_launchers() = std::move(l);
  return r;
}

TEST(LauncherJobTest, OnlyWorkersThatOfferTheLauncherRunItsTrials) {
  FakeClock clock;
  WorkerPool pool(&clock);
  ASSERT_TRUE(pool.Register(RegisterRequestFor("plain", "h0:1", 4)).ok());
  ASSERT_TRUE(pool.Register(WithLaunchers(RegisterRequestFor("w1", "h1:1", 1),
                                          {MakeLauncher("hf", "hf-trainer", {"precision"})}))
                  .ok());
  ASSERT_TRUE(pool.Register(WithLaunchers(RegisterRequestFor("w2", "h2:1", 1),
                                          {MakeLauncher("hf", "hf-trainer", {"precision"}),
                                           MakeLauncher("fsdp", "", {})}))
                  .ok());
  EXPECT_EQ(pool.CountDevices("cpu"), 6);
  EXPECT_EQ(pool.CountDevices("cpu", "hf"), 2);
  EXPECT_EQ(pool.CountDevices("cpu", "fsdp"), 1);
  absl::StatusOr<v1::Launcher> found = pool.FindLauncher("hf");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->format(), "hf-trainer");
  EXPECT_THAT(pool.FindLauncher("nope").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("offered: fsdp, hf")));
  // Two ranks of "hf": one on each worker that has it, never on "plain".
  std::optional<Gang> gang = pool.Place("cpu", 2, "t1", 1, "hf");
  ASSERT_TRUE(gang.has_value());
  EXPECT_EQ(gang->ranks[0].worker_id, "w1");
  EXPECT_EQ(gang->ranks[1].worker_id, "w2");
  EXPECT_FALSE(pool.Place("cpu", 1, "t2", 1, "fsdp").has_value());  // w2's device is held
  // Workers that define one name differently cannot serve one job.
  ASSERT_TRUE(pool.Register(WithLaunchers(RegisterRequestFor("w3", "h3:1", 1),
                                          {MakeLauncher("hf", "deepspeed", {})}))
                  .ok());
  EXPECT_THAT(pool.FindLauncher("hf").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("differently")));
  // A registration naming a launcher twice is refused.
  EXPECT_THAT(pool.Register(WithLaunchers(RegisterRequestFor("w4", "h4:1", 1),
                                          {MakeLauncher("x", "", {}), MakeLauncher("x", "", {})})),
              InvalidArgument(HasSubstr("given twice")));
}

TEST(LauncherJobTest, EachRankLearnsItsNeighboursOnItsWorkerAsTorchrunWouldTellIt) {
  const v1::Launcher launcher = MakeLauncher("fsdp", "", {});
  absl::StatusOr<JobSpec> spec =
      ValidateTuneRequest(LauncherRequest("fsdp", 4), TuneDefaults(), &launcher);
  ASSERT_TRUE(spec.ok()) << spec.status();
  TrialRun trial;
  trial.record.trial_id = "job-1-t0000";
  trial.record.attempt = 1;
  trial.strategy = spec->space.front();
  // Ranks 0-2 on worker a (devices 5, 2, 7), rank 3 on worker b (device 1).
  const std::tuple<const char*, int, int> where[] = {
      {"a", 5, 0}, {"a", 2, 1}, {"a", 7, 2}, {"b", 1, 0}};
  for (const auto& [worker, device, local_rank] : where) {
    Rank r;
    r.placed.worker_id = worker;
    r.placed.device_index = device;
    r.placed.local_rank = local_rank;
    trial.ranks.push_back(r);
  }
  // What the worker reads: the spec, through its own parser.
  const auto spec_of = [&](const v1::RunTrialRequest& request) {
    absl::StatusOr<TrialSpec> parsed =
        TrialSpecFromJson(nlohmann::json::parse(request.spec_json()));
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.value_or(TrialSpec{});
  };
  const std::vector<v1::RunTrialRequest> requests = RankRequests(*spec, trial, absl::Seconds(60));
  ASSERT_EQ(requests.size(), 4u);
  const v1::RunTrialRequest& r1 = requests[1];
  EXPECT_EQ(r1.launcher(), "fsdp");
  EXPECT_EQ(r1.device_index(), 2);
  const TrialSpec s1 = spec_of(r1);
  EXPECT_EQ(s1.local_rank, 1);
  EXPECT_EQ(s1.group_rank, 0);
  EXPECT_EQ(s1.local_world_size, 3);
  EXPECT_THAT(s1.local_device_indices, ElementsAre(5, 2, 7));
  const TrialSpec s3 = spec_of(requests[3]);
  EXPECT_EQ(s3.local_rank, 0);
  EXPECT_EQ(s3.group_rank, 1);
  EXPECT_EQ(s3.local_world_size, 1);
  EXPECT_THAT(s3.local_device_indices, ElementsAre(1));
  // The engine's trials get the same place (one derivation for both).
  JobSpec engine = *spec;
  engine.launcher.reset();
  const v1::RunTrialRequest plain = RankRequests(engine, trial, absl::Seconds(60))[1];
  EXPECT_TRUE(plain.launcher().empty());
  EXPECT_THAT(spec_of(plain).local_device_indices, ElementsAre(5, 2, 7));
}

}  // namespace
}  // namespace autoaccel
