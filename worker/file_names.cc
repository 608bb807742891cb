#include "worker/file_names.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace autoaccel {

absl::Status CheckFileNamePart(absl::string_view field, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": missing"));
  if (value.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": longer than 128 characters"));
  }
  const bool safe = std::all_of(value.begin(), value.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!safe || value.front() == '.') {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": only letters, digits, '-', '_' and '.' (not first) are allowed, got '",
        absl::CHexEscape(value), "'"));
  }
  return absl::OkStatus();
}

std::string RankFileStem(absl::string_view trial_id, int attempt, int rank) {
  return absl::StrCat(trial_id, "-a", attempt, "-r", rank);
}

}  // namespace autoaccel
