// The worker's cache of torchscript model files: content-addressed files
// under WORK_DIR/models/, named by the digest the coordinator computed, so
// that every trial of a job (and every rank of a trial) on this worker reads
// one copy, and a file is hashed once, not once per trial.
#ifndef AUTOACCEL_WORKER_MODEL_FILE_CACHE_H_
#define AUTOACCEL_WORKER_MODEL_FILE_CACHE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace autoaccel {

// Stores `bytes`, the model file the coordinator sent (StoreModelFile, or a
// RunTrialRequest that brought it), as `work_dir`/models/ALGORITHM-HEX.pt
// (in a 0700 directory: other users of the host cannot reach a user's
// model; the file is 0644 so that a rank the sandbox runs as another user
// reads it through its bind) and returns that path. When a file of
// that name and size is there already (an earlier trial stored it) the
// bytes are not hashed again and the path is returned.
//
// `digest`: "ALGORITHM:HEX" (common/content_digest.h); `writer`: a name part
// unique to the caller (the rank's RankFileStem), so that concurrent writers
// of one file each write their own temporary file and rename it into place:
// no trial ever reads half a file.
//
// INVALID_ARGUMENT when `bytes` is empty ("model_file: ..."), when `digest`
// is not ALGORITHM:HEX with a safe algorithm name ("script_digest: ..."), or
// when the bytes do not hash to `digest` ("model_file: content digest ...");
// INTERNAL when the directory or the file cannot be written. Blocks on the
// disk (and on hashing up to the RPC message limit). Thread-safe.
absl::StatusOr<std::string> StoreModelFile(const std::string& work_dir, const std::string& digest,
                                           const std::string& bytes, const std::string& writer);

// The path of the file stored for `digest`, or nullopt when none is (the
// coordinator is then asked for it: RunTrialResponse.model_file_missing).
// A file found is marked used now (its modification time), for
// RemoveUnusedModelFiles. INVALID_ARGUMENT for a malformed digest, as
// StoreModelFile. Thread-safe.
absl::StatusOr<std::optional<std::string>> FindModelFile(const std::string& work_dir,
                                                         const std::string& digest);

// Deletes the model files (and temporary files left by a killed writer) not
// used for `unused_for`: a worker started on its work dir calls it, so that
// its users' models do not stay on its disk forever. Returns how many.
int RemoveUnusedModelFiles(const std::string& work_dir, absl::Duration unused_for);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_MODEL_FILE_CACHE_H_
