// The TorchScript files of unfinished jobs, kept on disk rather than in the
// coordinator's memory: DIR/JOB_ID.pt, 0600 in a 0700 directory beside the
// database (server/main.cc: DB.model-files), written when the job is
// submitted, read only to send a worker that lacks it (server/
// model_file_delivery.h), removed when the job finishes, and found again by
// the next coordinator process when it takes the job up after a restart.
//
// Bounded: the bytes held for one user's unfinished jobs, and for all of
// them, each have a cap; a submission over one is refused.
//
// Thread-safe; blocks on the disk.
#ifndef AUTOACCEL_SERVER_MODEL_FILE_STORE_H_
#define AUTOACCEL_SERVER_MODEL_FILE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace autoaccel {

// A job's model file on the coordinator's disk.
struct ModelFileRef {
  std::string job_id;
  std::string path;
  std::string digest;  // "ALGORITHM:HEX" (common/content_digest.h)
  int64_t bytes = 0;
};

struct ModelFileLimits {
  int64_t per_user_bytes = int64_t{4} << 30;  // one user's unfinished jobs
  int64_t total_bytes = int64_t{32} << 30;    // every user's
};

class ModelFileStore {
 public:
  // Creates `dir` (0700) if needed. An empty `dir`: a private temporary
  // directory, removed with the store (an in-memory database's coordinator
  // and tests). INTERNAL when the directory cannot be created.
  static absl::StatusOr<std::unique_ptr<ModelFileStore>> Open(const std::string& dir,
                                                              ModelFileLimits limits);
  ~ModelFileStore();

  // Writes `bytes` (hashing to `digest`) as job `job_id`'s file, counted for
  // `owner` ("" when users are off: only the total cap applies).
  // RESOURCE_EXHAUSTED naming the cap when the owner's or everyone's held
  // bytes would exceed it ("model files: ..."); INTERNAL when the disk
  // refuses (nothing is left behind then).
  absl::StatusOr<ModelFileRef> Put(const std::string& job_id, const std::string& owner,
                                   const std::string& digest, const std::string& bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Job `job_id`'s file, written by an earlier process, counted again for
  // `owner` (caps are not applied: the job was accepted).
  // NOT_FOUND when it is not there.
  absl::StatusOr<ModelFileRef> Adopt(const std::string& job_id, const std::string& owner,
                                     const std::string& digest) ABSL_LOCKS_EXCLUDED(mu_);
  // The file's bytes. DATA_LOSS when it is gone or its size changed.
  absl::StatusOr<std::string> Read(const ModelFileRef& file) const;
  // Deletes the job's file and stops counting it; nothing when there is none.
  void Remove(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Deletes every file (and leftover temporary file) of a job not in `keep`:
  // those of jobs that finished while no process could delete them.
  // Returns how many were deleted.
  int RemoveAllBut(const std::set<std::string>& keep) ABSL_LOCKS_EXCLUDED(mu_);

  // Bytes held for every unfinished job, and for `owner`'s.
  int64_t HeldBytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t HeldBytes(const std::string& owner) const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& dir() const { return dir_; }

 private:
  ModelFileStore(std::string dir, bool owns_dir, ModelFileLimits limits)
      : dir_(std::move(dir)), owns_dir_(owns_dir), limits_(limits) {}
  std::string PathOf(const std::string& job_id) const;
  void CountLocked(const std::string& job_id, const std::string& owner, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const bool owns_dir_;
  const ModelFileLimits limits_;
  mutable absl::Mutex mu_;
  struct Held {
    std::string owner;
    int64_t bytes = 0;
  };
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);  // by job id, reserved or written
  std::map<std::string, int64_t> by_owner_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_MODEL_FILE_STORE_H_
