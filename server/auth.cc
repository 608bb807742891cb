#include "server/auth.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/bearer_token.h"
#include "common/secret_token.h"
#include "common/status_macros.h"
#include "common/token_files.h"

namespace autoaccel {
namespace {

bool IsUserName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '@' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<UserToken>> ParseTokens(absl::string_view text,
                                                   const std::string& path) {
  std::vector<UserToken> tokens;
  std::set<std::string> seen;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = absl::StrCat(path, ":", line_number);
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() < 2 || words.size() > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected \"TOKEN USER\" or \"TOKEN USER admin\", found ",
                       words.size(), " word(s)"));
    }
    UserToken t;
    t.token = std::string(words[0]);
    t.user = std::string(words[1]);
    if (static_cast<int>(t.token.size()) < kMinTokenLength) return ShortTokenError(where);
    if (!IsUserName(t.user)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": user '", t.user, "' must be 1-128 characters of A-Z a-z 0-9 . _ @ -"));
    }
    if (words.size() == 3) {
      if (words[2] != "admin") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": the third word may only be \"admin\", found '", words[2], "'"));
      }
      t.admin = true;
    }
    if (!seen.insert(t.token).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": this token is listed twice (each user needs their own)"));
    }
    tokens.push_back(std::move(t));
  }
  return tokens;
}

absl::StatusOr<std::vector<UserToken>> ReadTokensFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadSecretFile(path, "--tokens"));
  ASSIGN_OR_RETURN(std::vector<UserToken> tokens, ParseTokens(text, path));
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokens: '", path, "' lists no token (one \"TOKEN USER [admin]\" per line)"));
  }
  return tokens;
}

absl::StatusOr<Caller> Authenticator::User(const grpc::ServerContextBase& ctx) const {
  return UserWithToken(BearerTokenOf(ctx));
}

absl::StatusOr<Caller> Authenticator::UserWithToken(absl::string_view token) const {
  if (users_.empty()) return Caller{"", true};
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires a token: give autoaccel --token, $AUTOACCEL_TOKEN or "
        "--token-file");
  }
  for (const UserToken& t : users_) {
    if (SecretTokensEqual(token, t.token)) return Caller{t.user, t.admin};
  }
  return absl::UnauthenticatedError("the token is not one this coordinator knows");
}

absl::Status Authenticator::Worker(const grpc::ServerContextBase& ctx) const {
  if (join_token_.empty()) return absl::OkStatus();
  const std::string token = BearerTokenOf(ctx);
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires a join token from workers: give autoaccel-worker "
        "--join-token-file");
  }
  if (!SecretTokensEqual(token, join_token_)) {
    return absl::UnauthenticatedError("the join token is not this coordinator's");
  }
  return absl::OkStatus();
}

absl::Status MayAccessJob(const Caller& caller, const std::string& owner,
                          const std::string& job_id) {
  if (caller.admin || caller.user == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "job ", job_id, " belongs to another user; only its owner or an admin may see or cancel it"));
}

}  // namespace autoaccel
