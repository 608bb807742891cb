// Partial strategies (spec/partial_strategy.h): which strategies they
// match, and their canonical text.
#include "spec/partial_strategy.h"

#include "gtest/gtest.h"
#include "spec/strategy.h"
#include "tests/search_test_util.h"

namespace autoaccel {
namespace {

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
