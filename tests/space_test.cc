// The search space (search/space.h): what EnumerateSpace lists, in which
// order, and the compatibility rules that prune it.
#include "search/space.h"

#include <climits>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/content_digest.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"
#include "tests/hub_configs.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

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
  // fp8 only when asked for (it changes the numerics of training).
  EXPECT_EQ(precisions.size(), AllPrecisions().size() - 1);
  EXPECT_EQ(precisions.count(Precision::kFp8), 0u);
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
  for (absl::string_view family : {"bert"}) {
    SpaceRequest r = OneOfEach();
    r.model = Parsed("bert", kBertBaseConfig);
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

TEST(EnumerateSpace, MixtureOfExpertsModelsSpreadTheirExpertsByDefault) {
  // Mixtral 8x7B's 8 experts over 4 data-parallel ranks: 1, 2 or 4 per
  // group of ranks, innermost before the micro-batch (sharding outside).
  SpaceRequest r = OneOfEach();
  r.model = Parsed("mixtral", kMixtral8x7bConfig);
  r.world_size = 4;
  r.micro_batch_sizes = {1};
  r.tensor_parallel_sizes = {1};
  r.pipeline_parallel_sizes = {1};
  r.shardings = {Sharding::kZero1};
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_THAT(LayoutTexts(*space), ElementsAre("dp=4,tp=1,pp=1,sharding=zero1,mbs=1,ga=2",
                                               "dp=4,tp=1,pp=1,sharding=zero1,ep=2,mbs=1,ga=2",
                                               "dp=4,tp=1,pp=1,sharding=zero1,ep=4,mbs=1,ga=2"));
  // A layout whose data-parallel ranks an asked size does not divide runs
  // without it; none left is an error naming the list.
  r.tensor_parallel_sizes = {1, 2};
  r.expert_parallel_sizes = {4};
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_THAT(LayoutTexts(*space), ElementsAre("dp=4,tp=1,pp=1,sharding=zero1,ep=4,mbs=1,ga=2"));
  r.tensor_parallel_sizes = {2};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("expert_parallel_sizes: none of (4)"),
                                    HasSubstr("data- and context-parallel ranks"))));
  // A dense model runs without expert parallelism, and refuses it.
  r.model = Parsed("llama", kLlama2_7bConfig);
  r.tensor_parallel_sizes = {1};
  r.expert_parallel_sizes = {};
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_THAT(LayoutTexts(*space), ElementsAre("dp=4,tp=1,pp=1,sharding=zero1,mbs=1,ga=2"));
  r.expert_parallel_sizes = {2};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("space: no compatible strategy"),
                                    HasSubstr("strategy.expert_parallel:"))));
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

TEST(EnumerateSpace, Fp8OnlyWhenListedAndOnlyOnADeviceWithFp8) {
  SpaceRequest r = BaseRequest(8);
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  for (const Strategy& s : *space) EXPECT_NE(s.precision, Precision::kFp8);

  r.precisions = {Precision::kFp8, Precision::kPureBf16};
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  std::set<Precision> seen;
  for (const Strategy& s : *space) seen.insert(s.precision);
  EXPECT_THAT(seen, ElementsAre(Precision::kPureBf16, Precision::kFp8));

  r.device_supports_fp8 = false;
  space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  for (const Strategy& s : *space) EXPECT_EQ(s.precision, Precision::kPureBf16);
  r.precisions = {Precision::kFp8};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(AllOf(StartsWith("precisions: only fp8 requested"),
                                    HasSubstr("no fp8 tensor cores"))));
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
                                 "layout_product", "batch_product", "bf16_device", "fp8_device",
                                 "offload_device", "fixed_graph", "parallel_family",
                                 "attention_kernel", "tensor_parallel_model", "pipeline_layers",
                                 "pipeline_sharding", "sequence_parallel",
                                 "context_parallel_family", "context_parallel_sequence",
                                 "context_parallel_kernel", "expert_parallel_model"));
}

TEST(Compatibility, Fp8NeedsFp8TensorCoresAndTheEnginesLinearLayers) {
  SpaceRequest r = OneOfEach();
  Strategy s;
  s.micro_batch_size = 1;
  s.grad_accum_steps = r.global_batch_size;
  s.precision = Precision::kFp8;
  EXPECT_OK(CheckCompatible(r, s));
  r.device_supports_fp8 = false;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.precision: fp8 needs fp8 tensor cores"),
                                    HasSubstr("8.9"))));
  r.device_supports_fp8 = true;
  r.device_supports_bf16 = false;  // fp8 computes the rest in bf16
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(HasSubstr("bf16")));
  r.device_supports_bf16 = true;
  absl::StatusOr<ModelSpec> script =
      ModelSpecFromJson("torchscript", {{"input_spec", "ids:int64[B,T]<64; labels=ids"},
                                        {"script_digest", ContentDigest("x")},
                                        {"script_bytes", 1}});
  ASSERT_TRUE(script.ok()) << script.status();
  r.model = *script;
  s.attention = Attention::kMath;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(HasSubstr("a TorchScript model runs its own linear layers")));
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

TEST(Compatibility, ContextParallelismSplitsDecoderSequencesIntoTwoChunksPerRank) {
  SpaceRequest r = OneOfEach();  // GPT-2 small, seq_len 512, global batch 8
  r.world_size = 4;
  Strategy s;
  s.data_parallel = 1;
  s.context_parallel = 4;
  s.micro_batch_size = 4;
  s.grad_accum_steps = 2;
  EXPECT_TRUE(CheckCompatible(r, s).ok()) << CheckCompatible(r, s);
  // The context-parallel ranks hold the same weights: they are enough to
  // shard over.
  s.sharding = Sharding::kFsdp;
  EXPECT_TRUE(CheckCompatible(r, s).ok()) << CheckCompatible(r, s);
  // 2 * cp chunks must divide the sequence.
  r.seq_len = 500;
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(AllOf(StartsWith("strategy.context_parallel:"),
                                                           HasSubstr("2 * context_parallel (8)"),
                                                           HasSubstr("seq_len (500)"))));
  r.seq_len = 512;
  // The product includes cp.
  s.data_parallel = 2;
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(AllOf(StartsWith("strategy.data_parallel:"),
                                                           HasSubstr("context_parallel (4)"))));
  s.data_parallel = 1;
  // The ring merges blocks with the math kernel.
  s.attention = Attention::kSdpa;
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(StartsWith("strategy.attention:")));
  s.context_parallel_comm = ContextParallelComm::kAllGather;
  EXPECT_TRUE(CheckCompatible(r, s).ok()) << CheckCompatible(r, s);
  // Sequence parallelism splits each rank's share further.
  s.context_parallel = 2;
  s.tensor_parallel = 2;
  s.sequence_parallel = true;
  EXPECT_TRUE(CheckCompatible(r, s).ok()) << CheckCompatible(r, s);
  s.tensor_parallel = 1;
  s.sequence_parallel = false;
  s.context_parallel = 4;
  r.seq_len = 512;
  // Only the causal decoders split their sequence.
  r.model.family = "bert";
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.context_parallel:"), HasSubstr("bert"),
                                    HasSubstr("mixtral"))));
  // A launcher's script decides for itself.
  r.engine_runs_trials = false;
  EXPECT_TRUE(CheckCompatible(r, s).ok()) << CheckCompatible(r, s);
}

TEST(EnumerateSpace, ContextParallelSizesAddLayoutsAndTheirExchanges) {
  SpaceRequest r = OneOfEach();
  r.world_size = 4;
  r.attentions = {Attention::kMath, Attention::kSdpa};
  r.context_parallel_sizes = {1, 2};
  r.micro_batch_sizes = {2};
  r.tensor_parallel_sizes = {1};
  r.pipeline_parallel_sizes = {1};
  r.shardings = {Sharding::kNone};
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  ASSERT_TRUE(space.ok()) << space.status();
  std::vector<std::string> texts;
  for (const Strategy& s : *space) texts.push_back(StrategyToText(s));
  // cp 1 first (most data parallelism); then cp 2 with p2p (math only) and
  // all_gather (either kernel).
  EXPECT_THAT(texts, ::testing::ElementsAre(
                         "dp=4,tp=1,pp=1,sharding=none,mbs=2,ga=1,precision=fp32,checkpoint=none,"
                         "attention=sdpa,optimizer=adamw,offload=none",
                         "dp=4,tp=1,pp=1,sharding=none,mbs=2,ga=1,precision=fp32,checkpoint=none,"
                         "attention=math,optimizer=adamw,offload=none",
                         "dp=2,tp=1,pp=1,sharding=none,cp=2,cp_comm=all_gather,mbs=2,ga=2,"
                         "precision=fp32,checkpoint=none,attention=sdpa,optimizer=adamw,"
                         "offload=none",
                         "dp=2,tp=1,pp=1,sharding=none,cp=2,cp_comm=p2p,mbs=2,ga=2,precision=fp32,"
                         "checkpoint=none,attention=math,optimizer=adamw,offload=none",
                         "dp=2,tp=1,pp=1,sharding=none,cp=2,cp_comm=all_gather,mbs=2,ga=2,"
                         "precision=fp32,checkpoint=none,attention=math,optimizer=adamw,"
                         "offload=none"));
  r.context_parallel_sizes = {3};
  EXPECT_THAT(EnumerateSpace(r).status(),
              InvalidArgument(StartsWith("context_parallel_sizes: none of (3) divides")));
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

TEST(Compatibility, ExpertParallelismSpreadsTheExpertsAModelHas) {
  const Strategy base =
      MakeStrategy(4, 1, Precision::kFp32, Checkpointing::kNone, Attention::kMath);
  SpaceRequest r = BaseRequest(8, 2);
  r.model = Parsed("mixtral", kMixtral8x7bConfig);  // 8 experts
  Strategy s = WithLayout(base, 2, 1, 1);
  s.expert_parallel = 2;
  EXPECT_TRUE(CheckCompatible(r, s).ok()) << CheckCompatible(r, s);
  // The experts must divide; the layout must hold the expert-parallel ranks.
  r.world_size = 6;
  s = WithLayout(base, 6, 1, 1);
  r.global_batch_size = 24;
  s.expert_parallel = 3;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.expert_parallel:"), HasSubstr("3 ranks"),
                                    HasSubstr("8 experts"))));
  EXPECT_EQ(FirstFailingRule(r, s), "expert_parallel_model");
  s.data_parallel = 3;
  s.tensor_parallel = 2;
  s.expert_parallel = 2;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.expert_parallel:"),
                                    HasSubstr("must divide data_parallel * context_parallel"))));
  // A dense model has nothing to spread; a launcher's script decides.
  r = BaseRequest(8, 2);
  r.model = Parsed("llama", kLlama2_7bConfig);
  s = WithLayout(base, 2, 1, 1);
  s.expert_parallel = 2;
  EXPECT_THAT(CheckCompatible(r, s),
              InvalidArgument(AllOf(StartsWith("strategy.expert_parallel:"), HasSubstr("llama"),
                                    HasSubstr("mixtral"))));
  r.engine_runs_trials = false;
  EXPECT_TRUE(CheckCompatible(r, s).ok());
}

TEST(Compatibility, TensorParallelismSplitsEachExpertEvenly) {
  SpaceRequest r = BaseRequest(8, 4);
  r.model = Parsed("qwen3_moe", Edited(kQwen3_30bA3bConfig, {{"moe_intermediate_size", 770}}));
  const Strategy s = WithLayout(
      MakeStrategy(8, 1, Precision::kFp32, Checkpointing::kNone, Attention::kMath), 1, 4, 1);
  EXPECT_THAT(CheckCompatible(r, s), InvalidArgument(AllOf(StartsWith("strategy.tensor_parallel:"),
                                                           HasSubstr("expert width (770)"))));
  r.model = Parsed("qwen3_moe", kQwen3_30bA3bConfig);  // 768 wide
  EXPECT_TRUE(CheckCompatible(r, s).ok()) << CheckCompatible(r, s);
}

TEST(Compatibility, OnlyGpt2AndTheDecodersSplitTheModel) {
  const Strategy base =
      MakeStrategy(8, 1, Precision::kFp32, Checkpointing::kNone, Attention::kMath);
  for (absl::string_view family : {"bert", "torchscript"}) {
    SpaceRequest r = BaseRequest(8, 2);
    if (family == "bert") r.model = Parsed("bert", kBertBaseConfig);
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

}  // namespace
}  // namespace autoaccel
