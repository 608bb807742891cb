// The worker's cache of torchscript model files: content-addressed files
// under WORK_DIR/models/, named by the digest the coordinator computed, so
// that every trial of a job (and every rank of a trial) on this worker reads
// one copy, and a file is hashed once, not once per trial.
#ifndef AUTOACCEL_WORKER_MODEL_FILE_CACHE_H_
#define AUTOACCEL_WORKER_MODEL_FILE_CACHE_H_

#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

// Stores `bytes`, the model file a RunTrialRequest brought, as
// `work_dir`/models/ALGORITHM-HEX.pt and returns that path. When a file of
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

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_MODEL_FILE_CACHE_H_
