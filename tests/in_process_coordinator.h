// A coordinator for service tests, in the test's process: a real store in a
// temporary directory, a JobManager with the test's trial executor and a
// fake clock, and its two gRPC services (TuningService, WorkerRegistry) on
// 127.0.0.1:0. Test threads only.
#ifndef AUTOACCEL_TESTS_IN_PROCESS_COORDINATOR_H_
#define AUTOACCEL_TESTS_IN_PROCESS_COORDINATOR_H_

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/client_channel.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/service.h"
#include "server/trial_logs.h"
#include "tests/local_server.h"
#include "tests/subprocess.h"

namespace autoaccel::testing {

// Answers every trial UNAVAILABLE: a coordinator without workers.
class NoWorkers : public TrialExecutor {
 public:
  void RunTrial(const WorkerEndpoint&, const v1::RunTrialRequest&, absl::Duration,
                Done done) override {
    done(absl::UnavailableError("no workers in this test"), v1::RunTrialResponse());
  }
  void CancelTrial(const WorkerEndpoint&, const v1::CancelTrialRequest&) override {}
};

class InProcessCoordinator {
 public:
  // Call Start() (under ASSERT_NO_FATAL_FAILURE) before anything else.
  InProcessCoordinator() = default;
  ~InProcessCoordinator() {
    if (local_.server) local_.server->Shutdown();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // `executor` and `auth` must outlive this. Fails the test if the store,
  // the manager or the server does not start.
  void Start(const std::string& dir_prefix, TrialExecutor* executor, const Authenticator* auth,
             JobManagerOptions options = JobManagerOptions()) {
    dir_ = MakeTempDir(dir_prefix);
    auto store = Store::Open(dir_ + "/db.sqlite");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto manager = JobManager::Create(store_.get(), executor, &clock_, std::move(options));
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
    logs_ = std::make_unique<TrialLogRelay>(manager_.get(), executor);
    tuning_ =
        std::make_unique<TuningServiceImpl>(manager_.get(), store_.get(), auth, "", logs_.get());
    registry_ = std::make_unique<WorkerRegistryImpl>(manager_.get(), auth);
    local_ = ServeLocally({tuning_.get(), registry_.get()});
    ASSERT_NE(local_.server, nullptr);
  }

  // A channel whose calls carry `token` as a bearer token ("" for none).
  std::shared_ptr<grpc::Channel> Channel(const std::string& token = "") const {
    return CreateClientChannel(absl::StrCat("127.0.0.1:", local_.port),
                               grpc::InsecureChannelCredentials(), token);
  }

  JobManager* manager() const { return manager_.get(); }
  Store* store() const { return store_.get(); }
  FakeClock* clock() { return &clock_; }

 private:
  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<TrialLogRelay> logs_;
  std::unique_ptr<TuningServiceImpl> tuning_;
  std::unique_ptr<WorkerRegistryImpl> registry_;
  LocalServer local_;
};

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_IN_PROCESS_COORDINATOR_H_
