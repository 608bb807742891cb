// Who may call the coordinator. Users present a bearer token
// (common/bearer_token.h) listed in the --tokens file, one
// "TOKEN USER [admin]" per line; workers present the --join-token-file's
// token to register and heartbeat. A user reads and cancels only their own
// jobs; an admin may do everything. Without a tokens file user
// authentication is off (every caller is an admin named ""), without a join
// token any worker may register: the loopback defaults of a laptop
// (common/listen_policy.h refuses them on other addresses).
#ifndef AUTOACCEL_SERVER_AUTH_H_
#define AUTOACCEL_SERVER_AUTH_H_

#include <grpcpp/server_context.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/token_files.h"

namespace autoaccel {

struct UserToken {
  std::string token;
  std::string user;  // [A-Za-z0-9._@-]+
  bool admin = false;
};

// The lines of a tokens file: "TOKEN USER [admin]", blank lines and lines
// starting with '#' ignored. INVALID_ARGUMENT naming `path` and the line for
// a malformed line, a short token (kMinTokenLength, common/token_files.h),
// a user name outside
// [A-Za-z0-9._@-], a third word other than "admin", or a token listed
// twice. No error message contains a token. Pure.
absl::StatusOr<std::vector<UserToken>> ParseTokens(absl::string_view text, const std::string& path);
// ParseTokens of the file's content (common/token_files.h ReadSecretFile);
// INVALID_ARGUMENT when it cannot be read or lists no token.
absl::StatusOr<std::vector<UserToken>> ReadTokensFile(const std::string& path);

// The authenticated caller of a user RPC.
struct Caller {
  std::string user;  // "" when user authentication is off
  bool admin = false;
};

// Immutable after construction; thread-safe.
class Authenticator {
 public:
  // No `users`: user authentication off. Empty `join_token`: workers need none.
  Authenticator(std::vector<UserToken> users, std::string join_token)
      : users_(std::move(users)), join_token_(std::move(join_token)) {}
  Authenticator() = default;

  bool users_required() const { return !users_.empty(); }
  bool join_token_required() const { return !join_token_.empty(); }

  // The caller whose token the call carries. UNAUTHENTICATED when tokens
  // are required and the call carries none or an unknown one.
  absl::StatusOr<Caller> User(const grpc::ServerContextBase& ctx) const;
  // The same for a token presented outside gRPC (the dashboard's
  // "Authorization: Bearer TOKEN"); "" is no token.
  absl::StatusOr<Caller> UserWithToken(absl::string_view token) const;
  // OK when the call carries the join token (or none is required);
  // UNAUTHENTICATED otherwise.
  absl::Status Worker(const grpc::ServerContextBase& ctx) const;

 private:
  std::vector<UserToken> users_;
  std::string join_token_;
};

// OK when `caller` may read or cancel job `job_id` owned by `owner` (its
// own, or an admin); PERMISSION_DENIED otherwise. Pure.
absl::Status MayAccessJob(const Caller& caller, const std::string& owner,
                          const std::string& job_id);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_AUTH_H_
