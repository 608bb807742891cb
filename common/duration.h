#ifndef AUTOACCEL_COMMON_DURATION_H_
#define AUTOACCEL_COMMON_DURATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace autoaccel {

// Parses a user-facing duration: a number (digits and '.') followed by a unit, one of
// "ms", "s", "m", "h" ("90s", "10m", "1h", "1.5h"). Several parts may be
// concatenated ("1m30s"). Returns INVALID_ARGUMENT naming the text otherwise,
// and for a total too large for absl::Duration (it would be infinite). Zero
// ("0s") parses: what it means, or that it is refused, is the caller's.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// Formats a duration compactly, e.g. "1m30s", "250ms".
std::string FormatDuration(absl::Duration d);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_DURATION_H_
