#include "worker/rank_environment.h"

#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace autoaccel {
namespace {

// Words in a name that say it holds a secret.
constexpr const char* kSecretWords[] = {"TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "KEY"};

bool LooksSecret(absl::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(name);
  for (const char* word : kSecretWords) {
    if (absl::StrContains(upper, word)) return true;
  }
  return false;
}

}  // namespace

RankEnvAllowlist::RankEnvAllowlist()
    : patterns_(std::begin(kDefaultRankEnvironment), std::end(kDefaultRankEnvironment)) {}

RankEnvAllowlist::RankEnvAllowlist(std::vector<std::string> patterns)
    : patterns_(std::move(patterns)) {
  if (patterns_.empty()) *this = RankEnvAllowlist();
}

bool RankEnvAllowlist::Allows(absl::string_view name) const {
  for (const std::string& p : patterns_) {
    if (p == name) return true;  // named exactly: the operator's choice
  }
  if (LooksSecret(name)) return false;
  for (const std::string& p : patterns_) {
    if (!p.empty() && p.back() == '*' &&
        absl::StartsWith(name, absl::string_view(p).substr(0, p.size() - 1))) {
      return true;
    }
  }
  return false;
}

}  // namespace autoaccel
