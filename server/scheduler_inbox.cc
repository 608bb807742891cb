#include "server/scheduler_inbox.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace autoaccel {

void SchedulerInbox::Push(RankAnswer answer) {
  absl::MutexLock lock(&mu_);
  answers_.push_back(std::move(answer));
  woken_ = true;
}

std::vector<RankAnswer> SchedulerInbox::Take(size_t max) {
  absl::MutexLock lock(&mu_);
  const size_t n = std::min(max, answers_.size());
  std::vector<RankAnswer> taken(std::make_move_iterator(answers_.begin()),
                                std::make_move_iterator(answers_.begin() + n));
  answers_.erase(answers_.begin(), answers_.begin() + n);
  return taken;
}

size_t SchedulerInbox::pending() const {
  absl::MutexLock lock(&mu_);
  return answers_.size();
}

void SchedulerInbox::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

void SchedulerInbox::WaitForWake(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&woken_), deadline);
  woken_ = false;
}

bool SchedulerInbox::WaitForAnswer(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(this, &SchedulerInbox::HasAnswerLocked), deadline);
}

}  // namespace autoaccel
