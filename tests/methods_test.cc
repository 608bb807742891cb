// Tests of the ATorch-compatible strategy constraints: --include / --exclude
// method filters and the partial strategies of --load-strategy.
#include "search/methods.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/strategy.h"

namespace autoaccel {

// Failure messages show strategies as their canonical text.
void PrintTo(const Strategy& s, std::ostream* os) { *os << StrategyToText(s); }
void PrintTo(const PartialStrategy& p, std::ostream* os) { *os << "{" << p.ToText() << "}"; }

namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

template <typename M>
auto InvalidArgument(M message_matcher) {
  return StatusIs(absl::StatusCode::kInvalidArgument, message_matcher);
}

Strategy Parse(absl::string_view text) {
  absl::StatusOr<Strategy> s = ParseStrategyText(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.value_or(Strategy{});
}

// The methods `s` uses, in KnownMethods() order, plus the aliases it uses.
std::vector<std::string> Used(const Strategy& s) {
  std::vector<std::string> out;
  for (const std::string& m : KnownMethods()) {
    if (UsesMethod(s, m)) out.push_back(m);
  }
  for (const char* alias : {"half", "module_replace", "fused_adamw", "cpu_offload"}) {
    if (UsesMethod(s, alias)) out.push_back(alias);
  }
  return out;
}

PartialStrategy Load(absl::string_view text) {
  absl::StatusOr<PartialStrategy> p = ParseLoadStrategy(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.value_or(PartialStrategy{});
}

// ---------------------------------------------------------------- methods

TEST(Methods, KnownMethodsInDocumentedOrder) {
  EXPECT_THAT(KnownMethods(),
              ElementsAre("zero1", "zero2", "fsdp", "data_parallel", "tensor_parallel",
                          "pipeline_parallel", "sequence_parallel", "interleaved", "amp_native",
                          "bf16", "fp16", "pure_bf16", "fp32", "checkpoint", "selective_checkpoint",
                          "full_checkpoint", "sdpa", "fused_optimizer", "offload"));
}

TEST(Methods, DefaultStrategyUsesOnlyFp32) { EXPECT_THAT(Used(Strategy{}), ElementsAre("fp32")); }

TEST(Methods, ShardingMethods) {
  EXPECT_THAT(Used(Parse("dp=2,sharding=zero1")), ElementsAre("zero1", "data_parallel", "fp32"));
  EXPECT_THAT(Used(Parse("dp=4,sharding=zero2")), ElementsAre("zero2", "data_parallel", "fp32"));
  EXPECT_THAT(Used(Parse("dp=2,sharding=fsdp")), ElementsAre("fsdp", "data_parallel", "fp32"));
  EXPECT_THAT(Used(Parse("dp=2,sharding=none")), ElementsAre("data_parallel", "fp32"));
}

TEST(Methods, ParallelMethods) {
  EXPECT_THAT(Used(Parse("tp=2")), ElementsAre("tensor_parallel", "fp32"));
  EXPECT_THAT(Used(Parse("tp=2,sp=1")),
              ElementsAre("tensor_parallel", "sequence_parallel", "fp32"));
  EXPECT_THAT(Used(Parse("pp=2")), ElementsAre("pipeline_parallel", "fp32"));
  EXPECT_THAT(Used(Parse("pp=4,pp_schedule=interleaved,vpp=2")),
              ElementsAre("pipeline_parallel", "interleaved", "fp32"));
  EXPECT_THAT(Used(Parse("dp=2,tp=2,pp=2,sharding=fsdp,sp=1,pp_schedule=interleaved,vpp=3")),
              ElementsAre("fsdp", "data_parallel", "tensor_parallel", "pipeline_parallel",
                          "sequence_parallel", "interleaved", "fp32"));
}

TEST(Methods, PrecisionMethods) {
  EXPECT_THAT(Used(Parse("precision=fp32")), ElementsAre("fp32"));
  EXPECT_THAT(Used(Parse("precision=bf16")), ElementsAre("amp_native", "bf16"));
  EXPECT_THAT(Used(Parse("precision=fp16")), ElementsAre("amp_native", "fp16"));
  // ATorch's "half" is our pure_bf16, not autocast.
  EXPECT_THAT(Used(Parse("precision=pure_bf16")), ElementsAre("pure_bf16", "half"));
}

TEST(Methods, CheckpointMethods) {
  EXPECT_THAT(Used(Parse("checkpoint=none")), ElementsAre("fp32"));
  EXPECT_THAT(Used(Parse("checkpoint=selective")),
              ElementsAre("fp32", "checkpoint", "selective_checkpoint"));
  EXPECT_THAT(Used(Parse("checkpoint=full,ckpt_pct=50")),
              ElementsAre("fp32", "checkpoint", "full_checkpoint"));
}

TEST(Methods, KernelOptimizerAndOffloadMethodsWithTheirAliases) {
  EXPECT_THAT(Used(Parse("attention=sdpa")), ElementsAre("fp32", "sdpa", "module_replace"));
  EXPECT_THAT(Used(Parse("attention=math")), ElementsAre("fp32"));
  EXPECT_THAT(Used(Parse("optimizer=fused_adamw")),
              ElementsAre("fp32", "fused_optimizer", "fused_adamw"));
  EXPECT_THAT(Used(Parse("offload=cpu")), ElementsAre("fp32", "offload", "cpu_offload"));
}

TEST(Methods, UnknownOrMisspelledNamesAreNeverUsed) {
  const Strategy s = Parse("dp=2,sharding=zero1,precision=bf16,attention=sdpa");
  EXPECT_TRUE(UsesMethod(s, "zero1"));
  EXPECT_FALSE(UsesMethod(s, "ZERO1"));  // exact spelling only; the filter parser lower-cases
  EXPECT_FALSE(UsesMethod(s, "zero3"));
  EXPECT_FALSE(UsesMethod(s, ""));
}

// ---------------------------------------------------------------- method filter

TEST(MethodFilter, SplitsCommasTrimsLowerCasesAndMapsAliases) {
  absl::StatusOr<MethodFilter> f =
      ParseMethodFilter({" ZeRo1 , checkpoint", "Module_Replace"}, {"cpu_offload,HALF", ""});
  ASSERT_OK(f);
  EXPECT_THAT(f->include, ElementsAre("zero1", "checkpoint", "sdpa"));
  EXPECT_THAT(f->exclude, ElementsAre("offload", "pure_bf16"));
  EXPECT_FALSE(f->empty());
}

TEST(MethodFilter, RepeatedNamesAndAliasesCountOnce) {
  absl::StatusOr<MethodFilter> f =
      ParseMethodFilter({"sdpa,module_replace", "SDPA", "fused_adamw,fused_optimizer"}, {});
  ASSERT_OK(f);
  EXPECT_THAT(f->include, ElementsAre("sdpa", "fused_optimizer"));
  EXPECT_THAT(f->exclude, IsEmpty());
}

TEST(MethodFilter, EmptyListsGiveAnEmptyFilterThatAllowsEverything) {
  absl::StatusOr<MethodFilter> f = ParseMethodFilter({"", " , ,"}, {});
  ASSERT_OK(f);
  EXPECT_TRUE(f->empty());
  EXPECT_TRUE(f->Allows(Strategy{}));
  EXPECT_TRUE(f->Allows(Parse("dp=2,sharding=fsdp,precision=pure_bf16,offload=cpu")));
  EXPECT_EQ(f->Refusal(Strategy{}), "");
}

TEST(MethodFilter, UnknownNameNamesTheFlagAndTheAllowedNames) {
  EXPECT_THAT(ParseMethodFilter({"zero1,zero3"}, {}).status(),
              InvalidArgument(
                  AllOf(StartsWith("include: unknown method 'zero3' (allowed: zero1, zero2, fsdp, "
                                   "data_parallel, "),
                        HasSubstr("offload; aliases: half = pure_bf16, module_replace = sdpa, "
                                  "fused_adamw = fused_optimizer, cpu_offload = offload)"))));
  EXPECT_THAT(ParseMethodFilter({}, {"FP8"}).status(),
              InvalidArgument(StartsWith("exclude: unknown method 'fp8' (allowed: ")));
}

TEST(MethodFilter, BothIncludedAndExcluded) {
  EXPECT_THAT(ParseMethodFilter({"zero1"}, {"ZERO1"}).status(),
              InvalidArgument(Eq("include, exclude: 'zero1' is both included and excluded")));
  // Through an alias.
  EXPECT_THAT(ParseMethodFilter({"half"}, {"pure_bf16"}).status(),
              InvalidArgument(Eq("include, exclude: 'pure_bf16' is both included and excluded")));
}

TEST(MethodFilter, IncludesThatNoStrategyCanSatisfyTogether) {
  EXPECT_THAT(
      ParseMethodFilter({"zero1", "fsdp"}, {}).status(),
      InvalidArgument(Eq("include: 'zero1' and 'fsdp' cannot both be used (one sharding per "
                         "strategy)")));
  EXPECT_THAT(
      ParseMethodFilter({"fp32,amp_native"}, {}).status(),
      InvalidArgument(Eq("include: 'fp32' and 'amp_native' cannot both be used (one precision "
                         "per strategy)")));
  EXPECT_THAT(ParseMethodFilter({"amp_native,half"}, {}).status(),
              InvalidArgument(Eq("include: 'amp_native' and 'pure_bf16' cannot both be used "
                                 "(one precision per strategy)")));
  EXPECT_THAT(ParseMethodFilter({"bf16,fp16"}, {}).status(),
              InvalidArgument(HasSubstr("'bf16' and 'fp16' cannot both be used")));
  EXPECT_THAT(ParseMethodFilter({"selective_checkpoint", "full_checkpoint"}, {}).status(),
              InvalidArgument(Eq("include: 'selective_checkpoint' and 'full_checkpoint' cannot "
                                 "both be used (one checkpointing per strategy)")));
}

TEST(MethodFilter, CompatibleIncludesAreAccepted) {
  EXPECT_OK(ParseMethodFilter({"amp_native,bf16"}, {}));
  EXPECT_OK(ParseMethodFilter({"checkpoint,full_checkpoint"}, {}));
  EXPECT_OK(
      ParseMethodFilter({"zero2,sequence_parallel,interleaved,offload,fused_optimizer"}, {"fp32"}));
  EXPECT_OK(ParseMethodFilter({"fsdp,data_parallel,tensor_parallel,pipeline_parallel,sdpa"},
                              {"checkpoint"}));
}

TEST(MethodFilter, IncludedMethodThatNeedsAnExcludedOne) {
  // Sharding needs data parallelism, sequence parallelism tensor parallelism,
  // an interleaved schedule a pipeline, and bf16 autocast is amp_native.
  EXPECT_THAT(
      ParseMethodFilter({"zero1"}, {"data_parallel"}).status(),
      InvalidArgument(Eq("include, exclude: 'zero1' needs 'data_parallel', which is excluded")));
  EXPECT_THAT(ParseMethodFilter({"sequence_parallel"}, {"tensor_parallel"}).status(),
              InvalidArgument(Eq("include, exclude: 'sequence_parallel' needs 'tensor_parallel', "
                                 "which is excluded")));
  EXPECT_THAT(ParseMethodFilter({"interleaved"}, {"pipeline_parallel"}).status(),
              InvalidArgument(HasSubstr("'interleaved' needs 'pipeline_parallel'")));
  EXPECT_THAT(ParseMethodFilter({"bf16"}, {"amp_native"}).status(),
              InvalidArgument(HasSubstr("'bf16' needs 'amp_native'")));
  // The other way round is fine: data parallelism without sharding.
  EXPECT_OK(ParseMethodFilter({"data_parallel"}, {"zero1,zero2,fsdp"}));
}

TEST(MethodFilter, ListsThatLeaveNoStrategy) {
  EXPECT_THAT(ParseMethodFilter({}, {"fp32,amp_native,pure_bf16"}).status(),
              InvalidArgument(Eq("exclude: every strategy uses one of the excluded methods")));
  EXPECT_THAT(ParseMethodFilter({"checkpoint"}, {"selective_checkpoint,full_checkpoint"}).status(),
              InvalidArgument(Eq("include, exclude: no strategy uses every included method and "
                                 "none of the excluded ones")));
  // One precision left is enough.
  EXPECT_OK(ParseMethodFilter({}, {"fp32,bf16,pure_bf16"}));
}

TEST(MethodFilter, AllowsAndRefusal) {
  absl::StatusOr<MethodFilter> f =
      ParseMethodFilter({"checkpoint,amp_native"}, {"zero1", "cpu_offload"});
  ASSERT_OK(f);
  const Strategy zero1 = Parse("dp=2,sharding=zero1,precision=bf16,checkpoint=full");
  EXPECT_FALSE(f->Allows(zero1));
  EXPECT_EQ(f->Refusal(zero1), "excluded method 'zero1' (--exclude)");
  const Strategy no_checkpoint = Parse("dp=2,sharding=zero2,precision=bf16");
  EXPECT_FALSE(f->Allows(no_checkpoint));
  EXPECT_EQ(f->Refusal(no_checkpoint), "lacks included method 'checkpoint' (--include)");
  const Strategy fp32 = Parse("checkpoint=full");
  EXPECT_EQ(f->Refusal(fp32), "lacks included method 'amp_native' (--include)");
  // An excluded method is reported before a missing included one.
  const Strategy offload = Parse("precision=fp32,offload=cpu");
  EXPECT_EQ(f->Refusal(offload), "excluded method 'offload' (--exclude)");
  const Strategy ok = Parse("dp=2,sharding=zero2,precision=fp16,checkpoint=selective");
  EXPECT_TRUE(f->Allows(ok));
  EXPECT_EQ(f->Refusal(ok), "");
  EXPECT_TRUE(f->Allows(Parse("precision=bf16,checkpoint=full,ckpt_pct=25")));
}

// Over a grid of strategies, what the filter allows is exactly what its
// definition says, and the filter refuses some and allows some.
TEST(MethodFilter, AllowsExactlyTheStrategiesThatFitBothLists) {
  absl::StatusOr<MethodFilter> f = ParseMethodFilter({"data_parallel", "sdpa"}, {"fsdp,fp16"});
  ASSERT_OK(f);
  int allowed = 0, refused = 0;
  for (const char* layout :
       {"dp=1", "dp=2,sharding=none", "dp=2,sharding=zero1", "dp=2,sharding=fsdp", "tp=2"}) {
    for (const char* precision : {"fp32", "bf16", "fp16", "pure_bf16"}) {
      for (const char* attention : {"math", "sdpa"}) {
        const Strategy s =
            Parse(absl::StrCat(layout, ",precision=", precision, ",attention=", attention));
        const bool expected = s.data_parallel > 1 && s.attention == Attention::kSdpa &&
                              s.sharding != Sharding::kFsdp && s.precision != Precision::kFp16;
        EXPECT_EQ(f->Allows(s), expected) << StrategyToText(s) << ": " << f->Refusal(s);
        (expected ? allowed : refused)++;
      }
    }
  }
  EXPECT_EQ(allowed, 6);
  EXPECT_EQ(refused, 34);
}

// ---------------------------------------------------------------- load strategy: our forms

TEST(LoadStrategy, CanonicalPartialText) {
  PartialStrategy p = Load("precision=bf16,checkpoint=full");
  EXPECT_EQ(p.CountSet(), 2);
  EXPECT_EQ(p.precision, Precision::kBf16);
  EXPECT_EQ(p.checkpointing, Checkpointing::kFull);
  EXPECT_FALSE(p.sharding.has_value());
  EXPECT_FALSE(p.micro_batch_size.has_value());

  p = Load(" dp = 2 , tp=2,sharding=zero1 ");
  EXPECT_EQ(p.CountSet(), 3);
  EXPECT_EQ(p.data_parallel, 2);
  EXPECT_EQ(p.tensor_parallel, 2);
  EXPECT_EQ(p.sharding, Sharding::kZero1);
  EXPECT_FALSE(p.pipeline_parallel.has_value());
  EXPECT_EQ(p.ToText(), "dp=2,tp=2,sharding=zero1");

  p = Load(
      "sp=0,mbs=8,ga=4,ckpt_pct=50,attention=sdpa,optimizer=fused_adamw,offload=cpu,"
      "pp=4,pp_schedule=interleaved,vpp=2");
  EXPECT_EQ(p.CountSet(), 10);
  EXPECT_EQ(p.sequence_parallel, false);
  EXPECT_EQ(p.micro_batch_size, 8);
  EXPECT_EQ(p.grad_accum_steps, 4);
  EXPECT_EQ(p.checkpoint_percent, 50);
  EXPECT_EQ(p.attention, Attention::kSdpa);
  EXPECT_EQ(p.optimizer, Optimizer::kFusedAdamW);
  EXPECT_EQ(p.offload, Offload::kCpu);
  EXPECT_EQ(p.pipeline_parallel, 4);
  EXPECT_EQ(p.pipeline_schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(p.virtual_stages, 2);
}

// Keys whose full-strategy defaults would break a rule are fine alone: the
// search fills the rest in.
TEST(LoadStrategy, PartialTextNeedsOnlyToLeaveRoomForAValidLayout) {
  EXPECT_EQ(Load("sharding=fsdp").sharding, Sharding::kFsdp);
  EXPECT_EQ(Load("sp=1").sequence_parallel, true);
  EXPECT_EQ(Load("pp_schedule=interleaved").pipeline_schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(Load("vpp=3").virtual_stages, 3);
  EXPECT_EQ(Load("ckpt_pct=50").checkpoint_percent, 50);
}

TEST(LoadStrategy, CanonicalTextErrors) {
  EXPECT_THAT(ParseLoadStrategy("dp=0").status(),
              InvalidArgument(Eq("load_strategy: strategy.dp: expected a positive integer, got "
                                 "'0'")));
  EXPECT_THAT(ParseLoadStrategy("mbs=x").status(),
              InvalidArgument(Eq("load_strategy: strategy.mbs: expected a positive integer, got "
                                 "'x'")));
  EXPECT_THAT(ParseLoadStrategy("ga=99999999999").status(),
              InvalidArgument(HasSubstr("strategy.ga: expected a positive integer")));
  EXPECT_THAT(ParseLoadStrategy("checkpoint=full,ckpt_pct=101").status(),
              InvalidArgument(Eq("load_strategy: strategy.ckpt_pct: expected a percentage in "
                                 "1..100, got '101'")));
  EXPECT_THAT(ParseLoadStrategy("precision=fp8").status(),
              InvalidArgument(Eq("load_strategy: strategy.precision: unknown value 'fp8' "
                                 "(allowed: fp32, bf16, fp16, pure_bf16)")));
  EXPECT_THAT(ParseLoadStrategy("checkpoint=partial").status(),
              InvalidArgument(Eq("load_strategy: strategy.checkpoint: unknown value 'partial' "
                                 "(allowed: none, selective, full)")));
  EXPECT_THAT(ParseLoadStrategy("sp=2").status(),
              InvalidArgument(Eq("load_strategy: strategy.sp: expected 0 or 1, got '2'")));
  EXPECT_THAT(ParseLoadStrategy("mbs=4,foo=1").status(),
              InvalidArgument(Eq("load_strategy: unknown key 'foo' (allowed: dp, tp, pp, "
                                 "sharding, sp, pp_schedule, vpp, mbs, ga, precision, checkpoint, "
                                 "ckpt_pct, attention, optimizer, offload)")));
  EXPECT_THAT(ParseLoadStrategy("mbs=4,zero1").status(),
              InvalidArgument(Eq("load_strategy: expected key=value, got 'zero1'")));
  EXPECT_THAT(ParseLoadStrategy("").status(), InvalidArgument(StartsWith("load_strategy: empty")));
  EXPECT_THAT(ParseLoadStrategy("  \n").status(),
              InvalidArgument(StartsWith("load_strategy: empty")));
}

TEST(LoadStrategy, CanonicalTextKeySetTwice) {
  EXPECT_THAT(ParseLoadStrategy("precision=bf16,mbs=2,precision=fp16").status(),
              InvalidArgument(Eq("load_strategy: conflicting settings of precision: "
                                 "'precision=bf16' sets bf16, 'precision=fp16' sets fp16")));
  // The same value twice is no conflict.
  EXPECT_EQ(Load("mbs=2,mbs=2").ToText(), "mbs=2");
}

TEST(LoadStrategy, SetFieldsThatNoValidStrategyHas) {
  EXPECT_THAT(ParseLoadStrategy("dp=1,sharding=zero1").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.sharding: zero1 shards")));
  EXPECT_THAT(ParseLoadStrategy("tp=1,sp=1").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.sp: ")));
  EXPECT_THAT(ParseLoadStrategy("pp=1,pp_schedule=interleaved").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.pp_schedule: ")));
  EXPECT_THAT(ParseLoadStrategy("pp_schedule=1f1b,vpp=2").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.vpp: ")));
  EXPECT_THAT(ParseLoadStrategy("pp_schedule=interleaved,vpp=1").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.vpp: ")));
  EXPECT_THAT(ParseLoadStrategy("checkpoint=none,ckpt_pct=50").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.ckpt_pct: 50% of layers")));
}

TEST(LoadStrategy, JsonPartial) {
  PartialStrategy p = Load(R"( {"sharding": "zero1", "micro_batch_size": 4,
                                "sequence_parallel": true, "checkpointing": "selective"} )");
  EXPECT_EQ(p.CountSet(), 4);
  EXPECT_EQ(p.sharding, Sharding::kZero1);
  EXPECT_EQ(p.micro_batch_size, 4);
  EXPECT_EQ(p.sequence_parallel, true);
  EXPECT_EQ(p.checkpointing, Checkpointing::kSelective);
  EXPECT_EQ(p.ToText(), "sharding=zero1,sp=1,mbs=4,checkpoint=selective");
  EXPECT_TRUE(Load("{}").empty());

  // A full strategy's JSON is a partial strategy with every field set.
  const Strategy s = Parse("dp=2,tp=2,sharding=zero2,sp=1,mbs=4,precision=fp16");
  p = Load(StrategyToJson(s).dump());
  EXPECT_EQ(p.CountSet(), 15);
  EXPECT_TRUE(p.Matches(s));
}

TEST(LoadStrategy, JsonErrors) {
  EXPECT_THAT(ParseLoadStrategy(R"({"micro_batch_size": 0})").status(),
              InvalidArgument(Eq("load_strategy: strategy.micro_batch_size: expected a positive "
                                 "integer, got 0")));
  EXPECT_THAT(ParseLoadStrategy(R"({"micro_batch_size": 2.5})").status(),
              InvalidArgument(HasSubstr("expected a positive integer, got 2.5")));
  EXPECT_THAT(ParseLoadStrategy(R"({"checkpoint_percent": 200})").status(),
              InvalidArgument(Eq("load_strategy: strategy.checkpoint_percent: expected a "
                                 "percentage in 1..100, got 200")));
  EXPECT_THAT(ParseLoadStrategy(R"({"dp": 2})").status(),
              InvalidArgument(StartsWith("load_strategy: unknown key 'dp' (allowed: "
                                         "data_parallel, tensor_parallel, pipeline_parallel, ")));
  EXPECT_THAT(ParseLoadStrategy(R"({"precision": 16})").status(),
              InvalidArgument(Eq("load_strategy: strategy.precision: expected a string, got 16")));
  EXPECT_THAT(ParseLoadStrategy(R"({"precision": "fp8"})").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.precision: unknown value "
                                         "'fp8'")));
  EXPECT_THAT(ParseLoadStrategy(R"({"sequence_parallel": 1})").status(),
              InvalidArgument(Eq("load_strategy: strategy.sequence_parallel: expected true or "
                                 "false, got 1")));
  EXPECT_THAT(ParseLoadStrategy(R"({"data_parallel": 1, "sharding": "fsdp"})").status(),
              InvalidArgument(AllOf(StartsWith("load_strategy: strategy.sharding: fsdp shards"),
                                    HasSubstr("needs data_parallel > 1"))));
  //                             0123456789012
  EXPECT_THAT(ParseLoadStrategy(R"({"sharding" "zero1"})").status(),
              InvalidArgument(StartsWith("load_strategy: invalid JSON at offset 12: ")));
  //                               01234567890123456789
  EXPECT_THAT(ParseLoadStrategy(R"({"sharding": "zero1")").status(),
              InvalidArgument(StartsWith("load_strategy: invalid JSON at offset 20: ")));
  //                               012345678901234
  EXPECT_THAT(ParseLoadStrategy(R"({"sharding": zero1})").status(),
              InvalidArgument(StartsWith("load_strategy: invalid JSON at offset 13: ")));
  EXPECT_THAT(ParseLoadStrategy(R"({"mbs": 1} x)").status(),
              InvalidArgument(StartsWith("load_strategy: invalid JSON at offset 11: ")));
}

// ---------------------------------------------------------------- load strategy: ATorch's list

TEST(LoadStrategy, AtorchExampleFromTheDocs) {
  const PartialStrategy p = Load(R"(["zero2", ("amp_native", {"dtype": "bf16"}), "checkpoint"])");
  EXPECT_EQ(p.sharding, Sharding::kZero2);
  EXPECT_EQ(p.precision, Precision::kBf16);
  EXPECT_EQ(p.checkpointing, Checkpointing::kFull);
  EXPECT_EQ(p.CountSet(), 3);
  EXPECT_FALSE(p.data_parallel.has_value());
  EXPECT_FALSE(p.checkpoint_percent.has_value());
  EXPECT_EQ(p.ToText(), "sharding=zero2,precision=bf16,checkpoint=full");
  EXPECT_EQ(Load(p.ToText()), p);
}

// A strategy as ATorch users write it in Python, comments and all.
TEST(LoadStrategy, AtorchListAsWrittenInPython) {
  const PartialStrategy p = Load(R"(
    [
        ("parallel_mode", ([("data", 4)], None)),
        "module_replace",  # fused attention kernels
        ("fsdp", {"sync_module_states": True, "atorch_wrap_cls": {GPT2Block,}, "x": -1.5e-3}),
        ("amp_native", {"dtype": torch.bfloat16, "skip_if_nonfinite": True}, False),
        ("checkpoint", {"wrap_class": (LlamaDecoderLayer,), "no_reentrant": False}),
    ]
  )");
  EXPECT_EQ(p.ToText(), "dp=4,sharding=fsdp,precision=bf16,checkpoint=full,attention=sdpa");
}

TEST(LoadStrategy, AmpNativeDtypes) {
  EXPECT_EQ(Load(R"([("amp_native", {"dtype": torch.float16})])").precision, Precision::kFp16);
  EXPECT_EQ(Load(R"([("amp_native", {"dtype": torch.bfloat16})])").precision, Precision::kBf16);
  EXPECT_EQ(Load(R"([('amp_native', 'float16')])").precision, Precision::kFp16);
  EXPECT_EQ(Load(R"([("amp_native", torch.half)])").precision, Precision::kFp16);
  EXPECT_EQ(Load(R"(["amp_native"])").precision, Precision::kBf16);
  EXPECT_EQ(Load(R"([("amp_native", None)])").precision, Precision::kBf16);
  EXPECT_EQ(Load(R"([("amp_native", {"skip_if_nonfinite": True})])").precision, Precision::kBf16);
  EXPECT_THAT(ParseLoadStrategy(R"([("amp_native", {"dtype": torch.int8})])").status(),
              InvalidArgument(StartsWith("load_strategy: amp_native: unknown dtype 'torch.int8' "
                                         "(allowed: bf16, ")));
}

TEST(LoadStrategy, HalfIsPureBf16AndRefusesFloat16) {
  EXPECT_EQ(Load(R"(["half"])").precision, Precision::kPureBf16);
  EXPECT_EQ(Load(R"([("half", "bf16")])").precision, Precision::kPureBf16);
  constexpr absl::string_view kNoPureFp16 =
      "load_strategy: half with float16 is not supported (pure fp16 training); use amp_native "
      "with fp16";
  EXPECT_THAT(ParseLoadStrategy(R"([("half", "fp16")])").status(),
              InvalidArgument(Eq(kNoPureFp16)));
  EXPECT_THAT(ParseLoadStrategy(R"([("half", {"dtype": torch.float16})])").status(),
              InvalidArgument(Eq(kNoPureFp16)));
}

TEST(LoadStrategy, ParallelMode) {
  PartialStrategy p =
      Load(R"([("parallel_mode", ([("data", 4), ("tensor", 2), ("pipeline", 2)], None))])");
  EXPECT_EQ(p.ToText(), "dp=4,tp=2,pp=2");
  // "pipe" for pipeline, the bare list of pairs, ATorch's third (tunable) item.
  p = Load(R"([("parallel_mode", [("pipe", 4), ("data", 2)], False), "zero1"])");
  EXPECT_EQ(p.ToText(), "dp=2,pp=4,sharding=zero1");
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", ([("expert", 2)], None))])").status(),
              InvalidArgument(Eq("load_strategy: parallel_mode: unknown group 'expert' "
                                 "(allowed: data, tensor, pipeline, pipe)")));
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", ([("data", 0)], None))])").status(),
              InvalidArgument(Eq("load_strategy: parallel_mode data: expected a positive "
                                 "integer size, got 0")));
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", "data")])").status(),
              InvalidArgument(StartsWith("load_strategy: parallel_mode: expected ([(")));
  // The degrees must allow the other methods: sharding over one rank cannot be.
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", ([("data", 1)], None)), "fsdp"])").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.sharding: fsdp shards")));
}

TEST(LoadStrategy, TensorAndPipelineParallelSizes) {
  PartialStrategy p =
      Load(R"([("tensor_parallel", {"size": 4}), ("pipeline_parallel", 2), "sequence_parallel"])");
  EXPECT_EQ(p.ToText(), "tp=4,pp=2,sp=1");
  EXPECT_THAT(ParseLoadStrategy(R"(["tensor_parallel"])").status(),
              InvalidArgument(StartsWith("load_strategy: tensor_parallel needs a size")));
  EXPECT_THAT(ParseLoadStrategy(R"([("pipeline_parallel", {"chunks": 4})])").status(),
              InvalidArgument(StartsWith("load_strategy: pipeline_parallel needs a size")));
  EXPECT_THAT(ParseLoadStrategy(R"([("tensor_parallel", -2)])").status(),
              InvalidArgument(Eq("load_strategy: tensor_parallel: expected a positive integer "
                                 "size, got -2")));
  EXPECT_THAT(ParseLoadStrategy(R"([("pipeline_parallel", 2.0)])").status(),
              InvalidArgument(HasSubstr("expected a positive integer size, got 2.0")));
}

TEST(LoadStrategy, OtherAtorchMethods) {
  EXPECT_EQ(Load(R"(["zero1"])").ToText(), "sharding=zero1");
  EXPECT_EQ(Load(R"([("fsdp", {"cpu_offload": True})])").ToText(), "sharding=fsdp");
  EXPECT_EQ(Load(R"(["module_replace"])").ToText(), "attention=sdpa");
  EXPECT_EQ(Load(R"(["fused_optimizer"])").ToText(), "optimizer=fused_adamw");
  EXPECT_EQ(Load(R"(["FUSED_ADAMW"])").ToText(), "optimizer=fused_adamw");
  EXPECT_EQ(Load(R"(["offload"])").ToText(), "offload=cpu");
  EXPECT_EQ(Load(R"(("cpu_offload",))").ToText(), "offload=cpu");
  EXPECT_EQ(Load(R"(["sequence_parallel"])").ToText(), "sp=1");
  // ("module_replace") is a parenthesised string in Python, not a tuple.
  EXPECT_EQ(Load(R"([("module_replace"), ("checkpoint", (GPT2Block,))])").ToText(),
            "checkpoint=full,attention=sdpa");
  EXPECT_TRUE(Load("[]").empty());
  EXPECT_TRUE(Load("()").empty());
}

TEST(LoadStrategy, UnknownAtorchMethodListsTheAllowed) {
  EXPECT_THAT(ParseLoadStrategy(R"(["zero2", "amp_apex_o2"])").status(),
              InvalidArgument(Eq("load_strategy: unknown method 'amp_apex_o2' (allowed: zero1, "
                                 "zero2, fsdp, amp_native, half, checkpoint, module_replace, "
                                 "fused_optimizer, fused_adamw, offload, cpu_offload, "
                                 "sequence_parallel, parallel_mode, tensor_parallel, "
                                 "pipeline_parallel)")));
}

TEST(LoadStrategy, ConflictingAtorchElements) {
  EXPECT_THAT(ParseLoadStrategy(R"(["zero1", "checkpoint", "zero2"])").status(),
              InvalidArgument(Eq("load_strategy: conflicting settings of sharding: 'zero1' sets "
                                 "zero1, 'zero2' sets zero2")));
  EXPECT_THAT(ParseLoadStrategy(R"(["amp_native", "half"])").status(),
              InvalidArgument(Eq("load_strategy: conflicting settings of precision: "
                                 "'amp_native' sets bf16, 'half' sets pure_bf16")));
  EXPECT_THAT(
      ParseLoadStrategy(R"([("parallel_mode", ([("tensor", 2)], None)), ("tensor_parallel", 4)])")
          .status(),
      InvalidArgument(Eq("load_strategy: conflicting settings of tensor_parallel: "
                         "'parallel_mode' sets 2, 'tensor_parallel' sets 4")));
  EXPECT_THAT(
      ParseLoadStrategy(R"([("parallel_mode", ([("data", 2), ("data", 4)], None))])").status(),
      InvalidArgument(HasSubstr("conflicting settings of data_parallel")));
  // Agreeing elements are fine.
  EXPECT_EQ(Load(R"(["zero2", ("zero2", {}), ("amp_native", "bf16"), "amp_native"])").ToText(),
            "sharding=zero2,precision=bf16");
  EXPECT_EQ(
      Load(R"([("parallel_mode", ([("tensor", 2)], None)), ("tensor_parallel", 2)])").ToText(),
      "tp=2");
}

TEST(LoadStrategy, ElementsOfTheWrongShape) {
  EXPECT_THAT(ParseLoadStrategy(R"(["zero2", 5])").status(),
              InvalidArgument(Eq("load_strategy: element 2: expected a method name or a "
                                 "(name, config) tuple, got 5")));
  EXPECT_THAT(ParseLoadStrategy(R"([("zero2", None, 1)])").status(),
              InvalidArgument(StartsWith("load_strategy: element 1: expected a method name")));
  EXPECT_THAT(ParseLoadStrategy(R"([()])").status(),
              InvalidArgument(StartsWith("load_strategy: element 1: expected a method name")));
  EXPECT_THAT(ParseLoadStrategy(R"(("zero2"))").status(),
              InvalidArgument(Eq("load_strategy: expected a list of methods, got \"zero2\"")));
}

// Quotes and escapes are Python's; they show in the method names read.
TEST(LoadStrategy, PythonStringQuotesAndEscapes) {
  EXPECT_EQ(Load(R"(['zer\x6f2'])").sharding, Sharding::kZero2);
  EXPECT_EQ(Load(R"(["\u0066sdp"])").sharding, Sharding::kFsdp);
  EXPECT_EQ(Load(R"(['\172ero1'])").sharding, Sharding::kZero1);
  EXPECT_EQ(Load(R"(["\U0000007aero1"])").sharding, Sharding::kZero1);
  EXPECT_EQ(Load("['check\\\npoint']").checkpointing, Checkpointing::kFull);  // line continuation
  // Quotes of the other kind need no escape; the same kind does.
  EXPECT_EQ(Load(R"([("amp_native", {"dtype": 'bf16', 'note': "it's \"x\" \\ \t"})])").precision,
            Precision::kBf16);
  EXPECT_THAT(ParseLoadStrategy(R"(['it\'s'])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method 'it's' (allowed: ")));
  EXPECT_THAT(ParseLoadStrategy(R"(["say \"hi\""])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method 'say \"hi\"' (")));
  // An unknown escape keeps its backslash, as in Python.
  EXPECT_THAT(ParseLoadStrategy(R"(["a\qb"])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method 'a\\qb' (")));
  // Non-ASCII code points come out as UTF-8.
  EXPECT_THAT(ParseLoadStrategy(R"(["\u00e9"])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method '\xc3\xa9' (")));
}

TEST(LoadStrategy, MalformedLiteralsSayWhere) {
  const auto error = [](absl::string_view text) {
    return std::string(ParseLoadStrategy(text).status().message());
  };
  //           0123456789012345
  EXPECT_EQ(error(R"(["zero2", "fsdp")"), "load_strategy: expected ']' at offset 16");
  EXPECT_EQ(error(R"(["zero2" "fsdp"])"), "load_strategy: expected ']' at offset 9");
  EXPECT_EQ(error(R"(["zero2", ("amp_native", {"dtype": "bf16"), "checkpoint"])"),
            "load_strategy: expected '}' at offset 41");
  EXPECT_EQ(error(R"([("amp_native" {"dtype": "bf16"})])"),
            "load_strategy: expected ')' at offset 15");
  EXPECT_EQ(error(R"([("amp_native", {"dtype" "bf16"})])"),
            "load_strategy: expected ':' at offset 25");
  EXPECT_EQ(error(R"([("amp_native", {"dtype": "bf16" "x": 1})])"),
            "load_strategy: expected '}' at offset 33");
  EXPECT_EQ(error(R"(['zero2])"), "load_strategy: unterminated string at offset 1");
  EXPECT_EQ(error("['zero2\n']"), "load_strategy: unterminated string at offset 1");
  EXPECT_EQ(error(R"(["zero2"] extra)"), "load_strategy: expected end of input at offset 10");
  EXPECT_EQ(error(R"([@])"), "load_strategy: unexpected '@' at offset 1");
  EXPECT_EQ(error(R"([,])"), "load_strategy: unexpected ',' at offset 1");
  EXPECT_EQ(error(R"(["a",,])"), "load_strategy: unexpected ',' at offset 5");
  EXPECT_EQ(error(R"(["zero2", )"), "load_strategy: unexpected end of input at offset 10");
  EXPECT_EQ(error(R"(["\x4g"])"), "load_strategy: invalid \\x escape at offset 2");
  EXPECT_EQ(error(R"(["\ud800"])"), "load_strategy: invalid \\u escape at offset 2");
  EXPECT_EQ(error(R"([1e])"), "load_strategy: expected exponent digits at offset 3");
  EXPECT_EQ(error(R"([-x])"), "load_strategy: expected a number at offset 1");
  EXPECT_EQ(error(R"([99999999999999999999])"), "load_strategy: integer out of range at offset 1");
  EXPECT_EQ(error(R"([torch.])"), "load_strategy: expected a name after '.' at offset 7");
  EXPECT_EQ(error(std::string(300, '[')), "load_strategy: nesting deeper than 100 at offset 100");
}

// ---------------------------------------------------------------- Matches, ToText

TEST(PartialStrategy, MatchesComparesOnlyTheSetFields) {
  const PartialStrategy p = Load("sharding=zero2,precision=bf16");
  EXPECT_TRUE(p.Matches(Parse("dp=2,sharding=zero2,precision=bf16,mbs=8")));
  EXPECT_TRUE(p.Matches(Parse("dp=4,tp=2,sharding=zero2,precision=bf16,checkpoint=full")));
  EXPECT_FALSE(p.Matches(Parse("dp=2,sharding=zero2,precision=fp16")));
  EXPECT_FALSE(p.Matches(Parse("dp=2,sharding=zero1,precision=bf16")));
  EXPECT_FALSE(p.Matches(Strategy{}));

  EXPECT_TRUE(PartialStrategy{}.Matches(Strategy{}));
  EXPECT_TRUE(PartialStrategy{}.Matches(Parse("dp=2,sharding=fsdp,offload=cpu")));

  // A field set to its default value still has to match.
  const PartialStrategy no_sp = Load("sp=0,ckpt_pct=100");
  EXPECT_TRUE(no_sp.Matches(Parse("tp=2")));
  EXPECT_FALSE(no_sp.Matches(Parse("tp=2,sp=1")));
  EXPECT_FALSE(no_sp.Matches(Parse("checkpoint=full,ckpt_pct=50")));
}

TEST(PartialStrategy, ToTextOfEveryFieldIsTheStrategysCanonicalText) {
  const Strategy s = Parse(
      "dp=2,tp=2,pp=2,sharding=zero1,sp=1,pp_schedule=interleaved,vpp=2,mbs=4,ga=8,"
      "precision=bf16,checkpoint=selective,ckpt_pct=50,attention=sdpa,optimizer=fused_adamw,"
      "offload=cpu");
  const PartialStrategy p = Load(StrategyToText(s));
  EXPECT_EQ(p.CountSet(), 15);
  EXPECT_EQ(p.ToText(), StrategyToText(s));
  EXPECT_TRUE(p.Matches(s));
  EXPECT_EQ(Load(p.ToText()), p);
}

TEST(PartialStrategy, ToTextKeepsTheCanonicalKeyOrder) {
  PartialStrategy p;
  EXPECT_EQ(p.ToText(), "");
  EXPECT_TRUE(p.empty());
  p.offload = Offload::kNone;
  p.checkpointing = Checkpointing::kFull;
  p.sequence_parallel = false;
  p.data_parallel = 8;
  EXPECT_EQ(p.ToText(), "dp=8,sp=0,checkpoint=full,offload=none");
  EXPECT_EQ(p.CountSet(), 4);
  EXPECT_FALSE(p.empty());
  EXPECT_EQ(Load(p.ToText()), p);
}

}  // namespace
}  // namespace autoaccel
