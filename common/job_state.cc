#include "common/job_state.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/enum_names.h"

namespace autoaccel {
namespace {

constexpr std::pair<JobState, absl::string_view> kJobStates[] = {
    {JobState::kQueued, "QUEUED"},   {JobState::kWaitingForWorkers, "WAITING_FOR_WORKERS"},
    {JobState::kRunning, "RUNNING"}, {JobState::kSucceeded, "SUCCEEDED"},
    {JobState::kFailed, "FAILED"},   {JobState::kCancelled, "CANCELLED"},
};

}  // namespace

absl::string_view JobStateName(JobState s) { return EnumName(kJobStates, s, "UNKNOWN"); }

absl::StatusOr<JobState> ParseJobState(absl::string_view name) {
  if (std::optional<JobState> s = EnumFromName(kJobStates, name)) return *s;
  return absl::InvalidArgumentError(absl::StrCat("job state: unknown value '", name,
                                                 "' (allowed: ", EnumNameList(kJobStates), ")"));
}

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

bool IsTerminalJobStateName(absl::string_view name) {
  std::optional<JobState> s = EnumFromName(kJobStates, name);
  return s.has_value() && IsTerminal(*s);
}

}  // namespace autoaccel
