#include "common/trial_reason.h"

#include <cctype>
#include <regex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace autoaccel {

std::string ReasonSummary(absl::string_view reason, size_t width) {
  static const std::regex kWho(R"((^|\()(rank \d+ on )?worker [^ ]+: )");
  const std::string text = std::regex_replace(std::string(reason), kWho, "$1");
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  std::string first(absl::StripAsciiWhitespace(lines.front()));
  std::string last;
  if (const size_t at = first.find("; stderr:"); at != std::string::npos) {
    first.erase(at);
    for (size_t i = lines.size(); i-- > 1;) {
      const absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
      if (!line.empty()) {
        last = std::string(line);
        break;
      }
    }
  }
  std::string out = last.empty() ? first : absl::StrCat(first, ": ", last);
  if (width > 3 && out.size() > width) out = out.substr(0, width - 3) + "...";
  return out;
}

std::string ReasonKey(absl::string_view reason) {
  std::string out;
  bool digits = false;
  for (char c : ReasonSummary(reason)) {
    const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (!digit) out.push_back(c);
    if (digit && !digits) out.push_back('#');
    digits = digit;
  }
  return out;
}

}  // namespace autoaccel
