// Runs torchscript ranks without sending the model file with every call: a
// RunTrial goes without the file, and only when the worker answers
// model_file_missing is the file read from the coordinator's disk (server/
// model_file_store.h), sent once (TrialExecutor::StoreModelFile) and the
// RunTrial asked again. Each worker receives a job's file once, and the
// coordinator holds a file's bytes only while a StoreModelFile call sends
// them: at most `max_concurrent_sends` at a time, the rest wait in a queue
// holding no bytes.
//
// Thread-safe; `done` runs on the executor's threads, never under a lock.
#ifndef AUTOACCEL_SERVER_MODEL_FILE_DELIVERY_H_
#define AUTOACCEL_SERVER_MODEL_FILE_DELIVERY_H_

#include <deque>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/model_file_store.h"
#include "server/trial_executor.h"

namespace autoaccel {

class ModelFileDelivery {
 public:
  // `executor` and `files` must outlive the delivery.
  ModelFileDelivery(TrialExecutor* executor, const ModelFileStore* files,
                    int max_concurrent_sends = 2)
      : executor_(executor), files_(files), max_sends_(max_concurrent_sends) {}

  // RunTrial of `request` (which carries no model file) at `to`, sending
  // `file` first if the worker lacks it. `done` gets the worker's answer, or
  // the error of reading or sending the file (the trial's attempt then fails
  // outside its strategy: DATA_LOSS when the coordinator lost the file,
  // INTERNAL when the worker still lacks it after receiving it).
  void RunTrial(const WorkerEndpoint& to, const v1::RunTrialRequest& request,
                const ModelFileRef& file, absl::Duration rpc_timeout, TrialExecutor::Done done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // StoreModelFile calls waiting for a turn, and those sending.
  int Waiting() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Sends `file` to `to`, then `next` with the outcome.
  void Send(const WorkerEndpoint& to, const ModelFileRef& file, absl::Duration rpc_timeout,
            std::function<void(absl::Status)> next) ABSL_LOCKS_EXCLUDED(mu_);
  // Frees a sending slot and starts the next waiting send, if any.
  void Finished() ABSL_LOCKS_EXCLUDED(mu_);

  TrialExecutor* const executor_;
  const ModelFileStore* const files_;
  const int max_sends_;
  mutable absl::Mutex mu_;
  int sending_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::function<void()>> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_MODEL_FILE_DELIVERY_H_
