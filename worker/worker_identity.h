// The worker's identity key: a secret it generates the first time it runs
// under an id and keeps in its work dir, so that the coordinator, which
// binds the id to the first key it sees (RegisterRequest.identity_key),
// lets only this worker register that id again — after a restart, a loss or
// a leave — and never a process that merely holds the join token.
//
// Thread-compatible functions; call before registering.
#ifndef AUTOACCEL_WORKER_WORKER_IDENTITY_H_
#define AUTOACCEL_WORKER_WORKER_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

// Where worker `worker_id`'s key lives in `work_dir`: identity-<id>.key,
// the id's characters other than [A-Za-z0-9._-] written as '_'.
std::string IdentityKeyPath(const std::string& work_dir, const std::string& worker_id);

// The key in `path` (64 hex digits), or a new one written there, readable
// by its owner only (0600, created exclusively: of two workers starting at
// once under one id, both read the same key). INVALID_ARGUMENT for a file
// that is not a key (naming it, never its content); INTERNAL when it cannot
// be read or written.
absl::StatusOr<std::string> LoadOrCreateIdentityKey(const std::string& path);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_WORKER_IDENTITY_H_
