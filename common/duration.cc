#include "common/duration.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace autoaccel {

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration '", text,
                     "': expected a number and a unit (ms, s, m, h), e.g. 90s, 10m, 1h"));
  };
  auto out_of_range = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration '", text, "': too large (e.g. 90s, 10m, 1h)"));
  };
  if (text.empty()) return bad();
  absl::Duration total = absl::ZeroDuration();
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
    }
    if (i == start) return bad();
    std::string number(text.substr(start, i - start));
    char* end = nullptr;
    double value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size()) return bad();
    if (!std::isfinite(value)) return out_of_range();
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    absl::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit == "ms") {
      total += absl::Milliseconds(value);
    } else if (unit == "s") {
      total += absl::Seconds(value);
    } else if (unit == "m") {
      total += absl::Minutes(value);
    } else if (unit == "h") {
      total += absl::Hours(value);
    } else {
      return bad();
    }
  }
  if (total == absl::InfiniteDuration()) return out_of_range();
  return total;
}

std::string FormatDuration(absl::Duration d) { return absl::FormatDuration(d); }

}  // namespace autoaccel
