#include "server/auth.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
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
    if (words.size() < 2 || words.size() > 4) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected \"TOKEN USER [admin] [expires=WHEN]\", found ",
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
    for (size_t i = 2; i < words.size(); ++i) {
      if (words[i] == "admin" && !t.admin) {
        t.admin = true;
      } else if (absl::ConsumePrefix(&words[i], "expires=") &&
                 t.expires == absl::InfiniteFuture()) {
        std::string error;
        if (!absl::ParseTime(absl::RFC3339_full, words[i], &t.expires, &error) &&
            !absl::ParseTime("%Y-%m-%d", words[i], &t.expires, &error)) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": expires='", words[i],
              "' is neither an RFC 3339 time (2027-01-31T18:00:00Z) nor a date (2027-01-31)"));
        }
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(where,
                         ": after the user only \"admin\" and \"expires=WHEN\" may come, "
                         "once each; found '",
                         words[i], "'"));
      }
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

Authenticator::Authenticator(std::vector<UserToken> users, std::string join_token,
                             const Clock* clock)
    : clock_(clock != nullptr ? clock : RealClock()),
      users_required_(!users.empty()),
      join_token_required_(!join_token.empty()),
      tokens_(std::make_shared<const Tokens>(Tokens{std::move(users), std::move(join_token)})) {}

Authenticator& Authenticator::operator=(Authenticator&& other) {
  std::shared_ptr<const Tokens> tokens = other.Snapshot();
  absl::MutexLock lock(&mu_);
  clock_ = other.clock_;
  users_required_ = other.users_required_;
  join_token_required_ = other.join_token_required_;
  tokens_ = std::move(tokens);
  return *this;
}

absl::Status Authenticator::Reload(std::vector<UserToken> users, std::string join_token) {
  if (users.empty() == users_required_ || join_token.empty() == join_token_required_) {
    return absl::FailedPreconditionError(
        "a reload cannot turn user tokens or the join token on or off (restart the server for "
        "that)");
  }
  auto tokens = std::make_shared<const Tokens>(Tokens{std::move(users), std::move(join_token)});
  absl::MutexLock lock(&mu_);
  tokens_ = std::move(tokens);
  return absl::OkStatus();
}

std::shared_ptr<const Authenticator::Tokens> Authenticator::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return tokens_;
}

absl::StatusOr<Caller> Authenticator::User(const grpc::ServerContextBase& ctx) const {
  return UserWithToken(BearerTokenOf(ctx));
}

absl::StatusOr<Caller> Authenticator::UserWithToken(absl::string_view token) const {
  if (!users_required_) return Caller{"", true};
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires a token: give autoaccel --token, $AUTOACCEL_TOKEN or "
        "--token-file");
  }
  const std::shared_ptr<const Tokens> tokens = Snapshot();
  for (const UserToken& t : tokens->users) {
    if (!SecretTokensEqual(token, t.token)) continue;
    if (clock_->Now() >= t.expires) {
      return absl::UnauthenticatedError(
          absl::StrCat("the token of user ", t.user, " expired at ",
                       absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t.expires, absl::UTCTimeZone()),
                       "; ask the coordinator's administrator for a new one"));
    }
    return Caller{t.user, t.admin};
  }
  return absl::UnauthenticatedError("the token is not one this coordinator knows");
}

absl::Status Authenticator::Worker(const grpc::ServerContextBase& ctx) const {
  if (!join_token_required_) return absl::OkStatus();
  const std::string token = BearerTokenOf(ctx);
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires a join token from workers: give autoaccel-worker "
        "--join-token-file");
  }
  if (!SecretTokensEqual(token, Snapshot()->join_token)) {
    return absl::UnauthenticatedError("the join token is not this coordinator's");
  }
  return absl::OkStatus();
}

absl::Status MayReadJob(const Caller& caller, const std::string& job_id,
                        const JobOwnerLookup& owner_of) {
  if (caller.admin) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string owner, owner_of(job_id));
  if (caller.user == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "job ", job_id, " belongs to another user; only its owner or an admin may see or cancel it"));
}

std::optional<std::string> JobsListedFor(const Caller& caller) {
  if (caller.admin) return std::nullopt;
  return caller.user;
}

}  // namespace autoaccel
