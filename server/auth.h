// Who may call the coordinator. Users present a bearer token
// (common/bearer_token.h) listed in the --tokens file, one
// "TOKEN USER [admin] [expires=WHEN]" per line; workers present the
// --join-token-file's token to register and heartbeat. Both files are read
// again on SIGHUP (Authenticator::Reload): tokens are added, revoked and
// renewed without a restart. A user reads and cancels only their own
// jobs; an admin may do everything. Without a tokens file user
// authentication is off (every caller is an admin named ""), without a join
// token any worker may register: the loopback defaults of a laptop
// (common/listen_policy.h refuses them on other addresses).
#ifndef AUTOACCEL_SERVER_AUTH_H_
#define AUTOACCEL_SERVER_AUTH_H_

#include <grpcpp/server_context.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/token_files.h"

namespace autoaccel {

struct UserToken {
  std::string token;
  std::string user;  // [A-Za-z0-9._@-]+
  bool admin = false;
  absl::Time expires = absl::InfiniteFuture();  // refused from then on
};

// The lines of a tokens file: "TOKEN USER [admin] [expires=WHEN]", WHEN an
// RFC 3339 time (2027-01-31T18:00:00Z) or a date (2027-01-31: its start,
// UTC); blank lines and lines starting with '#' ignored. INVALID_ARGUMENT
// naming `path` and the line for a malformed line, a short token
// (kMinTokenLength, common/token_files.h), a user name outside
// [A-Za-z0-9._@-], a word other than "admin" or "expires=WHEN" after the
// user, or a token listed twice. No error message contains a token. Pure.
absl::StatusOr<std::vector<UserToken>> ParseTokens(absl::string_view text, const std::string& path);
// ParseTokens of the file's content (common/token_files.h ReadSecretFile);
// INVALID_ARGUMENT when it cannot be read or lists no token.
absl::StatusOr<std::vector<UserToken>> ReadTokensFile(const std::string& path);

// The authenticated caller of a user RPC.
struct Caller {
  std::string user;  // "" when user authentication is off
  bool admin = false;
};

// Thread-safe: the checks read a snapshot that Reload replaces whole.
class Authenticator {
 public:
  // No `users`: user authentication off. Empty `join_token`: workers need
  // none. `clock` (null: the real one) must outlive the authenticator.
  Authenticator(std::vector<UserToken> users, std::string join_token, const Clock* clock = nullptr);
  Authenticator() : Authenticator({}, "") {}
  Authenticator& operator=(Authenticator&& other) ABSL_LOCKS_EXCLUDED(mu_);

  // Fixed at construction: a reload neither turns authentication on or off.
  bool users_required() const { return users_required_; }
  bool join_token_required() const { return join_token_required_; }

  // Replaces the tokens and the join token (SIGHUP: the files read again);
  // calls already admitted go on. FAILED_PRECONDITION, changing nothing,
  // when it would turn user tokens or the join token off or on.
  absl::Status Reload(std::vector<UserToken> users, std::string join_token)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The caller whose token the call carries. UNAUTHENTICATED when tokens
  // are required and the call carries none, an unknown one, or one whose
  // expiry has passed (saying when it expired).
  absl::StatusOr<Caller> User(const grpc::ServerContextBase& ctx) const;
  // The same for a token presented outside gRPC (the dashboard's
  // "Authorization: Bearer TOKEN"); "" is no token.
  absl::StatusOr<Caller> UserWithToken(absl::string_view token) const;
  // OK when the call carries the join token (or none is required);
  // UNAUTHENTICATED otherwise.
  absl::Status Worker(const grpc::ServerContextBase& ctx) const;

 private:
  struct Tokens {
    std::vector<UserToken> users;
    std::string join_token;
  };
  std::shared_ptr<const Tokens> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  const Clock* clock_;
  bool users_required_;
  bool join_token_required_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Tokens> tokens_ ABSL_GUARDED_BY(mu_);
};

// Who may read or cancel a job, and whose jobs a caller lists: the one rule
// the gRPC service and the dashboard both apply (docs/SECURITY.md). Pure but
// for `owner_of`.
//
// OK when `caller` may read or cancel job `job_id`: an admin any job (its
// owner is not looked up), a user their own (`owner_of(job_id)`, whose
// error, e.g. NOT_FOUND, is passed on); PERMISSION_DENIED otherwise.
using JobOwnerLookup = std::function<absl::StatusOr<std::string>(const std::string& job_id)>;
absl::Status MayReadJob(const Caller& caller, const std::string& job_id,
                        const JobOwnerLookup& owner_of);
// The owner whose jobs `caller` lists: their own; nullopt (every job's) for
// an admin.
std::optional<std::string> JobsListedFor(const Caller& caller);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_AUTH_H_
