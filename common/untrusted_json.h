// Parsing JSON that comes from outside the process (requests, trial specs and
// results, files), with its nesting bounded before anything recursive sees it:
// 200 KB of "[[[[..." nested 100,000 deep would otherwise overflow the stack
// of whatever copies, prints or destroys the parsed value.
#ifndef AUTOACCEL_COMMON_UNTRUSTED_JSON_H_
#define AUTOACCEL_COMMON_UNTRUSTED_JSON_H_

#include <cstdint>
#include <limits>
#include <type_traits>

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

// Reads `v` as an integer of type T: true and `*out` set when `v` is a JSON
// integer within T's range; false (and `*out` unchanged) for anything else,
// where nlohmann's get<T>() would truncate 2.5 or convert 1e20 with undefined
// behaviour. Thread-safe.
template <typename T>
bool JsonToInteger(const nlohmann::json& v, T* out) {
  static_assert(std::is_integral_v<T>);
  const uint64_t max = static_cast<uint64_t>(std::numeric_limits<T>::max());
  const int64_t min = std::is_signed_v<T> ? static_cast<int64_t>(std::numeric_limits<T>::min()) : 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > max) return false;
    *out = static_cast<T>(u);
    return true;
  }
  if (!v.is_number_integer()) return false;
  const int64_t i = v.get<int64_t>();
  if (i < min || (i > 0 && static_cast<uint64_t>(i) > max)) return false;
  *out = static_cast<T>(i);
  return true;
}

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_UNTRUSTED_JSON_H_
