#include "worker/coordinator_gate.h"

#include "common/bearer_token.h"
#include "common/secret_token.h"

namespace autoaccel {

void CoordinatorGate::RegistrationStarted() {
  absl::MutexLock lock(&mu_);
  registering_ = true;
}

void CoordinatorGate::RegistrationFailed() {
  absl::MutexLock lock(&mu_);
  registering_ = false;
}

void CoordinatorGate::Accept(std::string session_token) {
  absl::MutexLock lock(&mu_);
  token_ = std::move(session_token);
  registering_ = false;
}

absl::Status CoordinatorGate::Check(const grpc::ServerContextBase& ctx) const {
  const std::string given = BearerTokenOf(ctx);
  absl::MutexLock lock(&mu_);
  // A call with a token that is not the current one may carry the next.
  if (registering_ && !given.empty() && (token_.empty() || !SecretTokensEqual(given, token_))) {
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](const bool* registering) { return !*registering; }, &registering_),
                         kRegistrationWait);
  }
  if (token_.empty()) {
    return absl::UnauthenticatedError(
        "this worker has not registered with its coordinator yet: it runs trials only for it");
  }
  if (!SecretTokensEqual(given, token_)) {
    return absl::UnauthenticatedError(
        "only this worker's coordinator may run or cancel trials here (the call lacks its "
        "session token)");
  }
  return absl::OkStatus();
}

}  // namespace autoaccel
