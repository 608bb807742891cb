// The --include / --exclude method filter (search/method_filter.h): which
// methods a strategy uses, and which lists some strategy can satisfy.
#include "search/method_filter.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/strategy.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

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

TEST(Methods, KnownMethodsInDocumentedOrder) {
  EXPECT_THAT(
      KnownMethods(),
      ElementsAre("zero1", "zero2", "fsdp", "data_parallel", "tensor_parallel", "pipeline_parallel",
                  "sequence_parallel", "interleaved", "amp_native", "bf16", "fp16", "pure_bf16",
                  "fp32", "fp8", "checkpoint", "selective_checkpoint", "full_checkpoint", "sdpa",
                  "fused_optimizer", "offload"));
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
  EXPECT_THAT(ParseMethodFilter({}, {"FP4"}).status(),
              InvalidArgument(StartsWith("exclude: unknown method 'fp4' (allowed: ")));
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
  EXPECT_THAT(ParseMethodFilter({}, {"fp32,amp_native,pure_bf16,fp8"}).status(),
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

}  // namespace
}  // namespace autoaccel
