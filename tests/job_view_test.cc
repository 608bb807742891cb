#include "server/job_view.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace autoaccel {
namespace {

v1::Trial TrialWithReason(int index, size_t reason_bytes) {
  v1::Trial t;
  t.set_index(index);
  t.set_trial_id("trial-" + std::to_string(index));
  t.set_reason(std::string(reason_bytes, 'x'));
  return t;
}

TEST(JobViewTest, EveryWatchEventOfALongJobFitsAClientsDefaultReceiveLimit) {
  // 3,000 finished trials of about 2 KiB: 2,000 of them alone pass 4 MiB.
  std::vector<v1::Trial> pending;
  for (int i = 0; i < 3000; ++i) pending.push_back(TrialWithReason(i, 2000));
  const size_t max_bytes = size_t{1} << 20;
  size_t next = 0;
  int events = 0;
  while (next < pending.size()) {
    const size_t n = TrialsInNextEvent(pending, next, 2000, max_bytes);
    ASSERT_GT(n, 0u);
    v1::JobEvent event;
    for (size_t i = next; i < next + n; ++i) *event.add_trials() = pending[i];
    EXPECT_LE(event.ByteSizeLong(), max_bytes) << "event " << events;
    EXPECT_EQ(event.trials(0).index(), static_cast<int>(next));
    next += n;
    ++events;
  }
  EXPECT_EQ(next, pending.size());
  EXPECT_GE(events, 6) << "about 500 trials an event";
  // Small trials go by the count bound.
  std::vector<v1::Trial> small;
  for (int i = 0; i < 3000; ++i) small.push_back(TrialWithReason(i, 10));
  EXPECT_EQ(TrialsInNextEvent(small, 0, 2000, max_bytes), 2000u);
  EXPECT_EQ(TrialsInNextEvent(small, 2000, 2000, max_bytes), 1000u);
  EXPECT_EQ(TrialsInNextEvent(small, 3000, 2000, max_bytes), 0u);
}

TEST(JobViewTest, ATrialBiggerThanTheBoundGoesAlone) {
  std::vector<v1::Trial> pending = {TrialWithReason(0, 2 << 20), TrialWithReason(1, 10)};
  EXPECT_EQ(TrialsInNextEvent(pending, 0, 2000, size_t{1} << 20), 1u);
  EXPECT_EQ(TrialsInNextEvent(pending, 1, 2000, size_t{1} << 20), 1u);
}

TEST(JobViewTest, APageOfBigTrialsIsCutShortAndTheNextPageGoesOn) {
  std::vector<TrialRecord> records;
  for (int i = 0; i < 3000; ++i) {
    TrialRecord r;
    r.trial_id = "trial-" + std::to_string(i);
    r.index = i;
    r.strategy_text =
        "dp=1,tp=1,pp=1,sharding=none,mbs=1,ga=1,precision=bf16,checkpoint=none,"
        "attention=sdpa,optimizer=adamw,offload=none";
    r.status = TrialStatus::kFailed;
    r.reason = std::string(2000, 'x');
    records.push_back(r);
  }
  v1::ListTrialsRequest request;
  request.set_page_size(kMaxTrialsPerPage);
  int seen = 0, pages = 0;
  do {
    absl::StatusOr<TrialPage> page = ParseTrialPage(request);
    ASSERT_TRUE(page.ok()) << page.status();
    absl::StatusOr<v1::ListTrialsResponse> out = TrialPageToProto(records, *page, false);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_LE(out->ByteSizeLong(), kMaxTrialBytesPerMessage + 64);
    ASSERT_GT(out->trials_size(), 0);
    EXPECT_EQ(out->trials(0).index(), seen);
    seen += out->trials_size();
    ++pages;
    request.set_page_token(out->next_page_token());
  } while (!request.page_token().empty());
  EXPECT_EQ(seen, 3000);
  EXPECT_GE(pages, 6);
}

// A running job's trial renders from the strategy the manager holds; a
// stored one from its text, which must parse.
TEST(JobViewTest, ARunningTrialRendersFromItsTypedStrategy) {
  TrialRecord r;
  r.trial_id = "job-1-t0000";
  r.strategy_text = "not a strategy";
  absl::StatusOr<Strategy> typed = ParseStrategyText(
      "mbs=2,ga=1,precision=fp32,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none");
  ASSERT_TRUE(typed.ok()) << typed.status();
  absl::StatusOr<v1::Trial> running = TrialToProto(r, &*typed);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->strategy().text(), StrategyToText(*typed));
  EXPECT_EQ(TrialToProto(r).status().code(), absl::StatusCode::kDataLoss);
  // A page of a running job's trials, likewise.
  const std::vector<TrialRecord> trials = {r};
  const std::vector<Strategy> strategies = {*typed};
  absl::StatusOr<v1::ListTrialsResponse> page =
      TrialPageToProto(trials, TrialPage{0, 10}, /*include_pruned=*/true, &strategies);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->trials_size(), 1);
  EXPECT_EQ(page->trials(0).strategy().text(), StrategyToText(*typed));
  EXPECT_EQ(TrialPageToProto(trials, TrialPage{0, 10}, true).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace autoaccel
