// Tests of the pure search library: strategy and model value types, the
// search space and its rules, the clock and the exhaustive searcher.
#include <atomic>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/content_digest.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/config_override.h"
#include "search/cost_model.h"
#include "search/model_spec.h"
#include "search/searcher.h"
#include "search/space.h"
#include "search/strategy.h"
#include "search/trial.h"

namespace autoaccel {

// Failure messages show strategies as their canonical text.
void PrintTo(const Strategy& s, std::ostream* os) { *os << StrategyToText(s); }

namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

template <typename M>
auto InvalidArgument(M message_matcher) {
  return StatusIs(absl::StatusCode::kInvalidArgument, message_matcher);
}

Strategy MakeStrategy(int mbs, int ga, Precision p, Checkpointing c, Attention a) {
  Strategy s;
  s.micro_batch_size = mbs;
  s.grad_accum_steps = ga;
  s.precision = p;
  s.checkpointing = c;
  s.attention = a;
  return s;
}

std::vector<std::string> Texts(const std::vector<Strategy>& strategies) {
  std::vector<std::string> out;
  for (const Strategy& s : strategies) out.push_back(StrategyToText(s));
  return out;
}

constexpr absl::string_view kGpt2SmallConfig = R"({
  "model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
  "vocab_size": 50257, "n_positions": 1024, "n_inner": null,
  "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"
})";

ModelSpec Gpt2Small() {
  absl::StatusOr<ModelSpec> m = ParseModelConfig("gpt2", kGpt2SmallConfig);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.value_or(ModelSpec{});
}

SpaceRequest BaseRequest(int global_batch_size, int world_size = 1) {
  SpaceRequest r;
  r.model = Gpt2Small();
  r.seq_len = 512;
  r.global_batch_size = global_batch_size;
  r.world_size = world_size;
  return r;
}

// ---------------------------------------------------------------- strategy

TEST(StrategyText, CanonicalFormOfAnExample) {
  const Strategy s = MakeStrategy(4, 2, Precision::kBf16, Checkpointing::kFull, Attention::kSdpa);
  EXPECT_EQ(
      StrategyToText(s),
      "mbs=4,ga=2,precision=bf16,checkpoint=full,attention=sdpa,optimizer=adamw,offload=none");
  absl::StatusOr<Strategy> parsed = ParseStrategyText(
      "mbs=4,ga=2,precision=bf16,checkpoint=full,attention=sdpa,optimizer=adamw,offload=none");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, s);
}

TEST(StrategyText, CanonicalFormWithEveryDimensionSet) {
  Strategy s =
      MakeStrategy(4, 2, Precision::kPureBf16, Checkpointing::kSelective, Attention::kSdpa);
  s.checkpoint_percent = 50;
  s.optimizer = Optimizer::kFusedAdamW;
  s.offload = Offload::kCpu;
  const std::string text =
      "mbs=4,ga=2,precision=pure_bf16,checkpoint=selective,ckpt_pct=50,attention=sdpa,"
      "optimizer=fused_adamw,offload=cpu";
  EXPECT_EQ(StrategyToText(s), text);
  absl::StatusOr<Strategy> parsed = ParseStrategyText(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, s);
  // ckpt_pct=100 is the default: accepted, and left out of the canonical text.
  s.checkpoint_percent = 100;
  parsed = ParseStrategyText(absl::StrCat(text, ",ckpt_pct=100"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, s);
  EXPECT_THAT(StrategyToText(s), Not(HasSubstr("ckpt_pct")));
}

TEST(StrategyText, KeysInAnyOrderAndMissingKeysKeepDefaults) {
  absl::StatusOr<Strategy> parsed = ParseStrategyText(" attention = sdpa , mbs=16 ");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, MakeStrategy(16, 1, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa));
}

// Texts and JSON stored before optimizer, offload and ckpt_pct existed.
TEST(StrategyText, OldFormsWithoutTheNewKeysParseToTheDefaults) {
  const Strategy expected =
      MakeStrategy(4, 2, Precision::kBf16, Checkpointing::kFull, Attention::kSdpa);
  absl::StatusOr<Strategy> from_text =
      ParseStrategyText("mbs=4,ga=2,precision=bf16,checkpoint=full,attention=sdpa");
  ASSERT_TRUE(from_text.ok()) << from_text.status();
  EXPECT_EQ(*from_text, expected);
  EXPECT_EQ(from_text->checkpoint_percent, 100);
  EXPECT_EQ(from_text->optimizer, Optimizer::kAdamW);
  EXPECT_EQ(from_text->offload, Offload::kNone);
  absl::StatusOr<Strategy> from_json = StrategyFromJson(nlohmann::json::parse(R"({
      "micro_batch_size": 4, "grad_accum_steps": 2, "precision": "bf16",
      "checkpointing": "full", "attention": "sdpa"})"));
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(*from_json, expected);
}

TEST(StrategyText, MalformedTextNamesTheKey) {
  EXPECT_THAT(ParseStrategyText("mbs=0").status(), InvalidArgument(HasSubstr("mbs")));
  EXPECT_THAT(ParseStrategyText("mbs=x").status(), InvalidArgument(HasSubstr("mbs")));
  EXPECT_THAT(ParseStrategyText("mbs=99999999999").status(), InvalidArgument(HasSubstr("mbs")));
  EXPECT_THAT(ParseStrategyText("ga=-1").status(), InvalidArgument(HasSubstr("ga")));
  EXPECT_THAT(ParseStrategyText("precision=fp8").status(),
              InvalidArgument(AllOf(HasSubstr("precision"), HasSubstr("fp8"), HasSubstr("bf16"),
                                    HasSubstr("pure_bf16"))));
  EXPECT_THAT(ParseStrategyText("checkpoint=partial").status(),
              InvalidArgument(AllOf(HasSubstr("checkpoint"), HasSubstr("selective"))));
  EXPECT_THAT(ParseStrategyText("attention=flash").status(),
              InvalidArgument(HasSubstr("attention")));
  EXPECT_THAT(ParseStrategyText("optimizer=sgd").status(),
              InvalidArgument(AllOf(HasSubstr("optimizer"), HasSubstr("fused_adamw"))));
  EXPECT_THAT(ParseStrategyText("offload=nvme").status(),
              InvalidArgument(AllOf(HasSubstr("offload"), HasSubstr("cpu"))));
  EXPECT_THAT(ParseStrategyText("checkpoint=full,ckpt_pct=0").status(),
              InvalidArgument(HasSubstr("ckpt_pct")));
  EXPECT_THAT(ParseStrategyText("checkpoint=full,ckpt_pct=101").status(),
              InvalidArgument(HasSubstr("ckpt_pct")));
  EXPECT_THAT(ParseStrategyText("checkpoint=full,ckpt_pct=half").status(),
              InvalidArgument(HasSubstr("ckpt_pct")));
  // A share of layers means nothing without checkpointing.
  EXPECT_THAT(ParseStrategyText("checkpoint=none,ckpt_pct=50").status(),
              InvalidArgument(HasSubstr("ckpt_pct")));
  EXPECT_THAT(ParseStrategyText("ckpt_pct=50").status(), InvalidArgument(HasSubstr("ckpt_pct")));
  EXPECT_THAT(ParseStrategyText("foo=1").status(), InvalidArgument(HasSubstr("foo")));
  EXPECT_THAT(ParseStrategyText("mbs=4,foo=1").status(), InvalidArgument(HasSubstr("foo")));
}

TEST(StrategyJson, FormOfAnExample) {
  Strategy s = MakeStrategy(4, 2, Precision::kBf16, Checkpointing::kFull, Attention::kSdpa);
  EXPECT_EQ(StrategyToJson(s), nlohmann::json::parse(R"({
      "data_parallel": 1, "tensor_parallel": 1, "pipeline_parallel": 1, "sharding": "none",
      "pipeline_schedule": "1f1b", "virtual_stages": 1, "sequence_parallel": false,
      "micro_batch_size": 4, "grad_accum_steps": 2, "precision": "bf16",
      "checkpointing": "full", "checkpoint_percent": 100, "attention": "sdpa",
      "optimizer": "adamw", "offload": "none"})"));
  s.precision = Precision::kFp16;
  s.checkpoint_percent = 25;
  s.optimizer = Optimizer::kFusedAdamW;
  s.offload = Offload::kCpu;
  s.data_parallel = 2;
  s.pipeline_parallel = 2;
  s.sharding = Sharding::kZero2;
  s.pipeline_schedule = PipelineSchedule::kInterleaved;
  s.virtual_stages = 3;
  EXPECT_EQ(StrategyToJson(s), nlohmann::json::parse(R"({
      "data_parallel": 2, "tensor_parallel": 1, "pipeline_parallel": 2, "sharding": "zero2",
      "pipeline_schedule": "interleaved", "virtual_stages": 3, "sequence_parallel": false,
      "micro_batch_size": 4, "grad_accum_steps": 2, "precision": "fp16",
      "checkpointing": "full", "checkpoint_percent": 25, "attention": "sdpa",
      "optimizer": "fused_adamw", "offload": "cpu"})"));
}

TEST(StrategyJson, MalformedJsonNamesTheKey) {
  const auto from = [](absl::string_view text) {
    return StrategyFromJson(nlohmann::json::parse(text)).status();
  };
  EXPECT_THAT(from(R"({"micro_batch_size": 0})"), InvalidArgument(HasSubstr("micro_batch_size")));
  EXPECT_THAT(from(R"({"micro_batch_size": "4"})"), InvalidArgument(HasSubstr("micro_batch_size")));
  EXPECT_THAT(from(R"({"grad_accum_steps": 1.5})"), InvalidArgument(HasSubstr("grad_accum_steps")));
  EXPECT_THAT(from(R"({"precision": "fp8"})"), InvalidArgument(HasSubstr("precision")));
  EXPECT_THAT(from(R"({"checkpointing": 1})"), InvalidArgument(HasSubstr("checkpointing")));
  EXPECT_THAT(from(R"({"checkpointing": "full", "checkpoint_percent": 0})"),
              InvalidArgument(HasSubstr("checkpoint_percent")));
  EXPECT_THAT(from(R"({"checkpointing": "full", "checkpoint_percent": 101})"),
              InvalidArgument(HasSubstr("checkpoint_percent")));
  EXPECT_THAT(from(R"({"checkpointing": "none", "checkpoint_percent": 50})"),
              InvalidArgument(HasSubstr("checkpoint_percent")));
  EXPECT_THAT(from(R"({"optimizer": "sgd"})"), InvalidArgument(HasSubstr("optimizer")));
  EXPECT_THAT(from(R"({"offload": 1})"), InvalidArgument(HasSubstr("offload")));
  EXPECT_THAT(from(R"({"foo": 1})"), InvalidArgument(HasSubstr("foo")));
  EXPECT_THAT(from("[1, 2]"), InvalidArgument(HasSubstr("object")));
}

// Contract bug (search/strategy.cc, StrategyFromJson): sizes are checked as
// int64 but stored with get<int>(), so 2^32 + 1 is accepted and becomes 1.
// Enable once StrategyFromJson rejects values above INT_MAX.
TEST(StrategyJson, SizeAboveIntMaxIsRejected) {
  EXPECT_THAT(
      StrategyFromJson(nlohmann::json::parse(R"({"micro_batch_size": 4294967297})")).status(),
      InvalidArgument(HasSubstr("micro_batch_size")));
}

Strategy WithLayout(Strategy s, int dp, int tp, int pp, Sharding sharding = Sharding::kNone) {
  s.data_parallel = dp;
  s.tensor_parallel = tp;
  s.pipeline_parallel = pp;
  s.sharding = sharding;
  return s;
}

TEST(StrategyLayout, CanonicalTextsOfLayouts) {
  const Strategy base =
      MakeStrategy(4, 2, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const std::string rest =
      "mbs=4,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
  Strategy zero1 = WithLayout(base, 4, 1, 1, Sharding::kZero1);
  Strategy plain_dp = WithLayout(base, 2, 1, 1);
  Strategy tensor = WithLayout(base, 1, 2, 1);
  tensor.sequence_parallel = true;
  Strategy pipeline = WithLayout(base, 2, 1, 2, Sharding::kFsdp);
  Strategy interleaved = WithLayout(base, 1, 2, 4);
  interleaved.pipeline_schedule = PipelineSchedule::kInterleaved;
  interleaved.virtual_stages = 3;
  interleaved.sequence_parallel = true;
  const std::vector<std::pair<Strategy, std::string>> cases = {
      {base, rest},  // a single rank: the text of before layouts existed
      {zero1, "dp=4,tp=1,pp=1,sharding=zero1," + rest},
      {plain_dp, "dp=2,tp=1,pp=1,sharding=none," + rest},
      {tensor, "dp=1,tp=2,pp=1,sharding=none,sp=1," + rest},
      {pipeline, "dp=2,tp=1,pp=2,sharding=fsdp,pp_schedule=1f1b," + rest},
      {interleaved, "dp=1,tp=2,pp=4,sharding=none,sp=1,pp_schedule=interleaved,vpp=3," + rest},
  };
  for (const auto& [strategy, text] : cases) {
    EXPECT_EQ(StrategyToText(strategy), text);
    absl::StatusOr<Strategy> parsed = ParseStrategyText(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(*parsed, strategy) << text;
    absl::StatusOr<Strategy> from_json = StrategyFromJson(StrategyToJson(strategy));
    ASSERT_TRUE(from_json.ok()) << text << ": " << from_json.status();
    EXPECT_EQ(*from_json, strategy) << text;
    EXPECT_EQ(strategy.world_size(),
              strategy.data_parallel * strategy.tensor_parallel * strategy.pipeline_parallel);
  }
  EXPECT_EQ(interleaved.world_size(), 8);
}

TEST(StrategyLayout, LayoutKeysInAnyOrderAndMissingOnesTakeDefaults) {
  absl::StatusOr<Strategy> parsed =
      ParseStrategyText("vpp=2,mbs=4,pp_schedule=interleaved,sp=1,tp=2,pp=2,ga=2");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->data_parallel, 1);
  EXPECT_EQ(parsed->tensor_parallel, 2);
  EXPECT_EQ(parsed->pipeline_parallel, 2);
  EXPECT_EQ(parsed->sharding, Sharding::kNone);
  EXPECT_EQ(parsed->pipeline_schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(parsed->virtual_stages, 2);
  EXPECT_TRUE(parsed->sequence_parallel);
  EXPECT_EQ(StrategyToText(*parsed),
            "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=interleaved,vpp=2,mbs=4,ga=2,"
            "precision=fp32,checkpoint=none,attention=math,optimizer=adamw,offload=none");
  // The single-rank layout spelled out is the single-rank default, whose
  // canonical text leaves it out; sp=0 and pp_schedule=1f1b are defaults too.
  parsed = ParseStrategyText("dp=1,tp=1,pp=1,sharding=none,sp=0,pp_schedule=1f1b,vpp=1,mbs=2");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, MakeStrategy(2, 1, Precision::kFp32, Checkpointing::kNone, Attention::kMath));
  EXPECT_EQ(StrategyToText(*parsed),
            "mbs=2,ga=1,precision=fp32,checkpoint=none,attention=math,optimizer=adamw,"
            "offload=none");
  // JSON written before the layout keys existed is a single-rank strategy.
  absl::StatusOr<Strategy> old_json = StrategyFromJson(nlohmann::json::parse(R"({
      "micro_batch_size": 2, "grad_accum_steps": 1, "precision": "fp32",
      "checkpointing": "none", "checkpoint_percent": 100, "attention": "math",
      "optimizer": "adamw", "offload": "none"})"));
  ASSERT_TRUE(old_json.ok()) << old_json.status();
  EXPECT_EQ(*old_json, *parsed);
  EXPECT_EQ(old_json->world_size(), 1);
}

// Every rule of CheckLayout, through each form: the message names the key in
// the spelling of the input.
TEST(StrategyLayout, EveryLayoutErrorNamesTheKey) {
  const Strategy base =
      MakeStrategy(1, 1, Precision::kFp32, Checkpointing::kNone, Attention::kMath);
  EXPECT_TRUE(CheckLayout(base).ok());
  struct Case {
    std::function<void(Strategy*)> change;
    std::string json_key, text_key, why;
  };
  const std::vector<Case> cases = {
      {[](Strategy* s) { s->data_parallel = 0; }, "data_parallel", "dp", "must be >= 1"},
      {[](Strategy* s) { s->tensor_parallel = -1; }, "tensor_parallel", "tp", "must be >= 1"},
      {[](Strategy* s) { s->pipeline_parallel = 0; }, "pipeline_parallel", "pp", "must be >= 1"},
      {[](Strategy* s) { s->virtual_stages = 0; }, "virtual_stages", "vpp", "must be >= 1"},
      {[](Strategy* s) { s->sharding = Sharding::kZero1; }, "sharding", "sharding", "> 1"},
      {[](Strategy* s) { s->sequence_parallel = true; }, "sequence_parallel", "sp", "> 1"},
      {[](Strategy* s) { s->pipeline_schedule = PipelineSchedule::kInterleaved; },
       "pipeline_schedule", "pp_schedule", "allowed without a pipeline: 1f1b"},
      {[](Strategy* s) { s->virtual_stages = 2; }, "virtual_stages", "vpp",
       "1f1b runs one model chunk"},
      {[](Strategy* s) {
         s->pipeline_parallel = 2;
         s->virtual_stages = 2;
       },
       "virtual_stages", "vpp", "1f1b runs one model chunk"},
      {[](Strategy* s) {
         s->pipeline_parallel = 2;
         s->pipeline_schedule = PipelineSchedule::kInterleaved;
       },
       "virtual_stages", "vpp", "interleaved needs at least 2"},
  };
  for (const Case& c : cases) {
    Strategy s = base;
    c.change(&s);
    EXPECT_THAT(CheckLayout(s), InvalidArgument(AllOf(StartsWith("strategy." + c.json_key + ":"),
                                                      HasSubstr(c.why))))
        << c.json_key;
    EXPECT_THAT(CheckLayout(s, StrategyForm::kText),
                InvalidArgument(StartsWith("strategy." + c.text_key + ":")))
        << c.text_key;
    // The parsers refuse what CheckLayout refuses (sizes below 1 are
    // refused as non-positive integers before it runs).
    EXPECT_THAT(StrategyFromJson(StrategyToJson(s)).status(),
                InvalidArgument(StartsWith("strategy." + c.json_key + ":")))
        << StrategyToJson(s).dump();
  }
  const auto text_error = [](absl::string_view text) { return ParseStrategyText(text).status(); };
  EXPECT_THAT(text_error("dp=0"), InvalidArgument(StartsWith("strategy.dp:")));
  EXPECT_THAT(text_error("tp=x"), InvalidArgument(StartsWith("strategy.tp:")));
  EXPECT_THAT(text_error("pp=-2"), InvalidArgument(StartsWith("strategy.pp:")));
  EXPECT_THAT(text_error("vpp=0"), InvalidArgument(StartsWith("strategy.vpp:")));
  EXPECT_THAT(text_error("sharding=zero1"),
              InvalidArgument(AllOf(StartsWith("strategy.sharding:"), HasSubstr("dp > 1"))));
  EXPECT_THAT(text_error("dp=2,sharding=zero3"),
              InvalidArgument(AllOf(StartsWith("strategy.sharding:"), HasSubstr("fsdp"))));
  EXPECT_THAT(text_error("sp=1"),
              InvalidArgument(AllOf(StartsWith("strategy.sp:"), HasSubstr("tp > 1"))));
  EXPECT_THAT(text_error("tp=2,sp=2"),
              InvalidArgument(AllOf(StartsWith("strategy.sp:"), HasSubstr("0 or 1"))));
  EXPECT_THAT(text_error("pp_schedule=interleaved,vpp=2"),
              InvalidArgument(AllOf(StartsWith("strategy.pp_schedule:"), HasSubstr("pp > 1"))));
  EXPECT_THAT(
      text_error("pp=2,pp_schedule=gpipe"),
      InvalidArgument(AllOf(StartsWith("strategy.pp_schedule:"), HasSubstr("interleaved"))));
  EXPECT_THAT(text_error("pp=2,vpp=2"), InvalidArgument(StartsWith("strategy.vpp:")));
  EXPECT_THAT(text_error("pp=2,pp_schedule=interleaved"),
              InvalidArgument(StartsWith("strategy.vpp:")));
  EXPECT_TRUE(ParseStrategyText("pp=2,pp_schedule=interleaved,vpp=2").ok());
  const auto json_error = [](absl::string_view text) {
    return StrategyFromJson(nlohmann::json::parse(text)).status();
  };
  EXPECT_THAT(json_error(R"({"tensor_parallel": 2, "sequence_parallel": 1})"),
              InvalidArgument(StartsWith("strategy.sequence_parallel:")));
  EXPECT_THAT(json_error(R"({"data_parallel": 2, "sharding": "zero3"})"),
              InvalidArgument(StartsWith("strategy.sharding:")));
  EXPECT_THAT(json_error(R"({"pipeline_parallel": 2, "pipeline_schedule": "gpipe"})"),
              InvalidArgument(StartsWith("strategy.pipeline_schedule:")));
  EXPECT_THAT(json_error(R"({"data_parallel": 4294967298})"),
              InvalidArgument(StartsWith("strategy.data_parallel:")));
}

template <typename T>
T Pick(std::mt19937& rng, const std::vector<T>& values) {
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

// A valid strategy drawn from every dimension.
Strategy RandomStrategy(std::mt19937& rng) {
  // Mostly small sizes, sometimes anything up to INT_MAX.
  std::uniform_int_distribution<int> small(1, 64);
  std::uniform_int_distribution<int> any(1, INT_MAX);
  std::uniform_int_distribution<int> percent(1, 100);
  std::bernoulli_distribution coin(0.5);
  std::bernoulli_distribution rare(0.1);
  Strategy s = MakeStrategy(rare(rng) ? any(rng) : small(rng), rare(rng) ? any(rng) : small(rng),
                            Pick(rng, AllPrecisions()), Pick(rng, AllCheckpointings()),
                            Pick(rng, AllAttentions()));
  // Half the checkpointing strategies cover every layer (the default, left
  // out of the text); none always does.
  if (s.checkpointing != Checkpointing::kNone && coin(rng)) s.checkpoint_percent = percent(rng);
  s.optimizer = Pick(rng, AllOptimizers());
  s.offload = Pick(rng, AllOffloads());
  // Half of them on one rank (the default layout), the rest any valid layout.
  if (coin(rng)) {
    const std::vector<int> degrees = {1, 2, 3, 4, 8};
    s.data_parallel = Pick(rng, degrees);
    s.tensor_parallel = Pick(rng, degrees);
    s.pipeline_parallel = Pick(rng, degrees);
    if (s.data_parallel > 1) s.sharding = Pick(rng, AllShardings());
    if (s.tensor_parallel > 1) s.sequence_parallel = coin(rng);
    if (s.pipeline_parallel > 1) {
      s.pipeline_schedule = Pick(rng, AllPipelineSchedules());
      if (s.pipeline_schedule == PipelineSchedule::kInterleaved) s.virtual_stages = small(rng) + 1;
    }
  }
  return s;
}

TEST(StrategyRoundTrip, RandomStrategiesSurviveTextAndJson) {
  std::mt19937 rng(20240601);
  std::set<std::string> distinct;
  std::set<Precision> seen_precisions;
  std::set<Checkpointing> seen_checkpointings;
  std::set<int> seen_percents;
  std::set<Attention> seen_attentions;
  std::set<Optimizer> seen_optimizers;
  std::set<Offload> seen_offloads;
  std::set<Sharding> seen_shardings;
  std::set<PipelineSchedule> seen_schedules;
  std::set<std::tuple<int, int, int>> seen_layouts;
  int seen_sequence_parallel = 0;
  for (int i = 0; i < 1000; ++i) {
    const Strategy s = RandomStrategy(rng);
    const std::string text = StrategyToText(s);
    distinct.insert(text);
    seen_precisions.insert(s.precision);
    seen_checkpointings.insert(s.checkpointing);
    seen_percents.insert(s.checkpoint_percent);
    seen_attentions.insert(s.attention);
    seen_optimizers.insert(s.optimizer);
    seen_offloads.insert(s.offload);
    seen_shardings.insert(s.sharding);
    seen_schedules.insert(s.pipeline_schedule);
    seen_layouts.insert({s.data_parallel, s.tensor_parallel, s.pipeline_parallel});
    seen_sequence_parallel += s.sequence_parallel;

    absl::StatusOr<Strategy> from_text = ParseStrategyText(text);
    ASSERT_TRUE(from_text.ok()) << text << ": " << from_text.status();
    EXPECT_EQ(*from_text, s) << text;
    EXPECT_EQ(StrategyToText(*from_text), text);

    absl::StatusOr<Strategy> from_json = StrategyFromJson(StrategyToJson(s));
    ASSERT_TRUE(from_json.ok()) << text << ": " << from_json.status();
    EXPECT_EQ(*from_json, s) << text;

    const std::string dumped = StrategyToJson(s).dump();
    absl::StatusOr<Strategy> from_dump = StrategyFromJson(nlohmann::json::parse(dumped));
    ASSERT_TRUE(from_dump.ok()) << dumped << ": " << from_dump.status();
    EXPECT_EQ(*from_dump, s) << dumped;
    EXPECT_EQ(StrategyToJson(*from_dump).dump(), dumped);
  }
  // The generator really covered the space rather than repeating one value,
  // every value of every dimension included.
  EXPECT_GT(distinct.size(), 900u);
  for (Precision p : AllPrecisions()) EXPECT_TRUE(seen_precisions.count(p));
  for (Checkpointing c : AllCheckpointings()) EXPECT_TRUE(seen_checkpointings.count(c));
  for (Attention a : AllAttentions()) EXPECT_TRUE(seen_attentions.count(a));
  for (Optimizer o : AllOptimizers()) EXPECT_TRUE(seen_optimizers.count(o));
  for (Offload o : AllOffloads()) EXPECT_TRUE(seen_offloads.count(o));
  for (Sharding sh : AllShardings()) EXPECT_TRUE(seen_shardings.count(sh));
  for (PipelineSchedule p : AllPipelineSchedules()) EXPECT_TRUE(seen_schedules.count(p));
  EXPECT_GT(seen_layouts.size(), 100u);
  EXPECT_GT(seen_sequence_parallel, 50);
  EXPECT_GT(seen_percents.size(), 50u);
}

TEST(StrategyRoundTrip, DistinctStrategiesHaveDistinctForms) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const Strategy a = RandomStrategy(rng);
    const Strategy b = RandomStrategy(rng);
    EXPECT_EQ(a == b, StrategyToText(a) == StrategyToText(b));
    EXPECT_EQ(a == b, StrategyToJson(a) == StrategyToJson(b));
  }
}

// ------------------------------------------------------------------- model

TEST(ModelConfig, Gpt2SmallParameterCountMatchesHuggingFace) {
  const ModelSpec m = Gpt2Small();
  EXPECT_EQ(m.family, "gpt2");
  EXPECT_EQ(m.n_layer, 12);
  EXPECT_EQ(m.n_head, 12);
  EXPECT_EQ(m.n_inner, 4 * 768);             // n_inner: null means the default
  EXPECT_EQ(m.ParameterCount(), 124439808);  // sum(p.numel()) of HF "gpt2"
}

TEST(ModelConfig, TrainingFlopsPerTokenOfGpt2Small) {
  const ModelSpec m = Gpt2Small();
  // 6 * (12 * (4 * 768^2 + 2 * 768 * 3072) + 50257 * 768) + 6 * 12 * 768 * 1024
  EXPECT_DOUBLE_EQ(m.TrainingFlopsPerToken(1024), 797815296.0);
}

TEST(ModelConfig, NormalizedConfigParsesBackToTheSameModel) {
  const ModelSpec m = Gpt2Small();
  absl::StatusOr<ModelSpec> again = ModelSpecFromJson("gpt2", m.ToConfigJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ToConfigJson(), m.ToConfigJson());
  EXPECT_EQ(again->ParameterCount(), m.ParameterCount());
}

TEST(ModelConfig, ErrorsNameTheField) {
  EXPECT_THAT(ParseModelConfig("gpt2", R"({"n_layer": 2, "n_embd": 64,
                                           "vocab_size": 100, "n_positions": 32})")
                  .status(),
              InvalidArgument(HasSubstr("n_head")));
  EXPECT_THAT(ParseModelConfig("gpt2", "{not json").status(), InvalidArgument(HasSubstr("JSON")));
  EXPECT_THAT(ParseModelConfig("llama", kGpt2SmallConfig).status(),
              InvalidArgument(AllOf(HasSubstr("llama"), HasSubstr("gpt2"))));
  EXPECT_THAT(ParseModelConfig("gpt2", R"({"n_layer": 2, "n_embd": 770, "n_head": 12,
                                           "vocab_size": 100, "n_positions": 32})")
                  .status(),
              InvalidArgument(AllOf(HasSubstr("n_head"), HasSubstr("770"))));
  EXPECT_THAT(ParseModelConfig("gpt2", R"({"n_layer": -2, "n_embd": 64, "n_head": 4,
                                           "vocab_size": 100, "n_positions": 32})")
                  .status(),
              InvalidArgument(HasSubstr("n_layer")));
  EXPECT_THAT(ParseModelConfig("gpt2", "[]").status(), InvalidArgument(HasSubstr("object")));
}

// Configs as transformers 5.23 writes them (config.to_json_string()), trimmed
// of keys the engine ignores.
constexpr absl::string_view kLlama2_7bConfig = R"({
  "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
  "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "head_dim": 128,
  "hidden_act": "silu", "attention_bias": false, "mlp_bias": false,
  "tie_word_embeddings": false, "attention_dropout": 0.0, "pad_token_id": null
})";

constexpr absl::string_view kMixtral8x7bConfig = R"({
  "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
  "vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "num_local_experts": 8, "num_experts_per_tok": 2,
  "sliding_window": null, "router_aux_loss_coef": 0.02, "output_router_logits": false,
  "tie_word_embeddings": false, "hidden_act": "silu"
})";

constexpr absl::string_view kBertBaseConfig = R"({
  "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
  "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
  "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
  "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
  "pad_token_id": 0, "is_decoder": false, "tie_word_embeddings": true
})";

ModelSpec Parsed(absl::string_view family, absl::string_view config) {
  absl::StatusOr<ModelSpec> m = ParseModelConfig(family, config);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.value_or(ModelSpec{});
}

// `base` with `changes` merged in (null erases a key).
std::string Edited(absl::string_view base, const nlohmann::json& changes) {
  nlohmann::json j = nlohmann::json::parse(base);
  for (const auto& [key, value] : changes.items()) {
    if (value.is_null()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
  }
  return j.dump();
}

TEST(ModelConfig, KnownFamilies) {
  EXPECT_THAT(KnownModelFamilies(),
              ElementsAre("gpt2", "llama", "bert", "mixtral", "mistral", "qwen2", "qwen3", "phi3",
                          "gemma", "gemma2", "torchscript"));
  for (const std::string& name : KnownModelFamilies()) {
    absl::StatusOr<const ModelFamilyInfo*> f = ParseModelFamily(name);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->name, name);
  }
  // An unknown family says which exist and what to do instead.
  EXPECT_THAT(ParseModelFamily("t5").status(),
              InvalidArgument(AllOf(HasSubstr("'t5'"),
                                    HasSubstr("gpt2, llama, bert, mixtral, mistral, qwen2, qwen3, "
                                              "phi3, gemma, gemma2, torchscript"),
                                    HasSubstr("--model torchscript"))));
}

TEST(ModelConfig, LlamaReadsTransformersKeys) {
  const ModelSpec m = Parsed("llama", kLlama2_7bConfig);
  EXPECT_EQ(m.family, "llama");
  EXPECT_EQ(m.n_layer, 32);
  EXPECT_EQ(m.n_embd, 4096);
  EXPECT_EQ(m.n_head, 32);
  EXPECT_EQ(m.n_kv_head, 32);
  EXPECT_EQ(m.n_inner, 11008);
  EXPECT_EQ(m.n_positions, 4096);
  EXPECT_DOUBLE_EQ(m.layer_norm_epsilon, 1e-5);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_TRUE(m.IsCausal());
  EXPECT_EQ(m.MaxPositionsKey(), "max_position_embeddings");
  // transformers' num_parameters() of LlamaForCausalLM for this config.
  EXPECT_EQ(m.ParameterCount(), 6738415616);
}

TEST(ModelConfig, LlamaDefaultsFollowTransformers) {
  // No num_key_value_heads: one per attention head; no rope settings: theta
  // 10000; no rms_norm_eps: 1e-6.
  const ModelSpec m = Parsed("llama", Edited(kLlama2_7bConfig, {{"num_key_value_heads", nullptr},
                                                                {"rope_parameters", nullptr},
                                                                {"rms_norm_eps", nullptr},
                                                                {"tie_word_embeddings", nullptr}}));
  EXPECT_EQ(m.n_kv_head, 32);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(m.layer_norm_epsilon, 1e-6);
  EXPECT_FALSE(m.tie_word_embeddings);
  // transformers 4 spelled the base at the top level.
  EXPECT_DOUBLE_EQ(Parsed("llama", Edited(kLlama2_7bConfig,
                                          {{"rope_parameters", nullptr}, {"rope_theta", 500000.0}}))
                       .rope_theta,
                   500000.0);
  // MixtralConfig's default is 8 key/value heads; an explicit null means one
  // per attention head.
  EXPECT_EQ(
      Parsed("mixtral", Edited(kMixtral8x7bConfig, {{"num_key_value_heads", nullptr}})).n_kv_head,
      8);
  EXPECT_EQ(Parsed("mixtral",
                   R"({"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": null,
                       "vocab_size": 100, "max_position_embeddings": 32,
                       "num_local_experts": 4, "num_experts_per_tok": 2})")
                .n_kv_head,
            4);
  EXPECT_DOUBLE_EQ(
      Parsed("mixtral", Edited(kMixtral8x7bConfig, {{"rope_theta", nullptr}})).rope_theta, 1e6);
}

TEST(ModelConfig, ParameterCountsMatchTransformers) {
  // Each number is num_parameters() of the transformers model built from the
  // same config (on the meta device: no weights, no download).
  EXPECT_EQ(Parsed("mixtral", kMixtral8x7bConfig).ParameterCount(), 46702792704);
  EXPECT_EQ(Parsed("bert", kBertBaseConfig).ParameterCount(), 109514298);  // BertForMaskedLM
  // TinyLlama-1.1B: grouped-query attention (4 key/value heads).
  EXPECT_EQ(Parsed("llama", Edited(kLlama2_7bConfig, {{"hidden_size", 2048},
                                                      {"intermediate_size", 5632},
                                                      {"num_hidden_layers", 22},
                                                      {"num_key_value_heads", 4},
                                                      {"head_dim", 64}}))
                .ParameterCount(),
            1100048384);
  // Llama-3.2-1B shape: tied embeddings count once.
  EXPECT_EQ(Parsed("llama", Edited(kLlama2_7bConfig, {{"hidden_size", 2048},
                                                      {"intermediate_size", 8192},
                                                      {"num_hidden_layers", 16},
                                                      {"num_key_value_heads", 8},
                                                      {"head_dim", 64},
                                                      {"vocab_size", 128256},
                                                      {"tie_word_embeddings", true}}))
                .ParameterCount(),
            1235814400);
}

TEST(ModelConfig, MixtralAndBertReadTheirKeys) {
  const ModelSpec mixtral = Parsed("mixtral", kMixtral8x7bConfig);
  EXPECT_EQ(mixtral.num_local_experts, 8);
  EXPECT_EQ(mixtral.num_experts_per_tok, 2);
  EXPECT_EQ(mixtral.n_kv_head, 8);
  EXPECT_DOUBLE_EQ(mixtral.rope_theta, 1e6);
  const ModelSpec bert = Parsed("bert", kBertBaseConfig);
  EXPECT_EQ(bert.n_layer, 12);
  EXPECT_EQ(bert.n_inner, 3072);
  EXPECT_EQ(bert.type_vocab_size, 2);
  EXPECT_DOUBLE_EQ(bert.layer_norm_epsilon, 1e-12);
  EXPECT_FALSE(bert.IsCausal());
}

TEST(ModelConfig, TrainingFlopsPerTokenOfEachFamily) {
  const double T = 2048;
  // Llama-2-7B: 6 * (32 * (2 * 4096^2 + 2 * 4096 * 4096 + 3 * 4096 * 11008) + 32000 * 4096)
  //             + 6 * 32 * 4096 * 2048 (causal attention)
  const ModelSpec llama = Parsed("llama", kLlama2_7bConfig);
  EXPECT_DOUBLE_EQ(llama.TrainingFlopsPerToken(2048),
                   6.0 * (32.0 * (4 * 4096.0 * 4096 + 3 * 4096.0 * 11008) + 32000.0 * 4096) +
                       6.0 * 32 * 4096 * T);
  // Mixtral counts the router and only the 2 experts a token uses, not all 8:
  // FLOPs are those of ~13B active parameters, not 47B.
  const ModelSpec mixtral = Parsed("mixtral", kMixtral8x7bConfig);
  const double d = 4096, kv = 8 * 128, f = 14336;
  EXPECT_DOUBLE_EQ(
      mixtral.TrainingFlopsPerToken(2048),
      6.0 * (32 * (2 * d * d + 2 * d * kv + d * 8 + 2 * 3 * d * f) + 32000 * d) + 6.0 * 32 * d * T);
  ModelSpec more_experts = mixtral;
  more_experts.num_local_experts = 64;  // same top-2: only the router grows
  EXPECT_DOUBLE_EQ(more_experts.TrainingFlopsPerToken(2048) - mixtral.TrainingFlopsPerToken(2048),
                   6.0 * 32 * d * (64 - 8));
  // BERT attends both ways: the full score matrix counts (12, not 6), and
  // the MLM transform is a matmul too.
  const ModelSpec bert = Parsed("bert", kBertBaseConfig);
  EXPECT_DOUBLE_EQ(bert.TrainingFlopsPerToken(512),
                   6.0 * (12 * (4 * 768.0 * 768 + 2 * 768.0 * 3072) + 768.0 * 768 + 30522.0 * 768) +
                       12.0 * 12 * 768 * 512);
}

TEST(ModelConfig, EveryFamilyRoundTripsThroughItsNormalizedConfig) {
  ModelSpec tied = Parsed("llama", kLlama2_7bConfig);
  tied.tie_word_embeddings = true;
  tied.n_kv_head = 8;
  tied.rope_theta = 500000.0;
  for (const ModelSpec& m :
       {Gpt2Small(), Parsed("llama", kLlama2_7bConfig), tied, Parsed("mixtral", kMixtral8x7bConfig),
        Parsed("bert", kBertBaseConfig)}) {
    const nlohmann::json j = m.ToConfigJson();
    EXPECT_EQ(j.at("model_type"), m.family);
    absl::StatusOr<ModelSpec> again = ModelSpecFromJson(m.family, j);
    ASSERT_TRUE(again.ok()) << m.family << ": " << again.status();
    EXPECT_EQ(again->ToConfigJson(), j) << m.family;
    EXPECT_EQ(again->ParameterCount(), m.ParameterCount()) << m.family;
    EXPECT_EQ(again->TrainingFlopsPerToken(128), m.TrainingFlopsPerToken(128)) << m.family;
    EXPECT_EQ(again->n_kv_head, m.n_kv_head) << m.family;
    EXPECT_EQ(again->rope_theta, m.rope_theta) << m.family;
    EXPECT_EQ(again->tie_word_embeddings, m.tie_word_embeddings) << m.family;
    EXPECT_EQ(again->type_vocab_size, m.type_vocab_size) << m.family;
    EXPECT_EQ(again->num_local_experts, m.num_local_experts) << m.family;
    EXPECT_EQ(again->num_experts_per_tok, m.num_experts_per_tok) << m.family;
  }
}

TEST(ModelConfig, FamilyErrorsNameTheField) {
  auto llama = [](const nlohmann::json& changes) {
    return ParseModelConfig("llama", Edited(kLlama2_7bConfig, changes)).status();
  };
  EXPECT_THAT(llama({{"num_key_value_heads", 5}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_key_value_heads"),
                                    HasSubstr("must divide num_attention_heads (32)"))));
  EXPECT_THAT(llama({{"hidden_size", nullptr}}),
              InvalidArgument(HasSubstr("model_config.hidden_size: missing")));
  EXPECT_THAT(llama({{"hidden_act", "relu"}}),
              InvalidArgument(HasSubstr("model_config.hidden_act")));
  EXPECT_THAT(llama({{"head_dim", 0}}), InvalidArgument(HasSubstr("model_config.head_dim")));
  EXPECT_THAT(llama({{"head_dim", 3}}),  // an odd head size has no rotary pairs
              InvalidArgument(AllOf(HasSubstr("model_config.head_dim"), HasSubstr("even"))));
  EXPECT_THAT(llama({{"attention_bias", 1}}),
              InvalidArgument(HasSubstr("model_config.attention_bias")));
  EXPECT_THAT(llama({{"rope_parameters", {{"rope_type", "yarn"}, {"factor", 8.0}}}}),
              InvalidArgument(
                  AllOf(HasSubstr("model_config.rope_parameters.rope_type"), HasSubstr("yarn"))));
  EXPECT_THAT(llama({{"rope_parameters", {{"rope_type", "llama3"}, {"factor", 8.0}}}}),
              InvalidArgument(HasSubstr("model_config.rope_parameters.low_freq_factor: missing")));
  EXPECT_THAT(llama({{"rope_theta", -1}}), InvalidArgument(HasSubstr("model_config.rope_theta")));
  EXPECT_THAT(llama({{"tie_word_embeddings", "yes"}}),
              InvalidArgument(HasSubstr("model_config.tie_word_embeddings")));
  EXPECT_THAT(llama({{"num_attention_heads", 4096}, {"head_dim", nullptr}}),  // head size 1
              InvalidArgument(HasSubstr("must be even")));
  EXPECT_THAT(ParseModelConfig("llama", kMixtral8x7bConfig).status(),
              InvalidArgument(AllOf(HasSubstr("model_config.model_type"), HasSubstr("mixtral"),
                                    HasSubstr("llama"))));

  auto mixtral = [](const nlohmann::json& changes) {
    return ParseModelConfig("mixtral", Edited(kMixtral8x7bConfig, changes)).status();
  };
  EXPECT_THAT(mixtral({{"num_experts_per_tok", 9}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_experts_per_tok"),
                                    HasSubstr("num_local_experts = 8"))));
  EXPECT_THAT(mixtral({{"num_local_experts", nullptr}}),
              InvalidArgument(HasSubstr("model_config.num_local_experts: missing")));
  EXPECT_THAT(mixtral({{"sliding_window", -1}}),
              InvalidArgument(HasSubstr("model_config.sliding_window")));

  auto bert = [](const nlohmann::json& changes) {
    return ParseModelConfig("bert", Edited(kBertBaseConfig, changes)).status();
  };
  EXPECT_THAT(bert({{"type_vocab_size", 0}}),
              InvalidArgument(HasSubstr("model_config.type_vocab_size")));
  EXPECT_THAT(bert({{"num_attention_heads", 7}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_attention_heads"),
                                    HasSubstr("hidden_size (768)"))));
  EXPECT_THAT(bert({{"position_embedding_type", "relative_key"}}),
              InvalidArgument(HasSubstr("model_config.position_embedding_type")));
  EXPECT_THAT(bert({{"tie_word_embeddings", false}}),
              InvalidArgument(HasSubstr("model_config.tie_word_embeddings")));
  EXPECT_THAT(bert({{"layer_norm_eps", 0}}),
              InvalidArgument(HasSubstr("model_config.layer_norm_eps")));

  // A spec built by hand gets the same checks.
  ModelSpec m = Parsed("llama", kLlama2_7bConfig);
  m.n_kv_head = 0;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("num_key_value_heads")));
  m.family = "gpt3";
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("gpt3")));
  EXPECT_THAT(Gpt2Small().Validate(), IsOk());
}

// Configs of today's common decoders as transformers 5.23 writes them
// (Qwen2Config(...).to_json_string() with the sizes of the hub's
// Qwen2.5-7B, Qwen3-8B, Mistral-7B-v0.1, Phi-3-mini-4k, gemma-2-9b,
// gemma-7b and Llama-3.1-8B), trimmed of token ids, dropout and layer_types
// (left to their defaults). Next to each: num_parameters() of the
// transformers model of the same config (built on the meta device).
constexpr absl::string_view kQwen2_7bConfig = R"({
  "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
  "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2",
  "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "sliding_window": null, "tie_word_embeddings": false, "use_sliding_window": false,
  "vocab_size": 152064})";
constexpr int64_t kQwen2_7bParameters = 7615616512;

constexpr absl::string_view kQwen3_8bConfig = R"({
  "attention_bias": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 28,
  "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "sliding_window": null,
  "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936})";
constexpr int64_t kQwen3_8bParameters = 8190735360;

constexpr absl::string_view kMistral7bConfig = R"({
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 4096,
  "tie_word_embeddings": false, "vocab_size": 32000})";
constexpr int64_t kMistral7bParameters = 7241732096;

constexpr absl::string_view kPhi3MiniConfig = R"({
  "embd_pdrop": 0.0, "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192,
  "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
  "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
  "rope_parameters": {"partial_rotary_factor": 1.0, "rope_theta": 10000.0, "rope_type": "default"},
  "sliding_window": 2047, "tie_word_embeddings": false, "vocab_size": 32064})";
constexpr int64_t kPhi3MiniParameters = 3821079552;

constexpr absl::string_view kGemma2_9bConfig = R"({
  "attention_bias": false, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
  "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
  "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2",
  "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 4096,
  "tie_word_embeddings": true, "use_bidirectional_attention": null, "vocab_size": 256000})";
constexpr int64_t kGemma2_9bParameters = 9241705984;

constexpr absl::string_view kGemma7bConfig = R"({
  "attention_bias": false, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
  "hidden_size": 3072, "intermediate_size": 24576, "max_position_embeddings": 8192,
  "model_type": "gemma", "num_attention_heads": 16, "num_hidden_layers": 28,
  "num_key_value_heads": 16, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
  "tie_word_embeddings": true, "use_bidirectional_attention": null, "vocab_size": 256000})";
constexpr int64_t kGemma7bParameters = 8537680896;

constexpr absl::string_view kLlama31_8bConfig = R"({
  "attention_bias": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 8192, "rope_theta": 500000.0,
                      "rope_type": "llama3"},
  "tie_word_embeddings": false, "vocab_size": 128256})";
constexpr int64_t kLlama31_8bParameters = 8030261248;

TEST(ModelConfig, TodaysDecodersAreAcceptedAndCountedAsTransformersDoes) {
  const struct {
    absl::string_view family;
    absl::string_view config;
    int64_t parameters;
  } cases[] = {{"qwen2", kQwen2_7bConfig, kQwen2_7bParameters},
               {"qwen3", kQwen3_8bConfig, kQwen3_8bParameters},
               {"mistral", kMistral7bConfig, kMistral7bParameters},
               {"phi3", kPhi3MiniConfig, kPhi3MiniParameters},
               {"gemma2", kGemma2_9bConfig, kGemma2_9bParameters},
               {"gemma", kGemma7bConfig, kGemma7bParameters},
               {"llama", kLlama31_8bConfig, kLlama31_8bParameters}};
  for (const auto& c : cases) {
    absl::StatusOr<ModelSpec> m = ParseModelConfig(c.family, c.config);
    ASSERT_THAT(m, IsOk()) << c.family;
    EXPECT_EQ(m->ParameterCount(), c.parameters) << c.family;
    EXPECT_TRUE(m->IsDecoder());
    EXPECT_TRUE(m->IsCausal());
  }
}

TEST(ModelConfig, DecoderFeaturesAreReadFromEachFamilysKeys) {
  const ModelSpec qwen2 = Parsed("qwen2", kQwen2_7bConfig);
  EXPECT_TRUE(qwen2.Info().qkv_bias);  // q, k, v biases with no key saying so
  EXPECT_FALSE(qwen2.attention_bias);  // (no o bias)
  EXPECT_EQ(qwen2.n_kv_head, 4);
  EXPECT_EQ(qwen2.sliding_window, 0);  // use_sliding_window false
  EXPECT_DOUBLE_EQ(qwen2.rope_theta, 1e6);

  const ModelSpec qwen3 = Parsed("qwen3", kQwen3_8bConfig);
  EXPECT_TRUE(qwen3.Info().qk_norm);
  EXPECT_EQ(qwen3.HeadDim(), 128);
  // Qwen3Config's head_dim default is 128 whatever the width: a config
  // without the key keeps it, and a narrower model then has a query width
  // (32 x 128) that is not its hidden size.
  const ModelSpec narrow =
      Parsed("qwen3", Edited(kQwen3_8bConfig, {{"head_dim", nullptr}, {"hidden_size", 2048}}));
  EXPECT_EQ(narrow.HeadDim(), 128);
  EXPECT_EQ(narrow.head_dim, 128);

  const ModelSpec gemma2 = Parsed("gemma2", kGemma2_9bConfig);
  EXPECT_EQ(gemma2.HeadDim(), 256);
  EXPECT_EQ(gemma2.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(gemma2.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(gemma2.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(gemma2.final_logit_softcapping, 30.0);
  EXPECT_DOUBLE_EQ(gemma2.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(gemma2.sliding_window, 4096);
  // layer_types absent: sliding, full, sliding, ... (Gemma2Config's default).
  EXPECT_TRUE(gemma2.SlidingLayer(0));
  EXPECT_FALSE(gemma2.SlidingLayer(1));
  EXPECT_TRUE(gemma2.SlidingLayer(40));
  // Absent keys take Gemma2Config's defaults, not "none".
  const ModelSpec bare =
      Parsed("gemma2", Edited(kGemma2_9bConfig, {{"attn_logit_softcapping", nullptr},
                                                 {"final_logit_softcapping", nullptr},
                                                 {"query_pre_attn_scalar", nullptr},
                                                 {"sliding_window", nullptr},
                                                 {"head_dim", nullptr},
                                                 {"tie_word_embeddings", nullptr}}));
  EXPECT_DOUBLE_EQ(bare.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(bare.final_logit_softcapping, 30.0);
  EXPECT_EQ(bare.sliding_window, 4096);
  EXPECT_EQ(bare.HeadDim(), 256);
  EXPECT_TRUE(bare.tie_word_embeddings);
  // An explicit null turns soft-capping off.
  nlohmann::json uncapped = nlohmann::json::parse(kGemma2_9bConfig);
  uncapped["attn_logit_softcapping"] = nullptr;
  absl::StatusOr<ModelSpec> off = ModelSpecFromJson("gemma2", uncapped);
  ASSERT_THAT(off, IsOk());
  EXPECT_EQ(off->attn_logit_softcapping, 0);
  EXPECT_DOUBLE_EQ(off->final_logit_softcapping, 30.0);

  const ModelSpec gemma = Parsed("gemma", Edited(kGemma7bConfig, {{"hidden_act", "gelu"}}));
  EXPECT_EQ(gemma.hidden_act, "gelu_pytorch_tanh");  // GemmaConfig's reading of "gelu"
  EXPECT_EQ(gemma.HeadDim() * gemma.n_head, 4096);   // wider than hidden_size 3072

  const ModelSpec mistral = Parsed("mistral", kMistral7bConfig);
  EXPECT_EQ(mistral.sliding_window, 4096);
  EXPECT_TRUE(mistral.SlidingLayer(0));
  EXPECT_TRUE(mistral.SlidingLayer(31));
  EXPECT_EQ(
      Parsed("mistral", Edited(kMistral7bConfig, {{"sliding_window", nullptr}})).sliding_window,
      4096);  // absent: MistralConfig's 4096

  const ModelSpec phi3 = Parsed("phi3", kPhi3MiniConfig);
  EXPECT_TRUE(phi3.Info().fused_projections);
  EXPECT_EQ(phi3.sliding_window, 2047);
  EXPECT_DOUBLE_EQ(
      Parsed("phi3",
             Edited(kPhi3MiniConfig,
                    {{"rope_parameters", {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}}))
          .partial_rotary_factor,
      0.5);
}

TEST(ModelConfig, QwenSlidingLayersFollowUseSlidingWindowAndMaxWindowLayers) {
  const ModelSpec m = Parsed("qwen2", Edited(kQwen2_7bConfig, {{"use_sliding_window", true},
                                                               {"sliding_window", 4096},
                                                               {"max_window_layers", 20}}));
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_FALSE(m.SlidingLayer(19));
  EXPECT_TRUE(m.SlidingLayer(20));
  EXPECT_TRUE(m.SlidingLayer(27));
  // Every layer at or past max_window_layers: none slides.
  EXPECT_EQ(Parsed("qwen2", Edited(kQwen2_7bConfig,
                                   {{"use_sliding_window", true}, {"sliding_window", 4096}}))
                .sliding_window,
            0);
  // layer_types that slide need the window turned on.
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 28; ++i) types.push_back(i < 2 ? "sliding_attention" : "full_attention");
  EXPECT_THAT(ParseModelConfig("qwen2", Edited(kQwen2_7bConfig, {{"layer_types", types}})).status(),
              InvalidArgument(
                  AllOf(HasSubstr("model_config.layer_types"), HasSubstr("use_sliding_window"))));
}

TEST(ModelConfig, Llama31RopeScalingIsReadInBothTransformersForms) {
  const ModelSpec v5 = Parsed("llama", kLlama31_8bConfig);
  EXPECT_EQ(v5.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(v5.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(v5.rope_factor, 8.0);
  EXPECT_DOUBLE_EQ(v5.rope_low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(v5.rope_high_freq_factor, 4.0);
  EXPECT_EQ(v5.rope_original_max_positions, 8192);
  // transformers 4: rope_theta at the top level, rope_scaling beside it.
  const ModelSpec v4 =
      Parsed("llama", Edited(kLlama31_8bConfig, {{"rope_parameters", nullptr},
                                                 {"rope_theta", 500000.0},
                                                 {"rope_scaling",
                                                  {{"rope_type", "llama3"},
                                                   {"factor", 8.0},
                                                   {"low_freq_factor", 1.0},
                                                   {"high_freq_factor", 4.0},
                                                   {"original_max_position_embeddings", 8192}}}}));
  EXPECT_EQ(v4.ToConfigJson(), v5.ToConfigJson());
  // Without the pretraining length: max_position_embeddings, as transformers.
  nlohmann::json rope = nlohmann::json::parse(kLlama31_8bConfig)["rope_parameters"];
  rope.erase("original_max_position_embeddings");
  EXPECT_EQ(Parsed("llama", Edited(kLlama31_8bConfig, {{"rope_parameters", rope}}))
                .rope_original_max_positions,
            131072);
  EXPECT_THAT(
      ParseModelConfig(
          "llama", Edited(kLlama31_8bConfig, {{"rope_parameters", {{"rope_type", "longrope"}}}}))
          .status(),
      InvalidArgument(AllOf(HasSubstr("model_config.rope_parameters.rope_type"),
                            HasSubstr("longrope"), HasSubstr("allowed: default, linear, llama3"))));
}

TEST(ModelConfig, TrainingFlopsUseTheAttentionWidthAndSlidingWindows) {
  // gemma-7b: 16 heads of 256 = 4096-wide attention on a 3072-wide model.
  const ModelSpec gemma = Parsed("gemma", kGemma7bConfig);
  const double d = 3072, A = 4096, L = 28, f = 24576, V = 256000, S = 4096;
  EXPECT_DOUBLE_EQ(gemma.TrainingFlopsPerToken(4096),
                   6.0 * (L * (2 * d * A + 2 * d * A + 3 * d * f) + V * d) + 6.0 * L * A * S);
  // mistral-7b at 8192 tokens with its 4096 window: each query attends to
  // W - W^2 / 2S = 3072 keys on average, not S / 2 = 4096.
  const ModelSpec mistral = Parsed("mistral", kMistral7bConfig);
  EXPECT_DOUBLE_EQ(mistral.AttendedKeys(0, 8192), 3072.0);
  EXPECT_DOUBLE_EQ(mistral.AttendedKeys(0, 4096), 2048.0);  // the window covers it all
  ModelSpec full = mistral;
  full.sliding_window = 0;
  EXPECT_DOUBLE_EQ(full.TrainingFlopsPerToken(8192) - mistral.TrainingFlopsPerToken(8192),
                   12.0 * 4096 * 32 * (4096 - 3072));
  // gemma2: only its sliding (even) layers are shortened.
  const ModelSpec gemma2 = Parsed("gemma2", kGemma2_9bConfig);
  EXPECT_DOUBLE_EQ(gemma2.AttendedKeys(0, 8192), 3072.0);
  EXPECT_DOUBLE_EQ(gemma2.AttendedKeys(1, 8192), 4096.0);
}

TEST(ModelConfig, ActivationMemoryFollowsTheAttentionWidth) {
  // gemma-7b's attention is 16 x 256 = 4096 wide on a 3072-wide model: its
  // Q, K, V and projection input (Korthikanti's 8 units of s*b*h) are 4/3
  // as big as with 192-wide heads, the rest of the layer unchanged.
  const ModelSpec wide = Parsed("gemma", kGemma7bConfig);
  ModelSpec narrow = wide;
  narrow.head_dim = 0;  // 3072 / 16 = 192
  const Strategy s = MakeStrategy(1, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const double sbh = 1024.0 * 1 * 3072;
  EXPECT_NEAR(double(EstimateMemory(wide, 1024, s).activations -
                     EstimateMemory(narrow, 1024, s).activations),
              28 * sbh * 8 * (4096.0 / 3072 - 1), 64);
}

TEST(ModelConfig, NewFamiliesRoundTripThroughTheirNormalizedConfig) {
  ModelSpec bias_llama =
      Parsed("llama", Edited(kLlama2_7bConfig, {{"attention_bias", true}, {"mlp_bias", true}}));
  ModelSpec sliding_qwen = Parsed("qwen2", Edited(kQwen2_7bConfig, {{"use_sliding_window", true},
                                                                    {"sliding_window", 1024},
                                                                    {"max_window_layers", 3}}));
  ModelSpec gemma2_off = Parsed("gemma2", Edited(kGemma2_9bConfig, {{"sliding_window", nullptr}}));
  gemma2_off.sliding_window = 0;
  gemma2_off.attn_logit_softcapping = 0;
  gemma2_off.final_logit_softcapping = 0;
  gemma2_off.query_pre_attn_scalar = 224;
  ModelSpec qwen3_wide = Parsed("qwen3", kQwen3_8bConfig);
  qwen3_wide.head_dim = 64;
  ModelSpec phi3_partial = Parsed("phi3", kPhi3MiniConfig);
  phi3_partial.partial_rotary_factor = 0.5;
  phi3_partial.sliding_window = 0;
  for (const ModelSpec& m : {Parsed("qwen2", kQwen2_7bConfig), Parsed("qwen3", kQwen3_8bConfig),
                             Parsed("mistral", kMistral7bConfig), Parsed("phi3", kPhi3MiniConfig),
                             Parsed("gemma2", kGemma2_9bConfig), Parsed("gemma", kGemma7bConfig),
                             Parsed("llama", kLlama31_8bConfig), bias_llama, sliding_qwen,
                             gemma2_off, qwen3_wide, phi3_partial}) {
    ASSERT_THAT(m.Validate(), IsOk()) << m.family;
    const nlohmann::json j = m.ToConfigJson();
    absl::StatusOr<ModelSpec> again = ModelSpecFromJson(m.family, j);
    ASSERT_THAT(again, IsOk()) << j.dump();
    EXPECT_EQ(again->ToConfigJson(), j) << m.family;
    EXPECT_EQ(again->ParameterCount(), m.ParameterCount()) << j.dump();
    EXPECT_EQ(again->TrainingFlopsPerToken(4096), m.TrainingFlopsPerToken(4096)) << j.dump();
    EXPECT_EQ(again->HeadDim(), m.HeadDim()) << j.dump();
    EXPECT_EQ(again->hidden_act, m.hidden_act) << j.dump();
    EXPECT_EQ(again->attention_bias, m.attention_bias) << j.dump();
    EXPECT_EQ(again->mlp_bias, m.mlp_bias) << j.dump();
    EXPECT_EQ(again->rope_type, m.rope_type) << j.dump();
    EXPECT_EQ(again->rope_factor, m.rope_factor) << j.dump();
    EXPECT_EQ(again->rope_original_max_positions, m.rope_original_max_positions) << j.dump();
    EXPECT_EQ(again->partial_rotary_factor, m.partial_rotary_factor) << j.dump();
    EXPECT_EQ(again->sliding_window, m.sliding_window) << j.dump();
    for (int layer = 0; layer < m.n_layer; ++layer) {
      EXPECT_EQ(again->SlidingLayer(layer), m.SlidingLayer(layer)) << j.dump() << layer;
    }
    EXPECT_EQ(again->attn_logit_softcapping, m.attn_logit_softcapping) << j.dump();
    EXPECT_EQ(again->final_logit_softcapping, m.final_logit_softcapping) << j.dump();
    EXPECT_EQ(again->query_pre_attn_scalar, m.query_pre_attn_scalar) << j.dump();
  }
  // A Llama config without the newer features normalizes as it did before
  // they existed (its strategy-database signature is unchanged).
  EXPECT_EQ(Parsed("llama", kLlama2_7bConfig).ToConfigJson(),
            nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 4096,
                "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
                "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false})"));
}

TEST(ModelConfig, AnotherFamilysConfigUnderAChangedModelTypeIsRefused) {
  // The old workaround: a qwen2 config with model_type llama would build a
  // Llama without qwen2's q/k/v biases. Its own keys give it away.
  nlohmann::json qwen = nlohmann::json::parse(kQwen2_7bConfig);
  ASSERT_THAT(ApplyOverrides({{"model_type", "llama"}}, &qwen), IsOk());
  EXPECT_THAT(
      ModelSpecFromJson("llama", qwen).status(),
      InvalidArgument(AllOf(HasSubstr("model_config.max_window_layers"),
                            HasSubstr("llama configs have no such key"), HasSubstr("qwen2"))));
  // ... and so do the transformers classes a hub config names.
  nlohmann::json named = nlohmann::json::parse(kLlama2_7bConfig);
  named["architectures"] = {"Qwen2ForCausalLM"};
  EXPECT_THAT(ModelSpecFromJson("llama", named).status(),
              InvalidArgument(AllOf(HasSubstr("model_config.architectures"),
                                    HasSubstr("'Qwen2ForCausalLM' is a qwen2 model"),
                                    HasSubstr("--model qwen2"))));
  named["architectures"] = {"LlamaForCausalLM"};
  EXPECT_THAT(ModelSpecFromJson("llama", named), IsOk());
  named["architectures"] = {"FalconForCausalLM"};
  EXPECT_THAT(ModelSpecFromJson("llama", named).status(),
              InvalidArgument(AllOf(HasSubstr("FalconForCausalLM"), HasSubstr("torchscript"))));
  // gemma2's soft-capping under model_type gemma would be dropped.
  nlohmann::json gemma2 = nlohmann::json::parse(kGemma2_9bConfig);
  gemma2["model_type"] = "gemma";
  EXPECT_THAT(ModelSpecFromJson("gemma", gemma2).status(),
              InvalidArgument(HasSubstr("model_config.attn_logit_softcapping")));
  // mistral's window under llama: refused, unless it is null (no window).
  EXPECT_THAT(
      ParseModelConfig("llama", Edited(kLlama2_7bConfig, {{"sliding_window", 4096}})).status(),
      InvalidArgument(AllOf(HasSubstr("model_config.sliding_window"), HasSubstr("mistral"))));
  nlohmann::json no_window = nlohmann::json::parse(kLlama2_7bConfig);
  no_window["sliding_window"] = nullptr;
  EXPECT_THAT(ModelSpecFromJson("llama", no_window), IsOk());
  // A model_type naming a family that does not exist says what does.
  EXPECT_THAT(
      ParseModelConfig("llama", Edited(kLlama2_7bConfig, {{"model_type", "falcon"}})).status(),
      InvalidArgument(AllOf(HasSubstr("model_config.model_type: 'falcon' is not supported"),
                            HasSubstr("supported: gpt2, llama"), HasSubstr("gemma2"),
                            HasSubstr("--model torchscript"))));
  EXPECT_THAT(
      ParseModelConfig("llama", kQwen2_7bConfig).status(),
      InvalidArgument(HasSubstr("'qwen2' does not match model 'llama' (use --model qwen2)")));
}

TEST(ModelConfig, FeaturesAFamilyDoesNotHaveAreRefusedNamingTheKey) {
  EXPECT_THAT(
      ParseModelConfig("gemma2", Edited(kGemma2_9bConfig, {{"use_bidirectional_attention", true}}))
          .status(),
      InvalidArgument(HasSubstr("model_config.use_bidirectional_attention")));
  EXPECT_THAT(
      ParseModelConfig("llama", Edited(kLlama2_7bConfig,
                                       {{"rope_parameters",
                                         {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}}))
          .status(),
      InvalidArgument(HasSubstr("model_config.partial_rotary_factor")));
  EXPECT_THAT(ParseModelConfig("qwen3", Edited(kQwen3_8bConfig, {{"hidden_act", "relu"}})).status(),
              InvalidArgument(AllOf(HasSubstr("model_config.hidden_act"), HasSubstr("relu"))));
  EXPECT_THAT(
      ParseModelConfig("gemma2", Edited(kGemma2_9bConfig, {{"layer_types", {"x"}}})).status(),
      InvalidArgument(HasSubstr("model_config.layer_types")));
  // A spec built by hand gets the same checks.
  ModelSpec m = Parsed("mistral", kMistral7bConfig);
  m.attn_logit_softcapping = 30;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("attn_logit_softcapping")));
  m = Parsed("qwen2", kQwen2_7bConfig);
  m.attention_bias = true;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("attention_bias")));
  m = Parsed("gemma2", kGemma2_9bConfig);
  m.layer_types = {"full_attention"};
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("layer_types")));
}

TEST(ModelOverrides, ParseKeyEqualsValue) {
  absl::StatusOr<std::pair<std::string, std::string>> kv = ParseOverride("n_layer=2");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(kv->first, "n_layer");
  EXPECT_EQ(kv->second, "2");
  kv = ParseOverride("activation_function=a=b");  // the first '=' splits
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->second, "a=b");
  kv = ParseOverride("name=");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->second, "");
  EXPECT_THAT(ParseOverride("n_layer").status(), InvalidArgument(HasSubstr("key=value")));
  EXPECT_THAT(ParseOverride("=2").status(), InvalidArgument(HasSubstr("key=value")));
}

TEST(ModelOverrides, ValuesAreJsonWhenTheyParseElseStrings) {
  nlohmann::json config = nlohmann::json::parse(kGpt2SmallConfig);
  ASSERT_THAT(ApplyConfigOverrides({{"n_layer", "2"},
                                    {"resid_pdrop", "0.0", /*new_key=*/true},
                                    {"activation_function", "gelu_pytorch_tanh"},
                                    {"n_inner", "null"},
                                    {"use_cache", "false", true},
                                    {"quoted", "\"2\"", true},
                                    {"list", "[1, 2]", true},
                                    {"empty", "", true}},
                                   &config),
              IsOk());
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["resid_pdrop"], 0.0);
  EXPECT_TRUE(config["resid_pdrop"].is_number_float());
  EXPECT_EQ(config["activation_function"], "gelu_pytorch_tanh");
  EXPECT_TRUE(config["n_inner"].is_null());
  EXPECT_EQ(config["use_cache"], false);
  EXPECT_EQ(config["quoted"], "2");
  EXPECT_EQ(config["list"], nlohmann::json::array({1, 2}));
  EXPECT_EQ(config["empty"], "");
  // The overridden config is what gets parsed: fewer layers.
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("gpt2", config);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->n_layer, 2);
  EXPECT_LT(m->ParameterCount(), Gpt2Small().ParameterCount());
}

TEST(ModelOverrides, DottedKeysReachNestedFieldsAndLaterOnesWin) {
  nlohmann::json config = nlohmann::json::parse(kLlama2_7bConfig);
  ASSERT_THAT(ApplyConfigOverrides({{"rope_parameters.rope_theta", "500000"},
                                    {"num_hidden_layers", "4"},
                                    {"num_hidden_layers", "2"},
                                    {"new.nested.key", "1", /*new_key=*/true}},
                                   &config),
              IsOk());
  EXPECT_EQ(config["rope_parameters"]["rope_theta"], 500000);
  EXPECT_EQ(config["rope_parameters"]["rope_type"], "default");  // siblings kept
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["new"]["nested"]["key"], 1);
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("llama", config);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->n_layer, 2);
  EXPECT_DOUBLE_EQ(m->rope_theta, 500000.0);
}

TEST(ModelOverrides, AKeyTheConfigDoesNotHaveIsRefusedNamingTheNearestUnlessMarkedNew) {
  // transformers 5 keeps rope_theta inside rope_parameters: CLI.md's old
  // example --override rope_theta=500000 would be silently ignored.
  nlohmann::json config = nlohmann::json::parse(kLlama2_7bConfig);
  const nlohmann::json original = config;
  EXPECT_THAT(ApplyOverrides({{"num_hidden_layers", "2"}, {"rope_theta", "500000"}}, &config),
              InvalidArgument(AllOf(HasSubstr("override[1]: model_config has no key 'rope_theta' "
                                              "(nearest: 'rope_parameters.rope_theta')"),
                                    HasSubstr("--override-new"))));
  EXPECT_EQ(config, original);  // nothing applied
  // A typo is answered with the key meant.
  EXPECT_THAT(ApplyOverrides({{"num_hiden_layers", "2"}}, &config),
              InvalidArgument(HasSubstr("(nearest: 'num_hidden_layers')")));
  // A missing nested key too, and a path whose parent is missing.
  EXPECT_THAT(ApplyOverrides({{"rope_parameters.factor", "8"}}, &config),
              InvalidArgument(HasSubstr("model_config has no key 'rope_parameters.factor'")));
  EXPECT_THAT(ApplyOverrides({{"rope_scaling.factor", "8"}}, &config),
              InvalidArgument(HasSubstr("no key 'rope_scaling.factor'")));
  // Marked new, it is added (with the objects on its path); an existing key
  // may be marked new too.
  ASSERT_THAT(ApplyConfigOverrides({{"rope_theta", "500000", /*new_key=*/true},
                                    {"rope_scaling.factor", "8", true},
                                    {"num_hidden_layers", "2", true}},
                                   &config),
              IsOk());
  EXPECT_EQ(config["rope_theta"], 500000);
  EXPECT_EQ(config["rope_scaling"]["factor"], 8);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  // A key that exists with a null value exists.
  nlohmann::json gpt2 = nlohmann::json::parse(kGpt2SmallConfig);
  EXPECT_THAT(ApplyOverrides({{"n_inner", "1024"}}, &gpt2), IsOk());
  // The text form, with the flag.
  absl::StatusOr<ConfigOverride> o = ParseConfigOverride("sliding_window=null", true);
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->key, "sliding_window");
  EXPECT_EQ(o->value, "null");
  EXPECT_TRUE(o->new_key);
  EXPECT_FALSE(ParseConfigOverride("a=1")->new_key);
  EXPECT_THAT(ParseConfigOverride("=1").status(), InvalidArgument(HasSubstr("key=value")));
}

TEST(ModelOverrides, BadOverridesChangeNothing) {
  const nlohmann::json original = nlohmann::json::parse(kGpt2SmallConfig);
  nlohmann::json config = original;
  EXPECT_THAT(
      ApplyOverrides({{"n_layer", "2"}, {"n_head.x", "1"}}, &config),
      InvalidArgument(AllOf(HasSubstr("override[1]"), HasSubstr("'n_head' is not an object"))));
  EXPECT_EQ(config, original);
  EXPECT_THAT(ApplyOverrides({{"", "1"}}, &config), InvalidArgument(HasSubstr("override[0]")));
  EXPECT_THAT(ApplyConfigOverrides({{"a..b", "1", /*new_key=*/true}}, &config),
              InvalidArgument(HasSubstr("empty key")));
  EXPECT_EQ(config, original);
  nlohmann::json not_object = nlohmann::json::array();
  EXPECT_THAT(ApplyOverrides({{"n_layer", "2"}}, &not_object),
              InvalidArgument(HasSubstr("object")));
}

// ------------------------------------------------------------------- space

// Default space per micro-batch size on a CPU device: precision (4) x
// attention (2) x checkpointing (none, selective@50, selective@100, full@50,
// full@100) x optimizer (2); offload=cpu needs an accelerator.
constexpr int kCpuFlagCombos = 4 * 2 * 5 * 2;

TEST(EnumerateSpace, DefaultSpaceOfGlobalBatch8) {
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(BaseRequest(8));
  ASSERT_TRUE(space.ok()) << space.status();
  // mbs {8, 4, 2, 1} x the flag combinations.
  ASSERT_THAT(*space, SizeIs(4 * kCpuFlagCombos));
  ASSERT_EQ(space->size(), 320u);
  for (const Strategy& s : *space) {
    EXPECT_EQ(s.micro_batch_size * s.grad_accum_steps, 8) << StrategyToText(s);
    EXPECT_EQ(s.offload, Offload::kNone) << StrategyToText(s);
  }
  const std::vector<std::string> texts = Texts(*space);
  EXPECT_EQ(std::set<std::string>(texts.begin(), texts.end()).size(), 320u);
  // Documented order: precision (bf16 first) > attention (sdpa first) >
  // checkpointing (least recompute first) > optimizer (fused first) > offload
  // (none first) > micro batch (largest first).
  EXPECT_THAT(
      std::vector<std::string>(texts.begin(), texts.begin() + 9),
      ElementsAre(
          "mbs=8,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
          "offload=none",
          "mbs=4,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
          "offload=none",
          "mbs=2,ga=4,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
          "offload=none",
          "mbs=1,ga=8,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
          "offload=none",
          "mbs=8,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
          "mbs=4,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
          "mbs=2,ga=4,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
          "mbs=1,ga=8,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
          "mbs=8,ga=1,precision=bf16,checkpoint=selective,ckpt_pct=50,attention=sdpa,"
          "optimizer=fused_adamw,offload=none"));
  EXPECT_EQ(texts[16],
            "mbs=8,ga=1,precision=bf16,checkpoint=selective,attention=sdpa,optimizer=fused_adamw,"
            "offload=none");
  EXPECT_EQ(texts[24],
            "mbs=8,ga=1,precision=bf16,checkpoint=full,ckpt_pct=50,attention=sdpa,"
            "optimizer=fused_adamw,offload=none");
  EXPECT_EQ(texts[32],
            "mbs=8,ga=1,precision=bf16,checkpoint=full,attention=sdpa,optimizer=fused_adamw,"
            "offload=none");
  EXPECT_EQ(texts[40],
            "mbs=8,ga=1,precision=bf16,checkpoint=none,attention=math,optimizer=fused_adamw,"
            "offload=none");
  EXPECT_EQ(texts[80],
            "mbs=8,ga=1,precision=pure_bf16,checkpoint=none,attention=sdpa,"
            "optimizer=fused_adamw,offload=none");
  EXPECT_EQ(texts[160],
            "mbs=8,ga=1,precision=fp16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
            "offload=none");
  EXPECT_EQ(texts[240],
            "mbs=8,ga=1,precision=fp32,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
            "offload=none");
  EXPECT_EQ(texts.back(),
            "mbs=1,ga=8,precision=fp32,checkpoint=full,attention=math,optimizer=adamw,"
            "offload=none");
}

TEST(EnumerateSpace, DefaultSpaceOfAnAcceleratorAlsoTriesCpuOffload) {
  SpaceRequest r = BaseRequest(8);
  r.device_is_accelerator = true;
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_THAT(*space, SizeIs(2 * 4 * kCpuFlagCombos));
  // Offload sits just outside micro batch: none for every size, then cpu.
  EXPECT_EQ(StrategyToText((*space)[3]),
            "mbs=1,ga=8,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
            "offload=none");
  EXPECT_EQ(StrategyToText((*space)[4]),
            "mbs=8,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
            "offload=cpu");
  EXPECT_EQ((*space)[8].optimizer, Optimizer::kAdamW);
  EXPECT_EQ((*space)[8].offload, Offload::kNone);
}

// The order of one dimension with every other dimension held to one value.
template <typename T>
std::vector<T> Sequence(const SpaceRequest& r, T Strategy::*field) {
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  EXPECT_TRUE(space.ok()) << space.status();
  std::vector<T> out;
  for (const Strategy& s : space.value_or(std::vector<Strategy>{})) out.push_back(s.*field);
  return out;
}

SpaceRequest OneOfEach() {
  SpaceRequest r = BaseRequest(8);
  r.device_is_accelerator = true;
  r.micro_batch_sizes = {4};
  r.precisions = {Precision::kFp32};
  r.attentions = {Attention::kSdpa};
  r.checkpointings = {Checkpointing::kNone};
  r.optimizers = {Optimizer::kAdamW};
  r.offloads = {Offload::kNone};
  return r;
}

TEST(EnumerateSpace, EachDimensionInItsPreferredOrder) {
  SpaceRequest r = OneOfEach();
  r.precisions.clear();
  EXPECT_THAT(Sequence(r, &Strategy::precision), ElementsAre(Precision::kBf16, Precision::kPureBf16,
                                                             Precision::kFp16, Precision::kFp32));
  r = OneOfEach();
  r.attentions.clear();
  EXPECT_THAT(Sequence(r, &Strategy::attention), ElementsAre(Attention::kSdpa, Attention::kMath));
  r = OneOfEach();
  r.optimizers.clear();
  EXPECT_THAT(Sequence(r, &Strategy::optimizer),
              ElementsAre(Optimizer::kFusedAdamW, Optimizer::kAdamW));
  r = OneOfEach();
  r.offloads.clear();
  EXPECT_THAT(Sequence(r, &Strategy::offload), ElementsAre(Offload::kNone, Offload::kCpu));
  r = OneOfEach();
  r.micro_batch_sizes.clear();
  EXPECT_THAT(Sequence(r, &Strategy::micro_batch_size), ElementsAre(8, 4, 2, 1));

  // Checkpointing: least recompute first.
  r = OneOfEach();
  r.checkpointings.clear();
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  std::vector<std::pair<Checkpointing, int>> checkpoints;
  for (const Strategy& s : *space) checkpoints.emplace_back(s.checkpointing, s.checkpoint_percent);
  EXPECT_THAT(
      checkpoints,
      ElementsAre(std::pair(Checkpointing::kNone, 100), std::pair(Checkpointing::kSelective, 50),
                  std::pair(Checkpointing::kSelective, 100), std::pair(Checkpointing::kFull, 50),
                  std::pair(Checkpointing::kFull, 100)));
}

TEST(EnumerateSpace, CheckpointPercentsApplyToSelectiveAndFullOnly) {
  SpaceRequest r = OneOfEach();
  r.checkpointings.clear();
  r.checkpoint_percents = {100, 25, 75, 25};  // any order, repeats collapse
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  std::vector<std::pair<Checkpointing, int>> checkpoints;
  for (const Strategy& s : *space) checkpoints.emplace_back(s.checkpointing, s.checkpoint_percent);
  EXPECT_THAT(
      checkpoints,
      ElementsAre(std::pair(Checkpointing::kNone, 100), std::pair(Checkpointing::kSelective, 25),
                  std::pair(Checkpointing::kSelective, 75),
                  std::pair(Checkpointing::kSelective, 100), std::pair(Checkpointing::kFull, 25),
                  std::pair(Checkpointing::kFull, 75), std::pair(Checkpointing::kFull, 100)));
  // Percents without a checkpointing mode that uses them change nothing.
  r.checkpointings = {Checkpointing::kNone};
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_THAT(*space, SizeIs(1));
  EXPECT_EQ(space->front().checkpoint_percent, 100);
  // Only 100: one value per mode.
  r.checkpointings.clear();
  r.checkpoint_percents = {100};
  EXPECT_THAT(EnumerateSpace(r).value_or(std::vector<Strategy>{}), SizeIs(3));
}

TEST(EnumerateSpace, EveryEnumeratorIsPartOfTheDefaultSpace) {
  SpaceRequest r = BaseRequest(2);
  r.device_is_accelerator = true;
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  std::set<Precision> precisions;
  std::set<Checkpointing> checkpointings;
  std::set<Attention> attentions;
  std::set<Optimizer> optimizers;
  std::set<Offload> offloads;
  for (const Strategy& s : *space) {
    precisions.insert(s.precision);
    checkpointings.insert(s.checkpointing);
    attentions.insert(s.attention);
    optimizers.insert(s.optimizer);
    offloads.insert(s.offload);
  }
  EXPECT_EQ(precisions.size(), AllPrecisions().size());
  EXPECT_EQ(checkpointings.size(), AllCheckpointings().size());
  EXPECT_EQ(attentions.size(), AllAttentions().size());
  EXPECT_EQ(optimizers.size(), AllOptimizers().size());
  EXPECT_EQ(offloads.size(), AllOffloads().size());
}

TEST(EnumerateSpace, OrderDoesNotDependOnTheOrderOfTheGivenLists) {
  SpaceRequest a = BaseRequest(16);
  a.device_is_accelerator = true;
  a.micro_batch_sizes = {2, 16, 4};
  a.precisions = {Precision::kFp32, Precision::kFp16, Precision::kPureBf16, Precision::kBf16};
  a.checkpointings = {Checkpointing::kFull, Checkpointing::kNone, Checkpointing::kSelective};
  a.checkpoint_percents = {100, 50, 100};
  a.attentions = {Attention::kMath, Attention::kSdpa};
  a.optimizers = {Optimizer::kAdamW, Optimizer::kFusedAdamW};
  a.offloads = {Offload::kCpu, Offload::kNone, Offload::kCpu};
  SpaceRequest b = BaseRequest(16);
  b.device_is_accelerator = true;
  b.micro_batch_sizes = {16, 4, 2, 4, 16};  // repeats collapse
  absl::StatusOr<std::vector<Strategy>> sa = EnumerateSpace(a);
  absl::StatusOr<std::vector<Strategy>> sb = EnumerateSpace(b);
  ASSERT_TRUE(sa.ok()) << sa.status();
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_THAT(*sa, SizeIs(3 * 2 * kCpuFlagCombos));
  EXPECT_EQ(Texts(*sa), Texts(*sb));
  EXPECT_EQ(sa->front().micro_batch_size, 16);
}

TEST(EnumerateSpace, RestrictingListsShrinksTheSpaceExactly) {
  const auto size_of = [](const SpaceRequest& r) -> int {
    absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
    EXPECT_TRUE(space.ok()) << space.status();
    return space.ok() ? static_cast<int>(space->size()) : -1;
  };
  SpaceRequest r = BaseRequest(8);
  EXPECT_EQ(size_of(r), 4 * 4 * 2 * 5 * 2);
  r.micro_batch_sizes = {8, 2};
  EXPECT_EQ(size_of(r), 2 * 4 * 2 * 5 * 2);
  r.precisions = {Precision::kFp32};
  EXPECT_EQ(size_of(r), 2 * 1 * 2 * 5 * 2);
  r.attentions = {Attention::kSdpa};
  EXPECT_EQ(size_of(r), 2 * 1 * 1 * 5 * 2);
  r.checkpointings = {Checkpointing::kFull};
  EXPECT_EQ(size_of(r), 2 * 1 * 1 * 2 * 2);
  r.checkpoint_percents = {100};
  EXPECT_EQ(size_of(r), 2 * 1 * 1 * 1 * 2);
  r.optimizers = {Optimizer::kAdamW};
  EXPECT_EQ(size_of(r), 2);
  r.offloads = {Offload::kNone};
  EXPECT_EQ(size_of(r), 2);
  r.micro_batch_sizes = {2};
  absl::StatusOr<std::vector<Strategy>> one = EnumerateSpace(r);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(*one, ElementsAre(MakeStrategy(2, 4, Precision::kFp32, Checkpointing::kFull,
                                             Attention::kSdpa)));
}

// A request with only data-parallel layouts: world_size ranks of one layout.
SpaceRequest DataParallelOnly(int global_batch_size, int world_size) {
  SpaceRequest r = BaseRequest(global_batch_size, world_size);
  r.tensor_parallel_sizes = {1};
  r.pipeline_parallel_sizes = {1};
  r.shardings = {Sharding::kNone};
  return r;
}

TEST(EnumerateSpace, DataParallelRanksShareTheGlobalBatch) {
  SpaceRequest r = DataParallelOnly(32, 4);
  r.shardings.clear();
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  // 8 per rank: mbs {8, 4, 2, 1}, at each of the four shardings.
  EXPECT_THAT(*space, SizeIs(4 * 4 * kCpuFlagCombos));
  for (const Strategy& s : *space) {
    EXPECT_EQ(s.data_parallel, 4) << StrategyToText(s);
    EXPECT_EQ(4 * s.micro_batch_size * s.grad_accum_steps, 32) << StrategyToText(s);
  }
  EXPECT_EQ(StrategyToText(space->front()),
            "dp=4,tp=1,pp=1,sharding=none,mbs=8,ga=1,precision=bf16,checkpoint=none,"
            "attention=sdpa,optimizer=fused_adamw,offload=none");
  EXPECT_EQ((*space)[4 * kCpuFlagCombos].sharding, Sharding::kZero1);
  EXPECT_EQ(space->back().sharding, Sharding::kFsdp);
}

// The texts of `space` without the flags every strategy of OneOfEach()-like
// requests shares.
std::vector<std::string> LayoutTexts(const std::vector<Strategy>& space) {
  std::vector<std::string> out;
  for (const std::string& text : Texts(space))
    out.push_back(text.substr(0, text.find(",precision")));
  return out;
}

std::vector<std::string> Slice(const std::vector<std::string>& v, size_t from, size_t to) {
  return std::vector<std::string>(v.begin() + std::min(from, v.size()),
                                  v.begin() + std::min(to, v.size()));
}

TEST(EnumerateSpace, LayoutsOfFourRanksInTheirPreferredOrder) {
  // GPT-2 small (12 layers, 12 heads, MLP 3072) on 4 ranks, global batch 8,
  // every other dimension held to one value.
  SpaceRequest r = OneOfEach();
  r.world_size = 4;
  r.micro_batch_sizes.clear();
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  // Layouts outermost, by tp * pp, then pp; each in one block.
  std::vector<std::tuple<int, int, int>> layouts;
  for (const Strategy& s : *space) {
    EXPECT_EQ(s.world_size(), 4) << StrategyToText(s);
    EXPECT_EQ(s.micro_batch_size * s.grad_accum_steps * s.data_parallel, 8) << StrategyToText(s);
    EXPECT_TRUE(CheckCompatible(r, s).ok()) << StrategyToText(s);
    const std::tuple<int, int, int> layout{s.data_parallel, s.tensor_parallel, s.pipeline_parallel};
    if (layouts.empty() || layouts.back() != layout) layouts.push_back(layout);
  }
  EXPECT_THAT(layouts, ElementsAre(std::tuple(4, 1, 1), std::tuple(2, 2, 1), std::tuple(2, 1, 2),
                                   std::tuple(1, 4, 1), std::tuple(1, 2, 2), std::tuple(1, 1, 4)));
  // Per layout: dp 4 (2 per rank: mbs 2, 1) x 4 shardings = 8; tp 2 (dp 2:
  // mbs 4, 2, 1) x 4 shardings x sp off/on = 24; pp 2 (dp 2) x 2 shardings
  // (none, zero1: the others do not combine with pipelines) x (1f1b at mbs
  // 4, 2, 1 + interleaved at mbs 2, 1: its ga must be a multiple of pp) =
  // 10; tp 4 (dp 1: mbs 8..1) x sp = 8; tp 2 pp 2 x sp x
  // (1f1b at 4 sizes + interleaved at 3) = 14; pp 4: 1f1b at 4 sizes = 4
  // (interleaved's 4 x 2 chunks do not divide 12 layers).
  ASSERT_THAT(*space, SizeIs(8 + 24 + 10 + 8 + 14 + 4));
  const std::vector<std::string> texts = LayoutTexts(*space);
  EXPECT_THAT(
      Slice(texts, 0, 8),
      ElementsAre(
          "dp=4,tp=1,pp=1,sharding=none,mbs=2,ga=1", "dp=4,tp=1,pp=1,sharding=none,mbs=1,ga=2",
          "dp=4,tp=1,pp=1,sharding=zero1,mbs=2,ga=1", "dp=4,tp=1,pp=1,sharding=zero1,mbs=1,ga=2",
          "dp=4,tp=1,pp=1,sharding=zero2,mbs=2,ga=1", "dp=4,tp=1,pp=1,sharding=zero2,mbs=1,ga=2",
          "dp=4,tp=1,pp=1,sharding=fsdp,mbs=2,ga=1", "dp=4,tp=1,pp=1,sharding=fsdp,mbs=1,ga=2"));
  EXPECT_THAT(Slice(texts, 8, 15), ElementsAre("dp=2,tp=2,pp=1,sharding=none,mbs=4,ga=1",
                                               "dp=2,tp=2,pp=1,sharding=none,mbs=2,ga=2",
                                               "dp=2,tp=2,pp=1,sharding=none,mbs=1,ga=4",
                                               "dp=2,tp=2,pp=1,sharding=none,sp=1,mbs=4,ga=1",
                                               "dp=2,tp=2,pp=1,sharding=none,sp=1,mbs=2,ga=2",
                                               "dp=2,tp=2,pp=1,sharding=none,sp=1,mbs=1,ga=4",
                                               "dp=2,tp=2,pp=1,sharding=zero1,mbs=4,ga=1"));
  EXPECT_THAT(Slice(texts, 32, 38),
              ElementsAre("dp=2,tp=1,pp=2,sharding=none,pp_schedule=1f1b,mbs=4,ga=1",
                          "dp=2,tp=1,pp=2,sharding=none,pp_schedule=1f1b,mbs=2,ga=2",
                          "dp=2,tp=1,pp=2,sharding=none,pp_schedule=1f1b,mbs=1,ga=4",
                          "dp=2,tp=1,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=2,ga=2",
                          "dp=2,tp=1,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=1,ga=4",
                          "dp=2,tp=1,pp=2,sharding=zero1,pp_schedule=1f1b,mbs=4,ga=1"));
  EXPECT_THAT(Slice(texts, 42, 50), ElementsAre("dp=1,tp=4,pp=1,sharding=none,mbs=8,ga=1",
                                                "dp=1,tp=4,pp=1,sharding=none,mbs=4,ga=2",
                                                "dp=1,tp=4,pp=1,sharding=none,mbs=2,ga=4",
                                                "dp=1,tp=4,pp=1,sharding=none,mbs=1,ga=8",
                                                "dp=1,tp=4,pp=1,sharding=none,sp=1,mbs=8,ga=1",
                                                "dp=1,tp=4,pp=1,sharding=none,sp=1,mbs=4,ga=2",
                                                "dp=1,tp=4,pp=1,sharding=none,sp=1,mbs=2,ga=4",
                                                "dp=1,tp=4,pp=1,sharding=none,sp=1,mbs=1,ga=8"));
  EXPECT_THAT(
      Slice(texts, 50, 68),
      ElementsAre("dp=1,tp=2,pp=2,sharding=none,pp_schedule=1f1b,mbs=8,ga=1",
                  "dp=1,tp=2,pp=2,sharding=none,pp_schedule=1f1b,mbs=4,ga=2",
                  "dp=1,tp=2,pp=2,sharding=none,pp_schedule=1f1b,mbs=2,ga=4",
                  "dp=1,tp=2,pp=2,sharding=none,pp_schedule=1f1b,mbs=1,ga=8",
                  "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=1f1b,mbs=8,ga=1",
                  "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=1f1b,mbs=4,ga=2",
                  "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=1f1b,mbs=2,ga=4",
                  "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=1f1b,mbs=1,ga=8",
                  "dp=1,tp=2,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=4,ga=2",
                  "dp=1,tp=2,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=2,ga=4",
                  "dp=1,tp=2,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=1,ga=8",
                  "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=interleaved,vpp=2,mbs=4,ga=2",
                  "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=interleaved,vpp=2,mbs=2,ga=4",
                  "dp=1,tp=2,pp=2,sharding=none,sp=1,pp_schedule=interleaved,vpp=2,mbs=1,ga=8",
                  "dp=1,tp=1,pp=4,sharding=none,pp_schedule=1f1b,mbs=8,ga=1",
                  "dp=1,tp=1,pp=4,sharding=none,pp_schedule=1f1b,mbs=4,ga=2",
                  "dp=1,tp=1,pp=4,sharding=none,pp_schedule=1f1b,mbs=2,ga=4",
                  "dp=1,tp=1,pp=4,sharding=none,pp_schedule=1f1b,mbs=1,ga=8"));
}

TEST(EnumerateSpace, LayoutsNestOutsideTheFlagsAndScheduleAndSpInsideThem) {
  // Two precisions on tp 2 x pp 2: precision changes only after every
  // schedule, sp mode and micro batch of the first precision.
  SpaceRequest r = OneOfEach();
  r.world_size = 4;
  r.tensor_parallel_sizes = {2};
  r.pipeline_parallel_sizes = {2};
  r.precisions = {Precision::kFp32, Precision::kBf16};
  r.micro_batch_sizes = {2};
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  std::vector<std::tuple<Precision, PipelineSchedule, bool>> order;
  for (const Strategy& s : *space) {
    order.emplace_back(s.precision, s.pipeline_schedule, s.sequence_parallel);
  }
  const auto k1 = PipelineSchedule::k1F1B;
  const auto kI = PipelineSchedule::kInterleaved;
  EXPECT_THAT(
      order,
      ElementsAre(std::tuple(Precision::kBf16, k1, false), std::tuple(Precision::kBf16, k1, true),
                  std::tuple(Precision::kBf16, kI, false), std::tuple(Precision::kBf16, kI, true),
                  std::tuple(Precision::kFp32, k1, false), std::tuple(Precision::kFp32, k1, true),
                  std::tuple(Precision::kFp32, kI, false), std::tuple(Precision::kFp32, kI, true)));
}

TEST(EnumerateSpace, LayoutListsNarrowTheSpace) {
  SpaceRequest r = OneOfEach();
  r.world_size = 4;
  r.micro_batch_sizes = {1};
  r.tensor_parallel_sizes = {2, 1, 2};  // any order, repeats collapse
  r.pipeline_parallel_sizes = {1};
  r.shardings = {Sharding::kZero2};
  r.sequence_parallel_modes = {true};
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  // A layout that cannot use a dimension takes its only value there.
  EXPECT_THAT(LayoutTexts(*space), ElementsAre("dp=4,tp=1,pp=1,sharding=zero2,mbs=1,ga=2",
                                               "dp=2,tp=2,pp=1,sharding=zero2,sp=1,mbs=1,ga=4"));

  r = OneOfEach();
  r.world_size = 4;
  r.micro_batch_sizes = {1};
  r.tensor_parallel_sizes = {1};
  r.pipeline_parallel_sizes = {4, 2, 3};  // 3 does not divide 4: skipped
  r.pipeline_schedules = {PipelineSchedule::kInterleaved};
  r.virtual_stages = {3, 2};
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  // 12 layers: pp 2 at vpp 2 and 3 (4 and 6 chunks); pp 4 at vpp 3 (12) only.
  EXPECT_THAT(LayoutTexts(*space),
              ElementsAre("dp=2,tp=1,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=1,ga=4",
                          "dp=2,tp=1,pp=2,sharding=none,pp_schedule=interleaved,vpp=3,mbs=1,ga=4",
                          "dp=2,tp=1,pp=2,sharding=zero1,pp_schedule=interleaved,vpp=2,mbs=1,ga=4",
                          "dp=2,tp=1,pp=2,sharding=zero1,pp_schedule=interleaved,vpp=3,mbs=1,ga=4",
                          "dp=1,tp=1,pp=4,sharding=none,pp_schedule=interleaved,vpp=3,mbs=1,ga=8"));

  // A global batch that dp 4 does not divide leaves the dp-4 layout out.
  r = OneOfEach();
  r.world_size = 4;
  r.global_batch_size = 6;
  r.micro_batch_sizes.clear();
  r.shardings = {Sharding::kNone};
  r.sequence_parallel_modes = {false};
  r.pipeline_schedules = {PipelineSchedule::k1F1B};
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  for (const Strategy& s : *space) {
    EXPECT_NE(s.data_parallel, 4) << StrategyToText(s);
    EXPECT_EQ(s.micro_batch_size * s.grad_accum_steps * s.data_parallel, 6);
  }
  EXPECT_EQ(StrategyToText(space->front()).substr(0, 40),
            "dp=2,tp=2,pp=1,sharding=none,mbs=1,ga=3,");
}

TEST(EnumerateSpace, DataParallelOnlyFamiliesGetDataParallelLayouts) {
  for (absl::string_view family : {"bert", "mixtral"}) {
    SpaceRequest r = OneOfEach();
    r.model =
        family == "bert" ? Parsed("bert", kBertBaseConfig) : Parsed("mixtral", kMixtral8x7bConfig);
    r.world_size = 4;
    r.micro_batch_sizes = {1};
    absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
    ASSERT_TRUE(space.ok()) << space.status();
    EXPECT_THAT(LayoutTexts(*space), ElementsAre("dp=4,tp=1,pp=1,sharding=none,mbs=1,ga=2",
                                                 "dp=4,tp=1,pp=1,sharding=zero1,mbs=1,ga=2",
                                                 "dp=4,tp=1,pp=1,sharding=zero2,mbs=1,ga=2",
                                                 "dp=4,tp=1,pp=1,sharding=fsdp,mbs=1,ga=2"))
        << family;
    // Nothing else is left once data parallelism is asked away.
    r.tensor_parallel_sizes = {2};
    EXPECT_THAT(
        EnumerateSpace(r).status(),
        InvalidArgument(AllOf(StartsWith("space: no compatible strategy"),
                              HasSubstr(std::string(family)), HasSubstr("data parallel only"))));
  }
}

TEST(EnumerateSpace, BadLayoutRequestsNameTheField) {
  SpaceRequest r = BaseRequest(8, 4);
  r.tensor_parallel_sizes = {2, 0};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("tensor_parallel_sizes:"), HasSubstr("positive"))));
  r = BaseRequest(8, 4);
  r.pipeline_parallel_sizes = {-1};
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("pipeline_parallel_sizes:")));
  r = BaseRequest(8, 4);
  r.tensor_parallel_sizes = {3, 8};
  EXPECT_THAT(
      EnumerateSpace(r).status(),
      InvalidArgument(StartsWith("tensor_parallel_sizes: none of (3, 8) divides world_size 4")));
  r = BaseRequest(8, 4);
  r.pipeline_parallel_sizes = {3};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(StartsWith("pipeline_parallel_sizes: none of (3) divides")));
  r = BaseRequest(8, 4);
  r.tensor_parallel_sizes = {4};
  r.pipeline_parallel_sizes = {2};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("pipeline_parallel_sizes:"), HasSubstr("(4)"),
                                    HasSubstr("(2)"), HasSubstr("world_size 4"))));
  r = BaseRequest(8, 4);
  r.virtual_stages = {2, 1};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("virtual_stages:"), HasSubstr(">= 2"))));
  r = BaseRequest(8, 4);
  r.shardings = {static_cast<Sharding>(9)};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("shardings:"), HasSubstr("zero1"))));
  r = BaseRequest(8, 4);
  r.pipeline_schedules = {static_cast<PipelineSchedule>(9)};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("pipeline_schedules:"), HasSubstr("interleaved"))));
  // Refused only when no layout's data-parallel size divides the batch.
  r = BaseRequest(6, 4);
  EXPECT_TRUE(EnumerateSpace(r).ok());
  r.pipeline_parallel_sizes = {1};
  r.tensor_parallel_sizes = {1};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(StartsWith("global_batch_size: 6 is not divisible by the "
                                         "data-parallel size of any layout")));
  r.tensor_parallel_sizes = {2, 1};
  EXPECT_TRUE(EnumerateSpace(r).ok());
  r.micro_batch_sizes = {2};  // 6 / dp 2 = 3 per rank
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("global_batch_size: not divisible by any "
                                               "micro-batch size (2)"),
                                    HasSubstr("3 (data_parallel 2)"))));
  for (const SpaceRequest& request : {r, BaseRequest(8, 4)}) {
    EXPECT_EQ(ValidateSpaceRequest(request), EnumerateSpace(request).status());
  }
}

TEST(EnumerateSpace, DefaultMicroBatchesArePowersOfTwoDividingThePerRankBatch) {
  // Brute force over many batch shapes: the default micro-batch set is
  // exactly the powers of two that divide global / world.
  for (int world : {1, 2, 3, 4}) {
    for (int per_rank = 1; per_rank <= 100; ++per_rank) {
      std::set<int> expected;
      for (int m = 1; m <= per_rank; m *= 2) {
        if (per_rank % m == 0) expected.insert(m);
      }
      absl::StatusOr<std::vector<Strategy>> space =
          EnumerateSpace(DataParallelOnly(per_rank * world, world));
      ASSERT_TRUE(space.ok()) << space.status();
      std::set<int> got;
      for (const Strategy& s : *space) {
        got.insert(s.micro_batch_size);
        EXPECT_EQ(world * s.micro_batch_size * s.grad_accum_steps, per_rank * world);
      }
      EXPECT_EQ(got, expected) << "per_rank " << per_rank << " world " << world;
      EXPECT_EQ(space->size(), expected.size() * kCpuFlagCombos);
    }
  }
}

TEST(EnumerateSpace, GivenMicroBatchesThatDoNotDivideAreSkipped) {
  SpaceRequest r = BaseRequest(12);
  r.micro_batch_sizes = {8, 3, 5};
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_THAT(*space, SizeIs(kCpuFlagCombos));
  for (const Strategy& s : *space) {
    EXPECT_EQ(s.micro_batch_size, 3);
    EXPECT_EQ(s.grad_accum_steps, 4);
  }
}

TEST(EnumerateSpace, DeviceWithoutBf16DropsBf16AndPureBf16) {
  SpaceRequest r = BaseRequest(8);
  r.device_supports_bf16 = false;
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_THAT(*space, SizeIs(4 * kCpuFlagCombos / 2));
  for (const Strategy& s : *space) EXPECT_FALSE(UsesBf16(s.precision)) << StrategyToText(s);

  r.precisions = {Precision::kBf16, Precision::kPureBf16, Precision::kFp32};
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_THAT(*space, SizeIs(4 * kCpuFlagCombos / 4));

  r.precisions = {Precision::kBf16};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("precisions:"), HasSubstr("bf16"),
                                    HasSubstr("allowed on this device: fp16, fp32"))));
  EXPECT_THAT(ValidateSpaceRequest(r), InvalidArgument(StartsWith("precisions:")));
  r.precisions = {Precision::kPureBf16, Precision::kBf16};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("precisions:"), HasSubstr("pure_bf16"))));
}

TEST(EnumerateSpace, CpuOffloadOnlyOnAnAccelerator) {
  SpaceRequest r = BaseRequest(8);
  r.offloads = {Offload::kNone, Offload::kCpu};
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_THAT(*space, SizeIs(4 * kCpuFlagCombos));
  for (const Strategy& s : *space) EXPECT_EQ(s.offload, Offload::kNone) << StrategyToText(s);

  // Asking for nothing but offload on a CPU device is a mistake worth saying.
  r.offloads = {Offload::kCpu};
  EXPECT_THAT(
      EnumerateSpace(r).status(),
      InvalidArgument(AllOf(StartsWith("offloads: only cpu requested"), HasSubstr("accelerator"),
                            HasSubstr("host memory"), HasSubstr("allowed on this device: none"))));
  EXPECT_THAT(ValidateSpaceRequest(r), InvalidArgument(StartsWith("offloads:")));

  r.device_is_accelerator = true;
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_THAT(*space, SizeIs(4 * kCpuFlagCombos));
  for (const Strategy& s : *space) EXPECT_EQ(s.offload, Offload::kCpu) << StrategyToText(s);
}

TEST(EnumerateSpace, BadRequestsNameTheField) {
  SpaceRequest r = BaseRequest(8);
  r.seq_len = 1025;  // GPT-2 small has n_positions 1024
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("seq_len:"), HasSubstr("1024"))));
  r.seq_len = 1024;
  EXPECT_TRUE(EnumerateSpace(r).ok());
  r.seq_len = 0;
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("seq_len:")));

  r = BaseRequest(0);
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("global_batch_size:")));
  r = BaseRequest(-8);
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("global_batch_size:")));
  r = DataParallelOnly(10, 4);
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("global_batch_size: 10 is not divisible"),
                                    HasSubstr("data_parallel 4"), HasSubstr("world_size 4"))));
  r = BaseRequest(8, 0);
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("world_size:")));

  r = BaseRequest(6);
  r.micro_batch_sizes = {4};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(StartsWith("global_batch_size: not divisible by any "
                                         "micro-batch size (4)")));
  r.micro_batch_sizes = {4, 5};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(HasSubstr("not divisible by any micro-batch size (4, 5)")));
  r.micro_batch_sizes = {2, 0};
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("micro_batch_sizes:")));
  r.micro_batch_sizes = {-3};
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("micro_batch_sizes:")));

  r = BaseRequest(8);
  r.precisions = {static_cast<Precision>(7)};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("precisions:"), HasSubstr("pure_bf16"))));
  r = BaseRequest(8);
  r.checkpointings = {static_cast<Checkpointing>(7)};
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("checkpointings:")));
  r = BaseRequest(8);
  r.attentions = {static_cast<Attention>(7)};
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("attentions:")));
  r = BaseRequest(8);
  r.optimizers = {static_cast<Optimizer>(7)};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("optimizers:"), HasSubstr("fused_adamw"))));
  r = BaseRequest(8);
  r.offloads = {static_cast<Offload>(7)};
  EXPECT_THAT(EnumerateSpace(r).status(), InvalidArgument(StartsWith("offloads:")));
  for (int bad : {0, -50, 101}) {
    r = BaseRequest(8);
    r.checkpoint_percents = {50, bad};
    EXPECT_THAT(EnumerateSpace(r).status(),
                InvalidArgument(AllOf(StartsWith("checkpoint_percents:"), HasSubstr("1..100"),
                                      HasSubstr(absl::StrCat(bad)))));
  }
}

TEST(EnumerateSpace, ValidateAgreesWithEnumerate) {
  std::vector<SpaceRequest> requests;
  requests.push_back(BaseRequest(8));
  requests.push_back(BaseRequest(0));
  requests.push_back(BaseRequest(6, 4));
  SpaceRequest r = BaseRequest(6);
  r.micro_batch_sizes = {4};
  requests.push_back(r);
  r.micro_batch_sizes = {0};
  requests.push_back(r);
  r = BaseRequest(8);
  r.seq_len = 4096;
  requests.push_back(r);
  r = BaseRequest(8);
  r.checkpoint_percents = {0};
  requests.push_back(r);
  r = BaseRequest(8);
  r.offloads = {Offload::kCpu};
  requests.push_back(r);
  r.device_is_accelerator = true;
  requests.push_back(r);
  r = BaseRequest(8);
  r.device_supports_bf16 = false;
  r.precisions = {Precision::kPureBf16};
  requests.push_back(r);
  r.optimizers = {static_cast<Optimizer>(5)};
  requests.push_back(r);
  for (const SpaceRequest& request : requests) {
    EXPECT_EQ(ValidateSpaceRequest(request), EnumerateSpace(request).status());
  }
}

TEST(Compatibility, RulesAreNamedAndDistinct) {
  std::vector<std::string> names;
  for (const CompatibilityRule& rule : CompatibilityRules()) {
    EXPECT_NE(rule.check, nullptr);
    names.emplace_back(rule.name);
  }
  EXPECT_THAT(names, ElementsAre("positive_sizes", "known_values", "checkpoint_percent", "layout",
                                 "layout_product", "batch_product", "bf16_device", "offload_device",
                                 "fixed_graph", "parallel_family", "attention_kernel",
                                 "tensor_parallel_model", "pipeline_layers", "pipeline_sharding",
                                 "sequence_parallel"));
}

TEST(Compatibility, PipelinesShardAtMostZero1AndSequenceSlicesMustDivide) {
  SpaceRequest r = OneOfEach();  // GPT-2 small, global batch 8
  r.world_size = 4;
  Strategy s;
  s.data_parallel = 2;
  s.pipeline_parallel = 2;
  s.micro_batch_size = 1;
  s.grad_accum_steps = 4;
  for (Sharding ok : {Sharding::kNone, Sharding::kZero1}) {
    s.sharding = ok;
    EXPECT_TRUE(CheckCompatible(r, s).ok()) << ShardingName(ok);
  }
  for (Sharding bad : {Sharding::kZero2, Sharding::kFsdp}) {
    s.sharding = bad;
    EXPECT_THAT(CheckCompatible(r, s),
                InvalidArgument(AllOf(StartsWith("strategy.sharding:"), HasSubstr("zero1"))));
  }

  Strategy sp;
  sp.data_parallel = 2;
  sp.tensor_parallel = 2;
  sp.sequence_parallel = true;
  sp.micro_batch_size = 1;
  sp.grad_accum_steps = 4;
  EXPECT_TRUE(CheckCompatible(r, sp).ok());
  r.seq_len = 127;
  EXPECT_THAT(CheckCompatible(r, sp),
              InvalidArgument(
                  AllOf(StartsWith("strategy.sequence_parallel:"), HasSubstr("seq_len (127)"))));
}

TEST(Compatibility, ExplainsWhyAStrategyCannotRun) {
  SpaceRequest r = BaseRequest(16, 2);
  const auto on_two_ranks = [](Strategy s) {
    s.data_parallel = 2;
    return s;
  };
  EXPECT_TRUE(CheckCompatible(r, on_two_ranks(MakeStrategy(4, 2, Precision::kBf16,
                                                           Checkpointing::kNone, Attention::kSdpa)))
                  .ok());
  EXPECT_THAT(
      CheckCompatible(r, on_two_ranks(MakeStrategy(4, 4, Precision::kBf16, Checkpointing::kNone,
                                                   Attention::kSdpa))),
      InvalidArgument(AllOf(StartsWith("strategy.grad_accum_steps:"),
                            HasSubstr("data_parallel (2)"), HasSubstr("global_batch_size (16)"))));
  EXPECT_THAT(
      CheckCompatible(r, on_two_ranks(MakeStrategy(0, 2, Precision::kBf16, Checkpointing::kNone,
                                                   Attention::kSdpa))),
      InvalidArgument(StartsWith("strategy.micro_batch_size:")));
  EXPECT_THAT(
      CheckCompatible(r, on_two_ranks(MakeStrategy(4, 0, Precision::kBf16, Checkpointing::kNone,
                                                   Attention::kSdpa))),
      InvalidArgument(StartsWith("strategy.grad_accum_steps:")));
  EXPECT_THAT(
      CheckCompatible(r, on_two_ranks(MakeStrategy(4, 2, static_cast<Precision>(9),
                                                   Checkpointing::kNone, Attention::kSdpa))),
      InvalidArgument(StartsWith("strategy.precision:")));
  // One rank where the request has two.
  EXPECT_THAT(CheckCompatible(
                  r, MakeStrategy(8, 2, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa)),
              InvalidArgument(AllOf(StartsWith("strategy.data_parallel:"),
                                    HasSubstr("must equal world_size (2)"))));
  r.device_supports_bf16 = false;
  EXPECT_THAT(
      CheckCompatible(r, on_two_ranks(MakeStrategy(4, 2, Precision::kBf16, Checkpointing::kNone,
                                                   Attention::kSdpa))),
      InvalidArgument(AllOf(StartsWith("strategy.precision:"), HasSubstr("bf16"))));
  EXPECT_TRUE(CheckCompatible(r, on_two_ranks(MakeStrategy(4, 2, Precision::kFp32,
                                                           Checkpointing::kNone, Attention::kSdpa)))
                  .ok());
}

TEST(Compatibility, PureBf16NeedsABf16Device) {
  SpaceRequest r = BaseRequest(8);
  const Strategy s =
      MakeStrategy(8, 1, Precision::kPureBf16, Checkpointing::kNone, Attention::kSdpa);
  EXPECT_TRUE(CheckCompatible(r, s).ok());
  r.device_supports_bf16 = false;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.precision:"), HasSubstr("pure_bf16"),
                                    HasSubstr("does not support"))));
  EXPECT_TRUE(CheckCompatible(
                  r, MakeStrategy(8, 1, Precision::kFp16, Checkpointing::kNone, Attention::kSdpa))
                  .ok());
}

TEST(Compatibility, CpuOffloadNeedsAnAccelerator) {
  SpaceRequest r = BaseRequest(8);
  Strategy s = MakeStrategy(8, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  s.offload = Offload::kCpu;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.offload:"), HasSubstr("accelerator"),
                                    HasSubstr("host memory"))));
  r.device_is_accelerator = true;
  EXPECT_TRUE(CheckCompatible(r, s).ok());
  s.offload = static_cast<Offload>(4);
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(StartsWith("strategy.offload:")));
  s.offload = Offload::kNone;
  s.optimizer = static_cast<Optimizer>(4);
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(StartsWith("strategy.optimizer:")));
}

TEST(Compatibility, CheckpointPercentIsAShareOfCheckpointedLayers) {
  SpaceRequest r = BaseRequest(8);
  Strategy s = MakeStrategy(8, 1, Precision::kBf16, Checkpointing::kSelective, Attention::kSdpa);
  for (int ok : {1, 50, 100}) {
    s.checkpoint_percent = ok;
    EXPECT_TRUE(CheckCompatible(r, s).ok()) << ok;
  }
  for (int bad : {0, -1, 101}) {
    s.checkpoint_percent = bad;
    EXPECT_THAT(
        CheckCompatible(r, s),
        InvalidArgument(AllOf(StartsWith("strategy.checkpoint_percent:"), HasSubstr("1..100"))))
        << bad;
  }
  s.checkpointing = Checkpointing::kNone;
  s.checkpoint_percent = 50;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.checkpoint_percent:"),
                                    HasSubstr("with none it must be 100"))));
  s.checkpoint_percent = 100;
  EXPECT_TRUE(CheckCompatible(r, s).ok());
}

TEST(Compatibility, HugeSizesDoNotOverflowIntoAMatch) {
  const auto data_parallel = [](int dp, int mbs, int ga) {
    Strategy s = MakeStrategy(mbs, ga, Precision::kFp32, Checkpointing::kNone, Attention::kMath);
    s.data_parallel = dp;
    return s;
  };
  SpaceRequest r = BaseRequest(INT_MAX, INT_MAX);
  // INT_MAX^3 wraps in 64 bits; it must still be rejected, not matched.
  EXPECT_THAT(CheckCompatible(r, data_parallel(INT_MAX, INT_MAX, INT_MAX)),
              InvalidArgument(StartsWith("strategy.grad_accum_steps:")));
  EXPECT_TRUE(CheckCompatible(r, data_parallel(INT_MAX, 1, 1)).ok());
  // 769546 * 494770 * 48448661 = 2^64 + 4: a wrapping product would match 4.
  r = BaseRequest(4, 769546);
  EXPECT_FALSE(CheckCompatible(r, data_parallel(769546, 494770, 48448661)).ok());
  // dp * mbs alone (2^60) already exceeds the batch.
  r = BaseRequest(1 << 30, 1 << 30);
  EXPECT_FALSE(CheckCompatible(r, data_parallel(1 << 30, 1 << 30, 1 << 30)).ok());
  // The same for the layout: 769546 * 494770 * 48448661 ranks wrap to 4.
  r = BaseRequest(4, 4);
  Strategy s = data_parallel(48448661, 1, 1);
  s.tensor_parallel = 769546;
  s.pipeline_parallel = 494770;
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(StartsWith("strategy.data_parallel:")));
  s = data_parallel(INT_MAX, 1, 1);
  s.tensor_parallel = INT_MAX;
  s.pipeline_parallel = INT_MAX;
  EXPECT_THAT(CheckCompatible(BaseRequest(INT_MAX, INT_MAX), s),
              InvalidArgument(StartsWith("strategy.data_parallel:")));
}

// The failing rule's name, or "" when every rule passes.
std::string FirstFailingRule(const SpaceRequest& r, const Strategy& s) {
  for (const CompatibilityRule& rule : CompatibilityRules()) {
    if (!rule.check(r, s).ok()) return std::string(rule.name);
  }
  return "";
}

TEST(Compatibility, LayoutRules) {
  const Strategy base =
      MakeStrategy(1, 2, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa);
  SpaceRequest r = BaseRequest(8, 4);
  // 4 ranks: dp * tp * pp must be 4, and dp * mbs * ga the batch.
  EXPECT_EQ(FirstFailingRule(r, WithLayout(base, 4, 1, 1)), "");
  EXPECT_EQ(FirstFailingRule(r, WithLayout(base, 2, 2, 1, Sharding::kFsdp)), "batch_product");
  EXPECT_EQ(FirstFailingRule(r, WithLayout(MakeStrategy(1, 4, Precision::kFp32,
                                                        Checkpointing::kNone, Attention::kSdpa),
                                           2, 2, 1, Sharding::kFsdp)),
            "");
  EXPECT_THAT(CheckCompatible(r, WithLayout(base, 2, 1, 1)),
              InvalidArgument(AllOf(StartsWith("strategy.data_parallel:"),
                                    HasSubstr("pipeline_parallel (1) must equal world_size (4)"))));
  EXPECT_EQ(FirstFailingRule(r, WithLayout(base, 2, 2, 2)), "layout_product");
  // "layout": CheckLayout, e.g. sharding with nothing to shard over.
  EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 4, 1, Sharding::kZero1)),
              InvalidArgument(StartsWith("strategy.sharding:")));
  EXPECT_EQ(FirstFailingRule(r, WithLayout(base, 1, 4, 1, Sharding::kZero1)), "layout");
  Strategy unknown = WithLayout(base, 4, 1, 1);
  unknown.sharding = static_cast<Sharding>(9);
  EXPECT_THAT(CheckCompatible(r, unknown), InvalidArgument(StartsWith("strategy.sharding:")));
  EXPECT_EQ(FirstFailingRule(r, unknown), "known_values");
}

TEST(Compatibility, TensorParallelDividesHeadsAndMlpButNotTheVocabulary) {
  const Strategy base =
      MakeStrategy(8, 1, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa);
  // GPT-2 small: 12 heads, MLP 3072, vocabulary 50257 (odd: the engine pads it).
  SpaceRequest r = BaseRequest(8, 4);
  EXPECT_TRUE(CheckCompatible(r, WithLayout(base, 1, 4, 1)).ok());
  r = BaseRequest(8, 8);
  EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 8, 1)),
              InvalidArgument(AllOf(StartsWith("strategy.tensor_parallel: 8 does not divide"),
                                    HasSubstr("attention heads (12)"))));
  EXPECT_EQ(FirstFailingRule(r, WithLayout(base, 1, 8, 1)), "tensor_parallel_model");
  r = BaseRequest(8, 4);
  r.model = Parsed("gpt2", Edited(kGpt2SmallConfig, {{"n_inner", 3002}}));
  EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 4, 1)),
              InvalidArgument(AllOf(StartsWith("strategy.tensor_parallel:"),
                                    HasSubstr("MLP inner size (3002)"))));
  EXPECT_TRUE(CheckCompatible(r, WithLayout(base, 1, 2, 2)).ok());
  // Llama: the key-value heads of grouped-query attention split too.
  r = BaseRequest(8, 8);
  r.model = Parsed("llama", Edited(kLlama2_7bConfig, {{"num_key_value_heads", 4}}));
  EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 8, 1)),
              InvalidArgument(AllOf(StartsWith("strategy.tensor_parallel:"),
                                    HasSubstr("key-value heads (4)"))));
  EXPECT_TRUE(CheckCompatible(r, WithLayout(base, 1, 4, 2)).ok());
}

TEST(Compatibility, OnlyGpt2AndLlamaSplitTheModel) {
  const Strategy base =
      MakeStrategy(8, 1, Precision::kFp32, Checkpointing::kNone, Attention::kMath);
  for (absl::string_view family : {"bert", "mixtral", "torchscript"}) {
    SpaceRequest r = BaseRequest(8, 2);
    if (family == "bert") r.model = Parsed("bert", kBertBaseConfig);
    if (family == "mixtral") r.model = Parsed("mixtral", kMixtral8x7bConfig);
    if (family == "torchscript") {
      absl::StatusOr<ModelSpec> m =
          ModelSpecFromJson("torchscript", {{"input_spec", "ids:int64[B,T]<64; labels=ids"},
                                            {"script_digest", ContentDigest("x")},
                                            {"script_bytes", 1}});
      ASSERT_TRUE(m.ok()) << m.status();
      r.model = *m;
    }
    EXPECT_THAT(
        CheckCompatible(r, WithLayout(base, 1, 2, 1)),
        InvalidArgument(AllOf(StartsWith("strategy.tensor_parallel:"),
                              HasSubstr(std::string(family)), HasSubstr("data parallel only"))))
        << family;
    EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 1, 2)),
                InvalidArgument(StartsWith("strategy.pipeline_parallel:")))
        << family;
    EXPECT_EQ(FirstFailingRule(r, WithLayout(base, 1, 1, 2)), "parallel_family") << family;
    // Data parallel with any sharding is fine.
    for (Sharding sharding : AllShardings()) {
      EXPECT_TRUE(
          CheckCompatible(r, WithLayout(MakeStrategy(4, 1, Precision::kFp32, Checkpointing::kNone,
                                                     Attention::kMath),
                                        2, 1, 1, sharding))
              .ok())
          << family << " " << ShardingName(sharding);
    }
  }
  SpaceRequest r = BaseRequest(8, 2);
  r.model = Parsed("llama", kLlama2_7bConfig);
  EXPECT_TRUE(CheckCompatible(r, WithLayout(base, 1, 2, 1)).ok());
  EXPECT_TRUE(CheckCompatible(r, WithLayout(base, 1, 1, 2)).ok());
  // The Llama-style decoders split like llama does (their rows say so).
  for (const auto& [family, config] :
       std::initializer_list<std::pair<absl::string_view, absl::string_view>>{
           {"mistral", kMistral7bConfig},
           {"qwen2", kQwen2_7bConfig},
           {"qwen3", kQwen3_8bConfig},
           {"phi3", kPhi3MiniConfig},
           {"gemma", kGemma7bConfig},
           {"gemma2", kGemma2_9bConfig}}) {
    r.model = Parsed(family, config);
    EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 2, 1)), IsOk()) << family;
    EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 1, 2)), IsOk()) << family;
  }
  // qwen2-7b's 28 heads split 7 ways, its 4 key/value heads do not.
  r = BaseRequest(8, 7);
  r.model = Parsed("qwen2", kQwen2_7bConfig);
  EXPECT_THAT(CheckCompatible(r, WithLayout(base, 1, 7, 1)),
              InvalidArgument(HasSubstr("key-value heads (4)")));
}

TEST(Compatibility, SoftCappedAttentionRunsOnTheMathKernelOnly) {
  SpaceRequest r = BaseRequest(8);
  r.model = Parsed("gemma2", kGemma2_9bConfig);
  const Strategy math =
      MakeStrategy(8, 1, Precision::kFp32, Checkpointing::kNone, Attention::kMath);
  const Strategy sdpa =
      MakeStrategy(8, 1, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa);
  EXPECT_THAT(CheckCompatible(r, math), IsOk());
  EXPECT_THAT(CheckCompatible(r, sdpa),
              InvalidArgument(
                  AllOf(StartsWith("strategy.attention:"), HasSubstr("attn_logit_softcapping"))));
  EXPECT_EQ(FirstFailingRule(r, sdpa), "attention_kernel");
  r.model.attn_logit_softcapping = 0;  // final soft-capping alone is fine for sdpa
  EXPECT_THAT(CheckCompatible(r, sdpa), IsOk());
}

TEST(Compatibility, PipelineStagesNeedLayers) {
  // GPT-2 small: 12 layers.
  const auto pipeline = [](int pp, int ga, PipelineSchedule schedule, int vpp) {
    Strategy s = WithLayout(
        MakeStrategy(96 / ga, ga, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa), 1, 1,
        pp);
    s.pipeline_schedule = schedule;
    s.virtual_stages = vpp;
    return s;
  };
  const auto check = [](int pp, const Strategy& s) {
    return CheckCompatible(BaseRequest(96, pp), s);
  };
  const auto k1 = PipelineSchedule::k1F1B;
  const auto kI = PipelineSchedule::kInterleaved;
  EXPECT_TRUE(check(12, pipeline(12, 1, k1, 1)).ok());
  EXPECT_THAT(check(16, pipeline(16, 1, k1, 1)),
              InvalidArgument(
                  AllOf(StartsWith("strategy.pipeline_parallel:"), HasSubstr("the model has 12"))));
  EXPECT_EQ(FirstFailingRule(BaseRequest(96, 16), pipeline(16, 1, k1, 1)), "pipeline_layers");
  // 1f1b takes any layer count and any number of micro-batches.
  EXPECT_TRUE(check(8, pipeline(8, 3, k1, 1)).ok());
  // Interleaved: pp * vpp chunks of equal size, micro-batches in groups of pp.
  EXPECT_TRUE(check(2, pipeline(2, 4, kI, 3)).ok());
  EXPECT_TRUE(check(4, pipeline(4, 4, kI, 3)).ok());
  EXPECT_THAT(check(4, pipeline(4, 4, kI, 4)),
              InvalidArgument(AllOf(StartsWith("strategy.virtual_stages:"),
                                    HasSubstr("16 model chunks"), HasSubstr("the model has 12"))));
  EXPECT_THAT(check(2, pipeline(2, 4, kI, 4)),
              InvalidArgument(
                  AllOf(StartsWith("strategy.virtual_stages:"), HasSubstr("= 8 equal chunks"))));
  EXPECT_THAT(check(2, pipeline(2, 3, kI, 2)),
              InvalidArgument(AllOf(StartsWith("strategy.grad_accum_steps:"),
                                    HasSubstr("grad_accum_steps (3)"),
                                    HasSubstr("pipeline_parallel (2)"))));
  EXPECT_EQ(FirstFailingRule(BaseRequest(96, 2), pipeline(2, 3, kI, 2)), "pipeline_layers");
}

TEST(Compatibility, EveryEnumeratedStrategyIsCompatible) {
  for (int world : {1, 2, 4, 8}) {
    for (bool accelerator : {false, true}) {
      SpaceRequest r = BaseRequest(48 * world, world);
      r.device_supports_bf16 = (world != 2);
      r.device_is_accelerator = accelerator;
      r.checkpoint_percents = {1, 33, 100};
      absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
      ASSERT_TRUE(space.ok()) << space.status();
      for (const Strategy& s : *space) {
        EXPECT_TRUE(CheckCompatible(r, s).ok()) << StrategyToText(s);
      }
    }
  }
}

// ------------------------------------------------------------------- clock

TEST(Clock, FakeClockMovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.SetTime(absl::FromUnixSeconds(50));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(50));
}

TEST(Clock, FakeClockIsThreadSafe) {
  FakeClock clock(absl::UnixEpoch());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&clock] {
      for (int i = 0; i < 1000; ++i) {
        clock.Advance(absl::Milliseconds(1));
        (void)clock.Now();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(clock.Now(), absl::UnixEpoch() + absl::Seconds(4));
}

TEST(Clock, RealClockIsOneWallClock) {
  ASSERT_NE(RealClock(), nullptr);
  EXPECT_EQ(RealClock(), RealClock());
  const absl::Time before = absl::Now();
  const absl::Time now = RealClock()->Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, absl::Now());
}

// ---------------------------------------------------------------- searcher

std::vector<Strategy> SpaceOf(int global_batch_size) {
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(BaseRequest(global_batch_size));
  EXPECT_TRUE(space.ok()) << space.status();
  return space.value_or(std::vector<Strategy>{});
}

std::unique_ptr<Searcher> MustCreate(std::vector<Strategy> space, SearchBudget budget,
                                     const Clock* clock, int64_t memory_limit = 0) {
  absl::StatusOr<std::unique_ptr<Searcher>> s =
      CreateExhaustiveSearcher(std::move(space), budget, clock, memory_limit);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

ScoredTrial Trial(const Strategy& s, TrialStatus status, double tokens_per_second,
                  int64_t peak_memory_bytes) {
  ScoredTrial t;
  t.strategy = s;
  t.status = status;
  t.metrics.tokens_per_second = tokens_per_second;
  t.metrics.peak_memory_bytes = peak_memory_bytes;
  return t;
}

TEST(ExhaustiveSearcher, ProposesEveryStrategyOnceInOrderThenFinishes) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  std::unique_ptr<Searcher> searcher = MustCreate(space, SearchBudget{}, &clock);
  ASSERT_NE(searcher, nullptr);
  std::vector<Strategy> proposed;
  while (!searcher->Finished()) {
    std::optional<Proposal> next = searcher->Next();
    ASSERT_TRUE(next.has_value()) << "Next() empty before Finished()";
    proposed.push_back(next->strategy);
    ASSERT_LE(proposed.size(), space.size());
  }
  EXPECT_EQ(Texts(proposed), Texts(space));
  EXPECT_FALSE(searcher->Next().has_value());
  EXPECT_FALSE(searcher->Next().has_value());
  EXPECT_TRUE(searcher->Finished());
}

TEST(ExhaustiveSearcher, DuplicatesAreProposedOnce) {
  const Strategy a = MakeStrategy(2, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const Strategy b = MakeStrategy(1, 2, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  std::unique_ptr<Searcher> searcher = MustCreate({a, b, a, b, a}, SearchBudget{}, nullptr);
  ASSERT_NE(searcher, nullptr);
  std::vector<Strategy> proposed;
  while (std::optional<Proposal> next = searcher->Next()) proposed.push_back(next->strategy);
  EXPECT_THAT(proposed, ElementsAre(a, b));
  EXPECT_TRUE(searcher->Finished());
}

TEST(ExhaustiveSearcher, StopsAtMaxTrials) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  SearchBudget budget;
  budget.max_trials = 5;
  std::unique_ptr<Searcher> searcher = MustCreate(space, budget, &clock);
  ASSERT_NE(searcher, nullptr);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(searcher->Finished()) << i;
    std::optional<Proposal> next = searcher->Next();
    ASSERT_TRUE(next.has_value()) << i;
    EXPECT_EQ(next->strategy, space[i]);
  }
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());

  // A budget above the space size ends with the space.
  budget.max_trials = 1000;
  searcher = MustCreate(space, budget, &clock);
  ASSERT_NE(searcher, nullptr);
  size_t n = 0;
  while (searcher->Next()) ++n;
  EXPECT_EQ(n, space.size());
}

TEST(ExhaustiveSearcher, StopsAtTheDeadline) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  SearchBudget budget;
  budget.deadline = clock.Now() + absl::Minutes(10);
  std::unique_ptr<Searcher> searcher = MustCreate(space, budget, &clock);
  ASSERT_NE(searcher, nullptr);

  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(searcher->Next().has_value());
    clock.Advance(absl::Minutes(3));  // 9 minutes in: still before the deadline
  }
  EXPECT_FALSE(searcher->Finished());
  clock.Advance(absl::Seconds(59));
  ASSERT_TRUE(searcher->Next().has_value());
  clock.Advance(absl::Seconds(1));  // exactly at the deadline
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());
  clock.Advance(absl::Hours(1));
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());
}

TEST(ExhaustiveSearcher, DeadlineAlreadyPastProposesNothing) {
  FakeClock clock;
  SearchBudget budget;
  budget.deadline = clock.Now() - absl::Seconds(1);
  std::unique_ptr<Searcher> searcher = MustCreate(SpaceOf(8), budget, &clock);
  ASSERT_NE(searcher, nullptr);
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());

  budget.deadline = absl::InfinitePast();
  searcher = MustCreate(SpaceOf(8), budget, /*clock=*/nullptr);  // real clock
  ASSERT_NE(searcher, nullptr);
  EXPECT_FALSE(searcher->Next().has_value());
}

TEST(ExhaustiveSearcher, BestIsFastestSucceededTrialThatFits) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  constexpr int64_t kGiB = int64_t{1} << 30;
  std::unique_ptr<Searcher> searcher = MustCreate(space, SearchBudget{}, &clock, 2 * kGiB);
  ASSERT_NE(searcher, nullptr);
  EXPECT_FALSE(searcher->Best().has_value());

  std::vector<Strategy> s;
  for (int i = 0; i < 7; ++i) s.push_back(searcher->Next()->strategy);
  searcher->Report(Trial(s[0], TrialStatus::kSucceeded, 100, 1 * kGiB));
  ASSERT_TRUE(searcher->Best().has_value());
  EXPECT_EQ(searcher->Best()->strategy, s[0]);

  searcher->Report(Trial(s[1], TrialStatus::kOom, 1000, 1 * kGiB));
  searcher->Report(Trial(s[2], TrialStatus::kFailed, 900, 1 * kGiB));
  searcher->Report(Trial(s[3], TrialStatus::kTimeout, 800, 1 * kGiB));
  searcher->Report(Trial(s[4], TrialStatus::kSucceeded, 700, 2 * kGiB + 1));  // over the limit
  searcher->Report(Trial(s[5], TrialStatus::kPruned, 600, 1 * kGiB));
  EXPECT_EQ(searcher->Best()->strategy, s[0]);

  searcher->Report(Trial(s[6], TrialStatus::kSucceeded, 200, 2 * kGiB));  // exactly fits
  std::optional<ScoredTrial> best = searcher->Best();
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->strategy, s[6]);
  EXPECT_EQ(best->status, TrialStatus::kSucceeded);
  EXPECT_EQ(best->metrics.tokens_per_second, 200);
  EXPECT_EQ(best->metrics.peak_memory_bytes, 2 * kGiB);
}

TEST(ExhaustiveSearcher, WithoutMemoryLimitEverySucceededTrialCounts) {
  FakeClock clock;
  std::unique_ptr<Searcher> searcher = MustCreate(SpaceOf(8), SearchBudget{}, &clock);
  ASSERT_NE(searcher, nullptr);
  const Strategy a = searcher->Next()->strategy;
  const Strategy b = searcher->Next()->strategy;
  searcher->Report(Trial(a, TrialStatus::kSucceeded, 100, 1));
  searcher->Report(Trial(b, TrialStatus::kSucceeded, 300, int64_t{1} << 50));
  ASSERT_TRUE(searcher->Best().has_value());
  EXPECT_EQ(searcher->Best()->strategy, b);
}

TEST(SelectBest, TiesGoToLowerMemoryThenToTheEarlierTrial) {
  const Strategy a = MakeStrategy(1, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const Strategy b = MakeStrategy(1, 1, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa);
  const Strategy c = MakeStrategy(1, 1, Precision::kFp32, Checkpointing::kFull, Attention::kSdpa);
  std::optional<ScoredTrial> best = SelectBest(
      {Trial(a, TrialStatus::kSucceeded, 500, 300), Trial(b, TrialStatus::kSucceeded, 500, 200),
       Trial(c, TrialStatus::kSucceeded, 500, 200)},
      0);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->strategy, b);
}

TEST(SelectBest, IgnoresNonFiniteThroughputAndReturnsNothingWhenNoneEligible) {
  const Strategy a = MakeStrategy(1, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const Strategy b = MakeStrategy(1, 1, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa);
  std::optional<ScoredTrial> best =
      SelectBest({Trial(a, TrialStatus::kSucceeded, std::nan(""), 1),
                  Trial(a, TrialStatus::kSucceeded, std::numeric_limits<double>::infinity(), 1),
                  Trial(b, TrialStatus::kSucceeded, 10, 1)},
                 0);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->strategy, b);

  EXPECT_FALSE(SelectBest({}, 0).has_value());
  EXPECT_FALSE(
      SelectBest(
          {Trial(a, TrialStatus::kOom, 10, 1), Trial(b, TrialStatus::kPruned, 10, 1),
           Trial(b, TrialStatus::kCancelled, 10, 1), Trial(b, TrialStatus::kSucceeded, 10, 101)},
          100)
          .has_value());
}

TEST(ExhaustiveSearcher, CreateRejectsBadArguments) {
  FakeClock clock;
  EXPECT_THAT(CreateExhaustiveSearcher({}, SearchBudget{}, &clock).status(),
              InvalidArgument(StartsWith("space:")));
  SearchBudget budget;
  budget.max_trials = -1;
  EXPECT_THAT(CreateExhaustiveSearcher(SpaceOf(8), budget, &clock).status(),
              InvalidArgument(StartsWith("max_trials:")));
  EXPECT_THAT(CreateExhaustiveSearcher(SpaceOf(8), SearchBudget{}, &clock, -1).status(),
              InvalidArgument(StartsWith("memory_limit_bytes:")));
  std::vector<Strategy> space = SpaceOf(8);
  space[3].grad_accum_steps = 0;
  EXPECT_THAT(CreateExhaustiveSearcher(space, SearchBudget{}, &clock).status(),
              InvalidArgument(StartsWith("space[3]:")));
}

// End to end on a toy device: run every proposal through a fake executor with
// a made-up throughput model and a memory ceiling; the searcher's answer must
// be the brute-force best of what fits.
TEST(ExhaustiveSearcher, FindsTheBestStrategyOfAToyDevice) {
  SpaceRequest request = BaseRequest(64, 2);
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(request);
  ASSERT_TRUE(space.ok()) << space.status();

  const auto run = [](const Strategy& s) {
    ScoredTrial t;
    t.strategy = s;
    const double act = s.micro_batch_size * (s.checkpointing == Checkpointing::kFull ? 1 : 4) *
                       (s.attention == Attention::kMath ? 3 : 1) *
                       (s.precision == Precision::kBf16 ? 1 : 2);
    t.metrics.peak_memory_bytes = static_cast<int64_t>(1000 + 100 * act);
    if (t.metrics.peak_memory_bytes > 4000) {
      t.status = TrialStatus::kOom;
      return t;
    }
    t.status = TrialStatus::kSucceeded;
    t.metrics.tokens_per_second = 1000.0 * (s.precision == Precision::kBf16 ? 2 : 1) *
                                  (s.attention == Attention::kSdpa ? 1.5 : 1) *
                                  (s.checkpointing == Checkpointing::kFull ? 0.75 : 1) *
                                  (1.0 - 1.0 / (1 + s.micro_batch_size));
    return t;
  };

  std::vector<ScoredTrial> all;
  for (const Strategy& s : *space) all.push_back(run(s));
  const std::optional<ScoredTrial> expected = SelectBest(all, 3500);
  ASSERT_TRUE(expected.has_value());

  FakeClock clock;
  std::unique_ptr<Searcher> searcher = MustCreate(*space, SearchBudget{}, &clock, 3500);
  ASSERT_NE(searcher, nullptr);
  int trials = 0;
  while (std::optional<Proposal> p = searcher->Next()) {
    searcher->Report(run(p->strategy));
    ++trials;
  }
  EXPECT_EQ(trials, static_cast<int>(space->size()));
  ASSERT_TRUE(searcher->Best().has_value());
  EXPECT_EQ(searcher->Best()->strategy, expected->strategy);
  // bf16 + sdpa + no checkpointing at mbs 4 is 1000 + 100 * 16 = 2600 bytes;
  // mbs 8 would need 4200 and OOMs.
  // The toy device ignores the optimizer: fused_adamw ties and comes first.
  // The toy device ignores the layout as well: two data-parallel ranks, the
  // first layout, win the tie.
  EXPECT_EQ(StrategyToText(searcher->Best()->strategy),
            "dp=2,tp=1,pp=1,sharding=none,mbs=4,ga=8,precision=bf16,checkpoint=none,"
            "attention=sdpa,optimizer=fused_adamw,offload=none");
}

}  // namespace
}  // namespace autoaccel

namespace autoaccel {
namespace {

TEST(TrialMetrics, SpreadAboveTwentyPercentOfTheMedianIsNoisy) {
  TrialMetrics m;
  EXPECT_FALSE(m.IsNoisy());  // nothing measured
  m.step_time_median_s = 1.0;
  m.step_time_min_s = 0.95;
  m.step_time_max_s = 1.15;  // spread 0.20: not more than 20%
  EXPECT_FALSE(m.IsNoisy());
  EXPECT_EQ(TrialMetricsToJson(m)["noisy"], false);
  m.step_time_max_s = 1.3;  // spread 0.35
  EXPECT_TRUE(m.IsNoisy());
  EXPECT_EQ(TrialMetricsToJson(m)["noisy"], true);
  // The flag is derived, so reading the JSON back gives the same answer.
  EXPECT_TRUE(TrialMetricsFromJson(TrialMetricsToJson(m))->IsNoisy());
  // Measured over many steps, the middle 80% decides: one slow step among
  // hundreds (max far out) is not noise, a wide middle is.
  m.step_time_max_s = 3.0;
  m.step_time_spread = 0.08;
  EXPECT_FALSE(m.IsNoisy());
  EXPECT_FALSE(TrialMetricsFromJson(TrialMetricsToJson(m))->IsNoisy());
  m.step_time_spread = 0.25;
  EXPECT_TRUE(m.IsNoisy());
}

}  // namespace
}  // namespace autoaccel
