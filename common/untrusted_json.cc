#include "common/untrusted_json.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace autoaccel {

int JsonNestingDepth(absl::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        deepest = std::max(deepest, ++depth);
        break;
      case ']':
      case '}':
        depth = std::max(0, depth - 1);
        break;
      default:
        break;
    }
  }
  return deepest;
}

absl::StatusOr<nlohmann::json> ParseUntrustedJson(absl::string_view text, absl::string_view what,
                                                  int max_depth) {
  if (JsonNestingDepth(text) > max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": nested deeper than ", max_depth, " levels"));
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON (", e.what(), ")"));
  }
}

}  // namespace autoaccel
