// Only the worker's coordinator may run or cancel trials here. At
// registration the coordinator hands the worker a session token
// (RegisterResponse.session_token; worker/registrar.h passes it on with
// Accept) and sends it as a bearer token with every RunTrial and CancelTrial;
// a call without it is refused, so no other process that can reach the
// worker's port can run code on its devices. Thread-safe.
#ifndef AUTOACCEL_WORKER_COORDINATOR_GATE_H_
#define AUTOACCEL_WORKER_COORDINATOR_GATE_H_

#include <grpcpp/server_context.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autoaccel {

// How long a call waits for a registration under way (the registrar's
// Register deadline).
inline constexpr absl::Duration kRegistrationWait = absl::Seconds(5);

class CoordinatorGate {
 public:
  // A registration is under way. The coordinator may send a trial (or
  // re-attach one after its restart) as soon as it has answered, before
  // this worker has read the answer: until Accept() or
  // RegistrationFailed(), a call with a token other than the current one
  // waits for the new one (at most kRegistrationWait) instead of being
  // refused; a call with no token is refused at once.
  void RegistrationStarted() ABSL_LOCKS_EXCLUDED(mu_);
  void RegistrationFailed() ABSL_LOCKS_EXCLUDED(mu_);
  // The current registration's token; replaces the previous one (a
  // coordinator that restarted hands out a new one). Ends a registration
  // under way.
  void Accept(std::string session_token) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when the call carries the current token. UNAUTHENTICATED before the
  // first registration, or for a call without it or with another (after
  // waiting for a registration under way). May block the calling thread up
  // to kRegistrationWait.
  absl::Status Check(const grpc::ServerContextBase& ctx) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  bool registering_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_COORDINATOR_GATE_H_
