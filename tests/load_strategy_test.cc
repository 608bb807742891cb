// --load-strategy in our own forms (search/load_strategy.h): canonical text
// and JSON with some of the keys.
#include "search/load_strategy.h"

#include "absl/status/status.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/partial_strategy.h"
#include "spec/strategy.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

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
  EXPECT_THAT(ParseLoadStrategy("precision=fp4").status(),
              InvalidArgument(Eq("load_strategy: strategy.precision: unknown value 'fp4' "
                                 "(allowed: fp32, bf16, fp16, pure_bf16, fp8)")));
  EXPECT_THAT(ParseLoadStrategy("checkpoint=partial").status(),
              InvalidArgument(Eq("load_strategy: strategy.checkpoint: unknown value 'partial' "
                                 "(allowed: none, selective, full)")));
  EXPECT_THAT(ParseLoadStrategy("sp=2").status(),
              InvalidArgument(Eq("load_strategy: strategy.sp: expected 0 or 1, got '2'")));
  EXPECT_THAT(ParseLoadStrategy("mbs=4,foo=1").status(),
              InvalidArgument(Eq("load_strategy: unknown key 'foo' (allowed: dp, tp, pp, "
                                 "sharding, sp, cp, cp_comm, ep, pp_schedule, vpp, mbs, ga, "
                                 "precision, "
                                 "checkpoint, ckpt_pct, attention, optimizer, offload)")));
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
  EXPECT_EQ(p.CountSet(), 18);
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
  EXPECT_THAT(ParseLoadStrategy(R"({"precision": "fp4"})").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.precision: unknown value "
                                         "'fp4'")));
  EXPECT_THAT(ParseLoadStrategy(R"({"sequence_parallel": 1})").status(),
              InvalidArgument(Eq("load_strategy: strategy.sequence_parallel: expected true or "
                                 "false, got 1")));
  EXPECT_THAT(ParseLoadStrategy(R"({"data_parallel": 1, "sharding": "fsdp"})").status(),
              InvalidArgument(AllOf(StartsWith("load_strategy: strategy.sharding: fsdp shards"),
                                    HasSubstr("needs data_parallel or context_parallel > 1"))));
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

}  // namespace
}  // namespace autoaccel
