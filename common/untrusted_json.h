// Parsing JSON that comes from outside the process (requests, trial specs and
// results, files), with its nesting bounded before anything recursive sees it:
// 200 KB of "[[[[..." nested 100,000 deep would otherwise overflow the stack
// of whatever copies, prints or destroys the parsed value.
#ifndef AUTOACCEL_COMMON_UNTRUSTED_JSON_H_
#define AUTOACCEL_COMMON_UNTRUSTED_JSON_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

// Deep enough for any config, spec or result this project reads.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (brackets inside
// strings, escaped quotes included, do not count). Linear, no recursion;
// `text` need not be valid JSON.
int JsonNestingDepth(absl::string_view text);

// Parses `text`; INVALID_ARGUMENT naming `what` when it nests deeper than
// `max_depth` ("model_config: nested deeper than 64 levels") or is not
// valid JSON ("model_config: not valid JSON: ..."). Thread-safe.
absl::StatusOr<nlohmann::json> ParseUntrustedJson(absl::string_view text, absl::string_view what,
                                                  int max_depth = kMaxJsonDepth);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_UNTRUSTED_JSON_H_
