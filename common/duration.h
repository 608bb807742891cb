#ifndef AUTOACCEL_COMMON_DURATION_H_
#define AUTOACCEL_COMMON_DURATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace autoaccel {

// Parses a user-facing duration: a positive number followed by a unit, one of
// "ms", "s", "m", "h" ("90s", "10m", "1h", "1.5h"). Several parts may be
// concatenated ("1m30s"). Returns INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// Formats a duration compactly, e.g. "1m30s", "250ms".
std::string FormatDuration(absl::Duration d);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_DURATION_H_
