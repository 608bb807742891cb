#include "server/model_file_delivery.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace autoaccel {

void ModelFileDelivery::RunTrial(const WorkerEndpoint& to, const v1::RunTrialRequest& request,
                                 const ModelFileRef& file, absl::Duration rpc_timeout,
                                 TrialExecutor::Done done) {
  executor_->RunTrial(to, request, rpc_timeout,
                      [this, to, request, file, rpc_timeout, done = std::move(done)](
                          absl::Status status, v1::RunTrialResponse response) mutable {
                        if (!status.ok() || !response.model_file_missing()) {
                          done(std::move(status), std::move(response));
                          return;
                        }
                        Send(to, file, rpc_timeout,
                             [this, to, request = std::move(request), file, rpc_timeout,
                              done = std::move(done)](absl::Status sent) mutable {
                               if (!sent.ok()) {
                                 done(std::move(sent), v1::RunTrialResponse());
                                 return;
                               }
                               executor_->RunTrial(
                                   to, request, rpc_timeout,
                                   [file, done = std::move(done)](absl::Status status,
                                                                  v1::RunTrialResponse response) {
                                     if (status.ok() && response.model_file_missing()) {
                                       status = absl::InternalError(absl::StrCat(
                                           "the worker still lacks job ", file.job_id,
                                           "'s model file (", file.digest, ") after receiving it"));
                                     }
                                     done(std::move(status), std::move(response));
                                   });
                             });
                      });
}

void ModelFileDelivery::Send(const WorkerEndpoint& to, const ModelFileRef& file,
                             absl::Duration rpc_timeout, std::function<void(absl::Status)> next) {
  auto start = [this, to, file, rpc_timeout, next = std::move(next)]() mutable {
    absl::StatusOr<std::string> bytes = files_->Read(file);
    if (!bytes.ok()) {
      Finished();
      next(bytes.status());
      return;
    }
    v1::StoreModelFileRequest request;
    request.set_digest(file.digest);
    *request.mutable_model_file() = *std::move(bytes);
    executor_->StoreModelFile(to, std::move(request), rpc_timeout,
                              [this, next = std::move(next)](absl::Status sent) {
                                Finished();
                                next(std::move(sent));
                              });
  };
  {
    absl::MutexLock lock(&mu_);
    if (sending_ >= max_sends_) {
      waiting_.push_back(std::move(start));
      return;
    }
    ++sending_;
  }
  start();
}

void ModelFileDelivery::Finished() {
  std::function<void()> start;
  {
    absl::MutexLock lock(&mu_);
    if (waiting_.empty()) {
      --sending_;
      return;
    }
    start = std::move(waiting_.front());  // the slot passes to it
    waiting_.pop_front();
  }
  start();
}

int ModelFileDelivery::Waiting() const {
  absl::MutexLock lock(&mu_);
  return sending_ + static_cast<int>(waiting_.size());
}

}  // namespace autoaccel
