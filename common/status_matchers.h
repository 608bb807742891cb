// gmock matchers for absl::Status and absl::StatusOr<T>, for tests only.
//   EXPECT_THAT(store->CreateJob(job), IsOk());
//   EXPECT_THAT(ParseStrategyText("mbs=0"),
//               StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mbs")));
#ifndef AUTOACCEL_COMMON_STATUS_MATCHERS_H_
#define AUTOACCEL_COMMON_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace autoaccel {
namespace status_internal {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace status_internal

MATCHER(IsOk, "is OK") {
  const absl::Status& s = status_internal::GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s.ToString();
  return s.ok();
}

// Matches a status (or StatusOr) with `code` whose message matches `message_matcher`.
MATCHER_P2(StatusIs, code, message_matcher, "") {
  const absl::Status& s = status_internal::GetStatus(arg);
  if (s.code() != code) {
    *result_listener << "code is " << absl::StatusCodeToString(s.code()) << ": " << s.message();
    return false;
  }
  return ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

}  // namespace autoaccel

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::autoaccel::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::autoaccel::IsOk())

#endif  // AUTOACCEL_COMMON_STATUS_MATCHERS_H_
