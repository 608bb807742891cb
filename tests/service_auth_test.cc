// Who may call the coordinator, through its real gRPC services on
// 127.0.0.1:0 with a real store and job manager: every user RPC without a
// token is UNAUTHENTICATED, another user's job is PERMISSION_DENIED, an
// admin may do everything, and a worker needs the join token and cannot take
// a live worker's id.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/service.h"
#include "tests/in_process_coordinator.h"
#include "tests/register_request.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
  "n_positions": 32})";
constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kCarol[] = "carol-token-0123456789";
constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kJoin[] = "join-token-0123456789ab";

class ServiceAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto users = ParseTokens(absl::StrCat(kAlice, " alice\n", kCarol, " carol\n# a comment\n\n",
                                          kAdmin, " root admin\n"),
                             "tokens");
    ASSERT_TRUE(users.ok()) << users.status();
    auth_ = std::make_unique<Authenticator>(*users, kJoin);
    ASSERT_NO_FATAL_FAILURE(coordinator_.Start("autoaccel-auth-", &executor_, auth_.get()));
    manager_ = coordinator_.manager();
  }

  std::shared_ptr<grpc::Channel> As(const std::string& token) {
    return coordinator_.Channel(token);
  }
  std::unique_ptr<v1::TuningService::Stub> Tuning(const std::string& token) {
    return v1::TuningService::NewStub(As(token));
  }

  static v1::SubmitJobRequest Submit() {
    v1::SubmitJobRequest r;
    r.mutable_request()->mutable_model()->set_family("gpt2");
    r.mutable_request()->mutable_model()->set_config_json(kTinyGpt);
    r.mutable_request()->set_seq_len(16);
    r.mutable_request()->set_global_batch_size(4);
    r.mutable_request()->set_time_limit_seconds(60);
    return r;
  }
  // alice's job.
  std::string AliceJob() {
    grpc::ClientContext ctx;
    v1::Job job;
    grpc::Status s = Tuning(kAlice)->SubmitJob(&ctx, Submit(), &job);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(job.owner(), "alice");
    return job.job_id();
  }

  // Each of the job RPCs on `job_id` as `token`: their status codes, in the
  // order GetJob, WatchJob, ListTrials, CancelJob.
  std::vector<grpc::StatusCode> JobCalls(const std::string& token, const std::string& job_id) {
    auto stub = Tuning(token);
    std::vector<grpc::StatusCode> codes;
    {
      grpc::ClientContext ctx;
      v1::GetJobRequest r;
      r.set_job_id(job_id);
      v1::Job job;
      codes.push_back(stub->GetJob(&ctx, r, &job).error_code());
    }
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::WatchJobRequest r;
      r.set_job_id(job_id);
      auto reader = stub->WatchJob(&ctx, r);
      v1::JobEvent event;
      const bool got = reader->Read(&event);
      if (got) ctx.TryCancel();
      grpc::Status s = reader->Finish();
      codes.push_back(got ? grpc::StatusCode::OK : s.error_code());
    }
    {
      grpc::ClientContext ctx;
      v1::ListTrialsRequest r;
      r.set_job_id(job_id);
      v1::ListTrialsResponse resp;
      codes.push_back(stub->ListTrials(&ctx, r, &resp).error_code());
    }
    {
      grpc::ClientContext ctx;
      v1::CancelJobRequest r;
      r.set_job_id(job_id);
      v1::Job job;
      codes.push_back(stub->CancelJob(&ctx, r, &job).error_code());
    }
    return codes;
  }

  // A deepspeed export of job `job_id`'s best, or of a strategy without one.
  static v1::ExportRequest ExportOf(const std::string& job_id) {
    v1::ExportRequest r;
    r.set_job_id(job_id);
    if (job_id.empty()) {
      r.set_strategy("mbs=4");
      r.set_world_size(1);
      r.set_global_batch_size(4);
      r.set_seq_len(16);
    }
    r.set_format("deepspeed");
    return r;
  }
  grpc::Status ExportCall(const std::string& token, const std::string& job_id) {
    grpc::ClientContext ctx;
    v1::ExportAnswer answer;
    return Tuning(token)->Export(&ctx, ExportOf(job_id), &answer);
  }

  // GetTrialLogs of the job's first trial as `token`.
  grpc::Status LogsCall(const std::string& token, const std::string& job_id) {
    grpc::ClientContext ctx;
    v1::GetTrialLogsRequest r;
    r.set_job_id(job_id);
    r.set_index(0);
    v1::TrialLogs logs;
    return Tuning(token)->GetTrialLogs(&ctx, r, &logs);
  }

  testing::NoWorkers executor_;
  std::unique_ptr<Authenticator> auth_;
  testing::InProcessCoordinator coordinator_;
  JobManager* manager_ = nullptr;  // coordinator_'s
};

TEST_F(ServiceAuthTest, EveryUserRpcWithoutAValidTokenIsUnauthenticated) {
  const std::string job_id = AliceJob();
  for (const std::string token : {"", "not-a-known-token-at-all"}) {
    auto stub = Tuning(token);
    std::vector<std::pair<std::string, grpc::Status>> calls;
    {
      grpc::ClientContext ctx;
      v1::Job job;
      calls.emplace_back("SubmitJob", stub->SubmitJob(&ctx, Submit(), &job));
    }
    {
      grpc::ClientContext ctx;
      v1::ListJobsResponse resp;
      calls.emplace_back("ListJobs", stub->ListJobs(&ctx, v1::ListJobsRequest(), &resp));
    }
    {
      grpc::ClientContext ctx;
      v1::QueryStrategiesResponse resp;
      calls.emplace_back("QueryStrategies",
                         stub->QueryStrategies(&ctx, v1::QueryStrategiesRequest(), &resp));
    }
    {
      grpc::ClientContext ctx;
      v1::ListStrategiesResponse resp;
      calls.emplace_back("ListStrategies",
                         stub->ListStrategies(&ctx, v1::ListStrategiesRequest(), &resp));
    }
    {
      grpc::ClientContext ctx;
      v1::ListWorkersResponse resp;
      calls.emplace_back("ListWorkers", stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp));
    }
    {
      grpc::ClientContext ctx;
      v1::EstimateRequest r;
      r.set_list_devices(true);
      v1::EstimateAnswer resp;
      calls.emplace_back("Estimate", stub->Estimate(&ctx, r, &resp));
    }
    {
      grpc::ClientContext ctx;
      v1::ExportAnswer resp;
      calls.emplace_back("Export", stub->Export(&ctx, ExportOf(""), &resp));
    }
    for (const auto& [name, status] : calls) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << name << " " << token;
    }
    EXPECT_THAT(JobCalls(token, job_id), ::testing::Each(grpc::StatusCode::UNAUTHENTICATED))
        << "GetJob, WatchJob, ListTrials, CancelJob with token '" << token << "'";
    EXPECT_EQ(LogsCall(token, job_id).error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
  }
  // The message says where a token goes; it never echoes one.
  grpc::ClientContext ctx;
  v1::ListJobsResponse resp;
  grpc::Status s = Tuning("")->ListJobs(&ctx, v1::ListJobsRequest(), &resp);
  EXPECT_THAT(s.error_message(), HasSubstr("--token"));
  EXPECT_EQ(manager_->GetJob(job_id)->state(), "QUEUED") << "nothing cancelled it";
}

TEST_F(ServiceAuthTest, AUserSeesAndCancelsOnlyTheirOwnJobsAndAnAdminAll) {
  const std::string job_id = AliceJob();
  EXPECT_THAT(JobCalls(kCarol, job_id), ::testing::Each(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_EQ(LogsCall(kCarol, job_id).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ExportCall(kCarol, job_id).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(ExportCall(kCarol, "").ok()) << "a strategy's export is anyone's";
  EXPECT_EQ(manager_->GetJob(job_id)->state(), "QUEUED");
  // Alice and the admin get past the check: the queued job has no trial yet.
  for (const char* token : {kAlice, kAdmin}) {
    grpc::Status logs = LogsCall(token, job_id);
    EXPECT_EQ(logs.error_code(), grpc::StatusCode::NOT_FOUND) << token;
    EXPECT_THAT(logs.error_message(), HasSubstr("has no trial #0")) << token;
    grpc::Status exported = ExportCall(token, job_id);
    EXPECT_EQ(exported.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << token;
    EXPECT_THAT(exported.error_message(), HasSubstr("has no best strategy to export yet"));
  }
  {
    grpc::ClientContext ctx;
    v1::ListJobsResponse resp;
    ASSERT_TRUE(Tuning(kCarol)->ListJobs(&ctx, v1::ListJobsRequest(), &resp).ok());
    EXPECT_EQ(resp.jobs_size(), 0) << "carol lists only her own jobs";
  }
  {
    grpc::ClientContext ctx;
    v1::ListJobsResponse resp;
    ASSERT_TRUE(Tuning(kAdmin)->ListJobs(&ctx, v1::ListJobsRequest(), &resp).ok());
    ASSERT_EQ(resp.jobs_size(), 1);
    EXPECT_EQ(resp.jobs(0).owner(), "alice");
  }
  // Alice reads her job; the admin cancels it.
  std::vector<grpc::StatusCode> alice = JobCalls(kAlice, job_id);
  alice.pop_back();  // her own cancel is left to the admin
  EXPECT_THAT(alice, ::testing::Each(grpc::StatusCode::OK));
  EXPECT_THAT(JobCalls(kAdmin, job_id), ::testing::Each(grpc::StatusCode::OK));
  EXPECT_EQ(manager_->GetJob(job_id)->state(), "CANCELLED");
  // Strategies and workers are shared knowledge: any user may read them.
  grpc::ClientContext ctx;
  v1::ListWorkersResponse workers;
  EXPECT_TRUE(Tuning(kCarol)->ListWorkers(&ctx, v1::ListWorkersRequest(), &workers).ok());
}

TEST_F(ServiceAuthTest, AWorkerNeedsTheJoinTokenAndCannotTakeALiveWorkersId) {
  const v1::RegisterRequest request = RegisterRequestFor("w1", "127.0.0.1:7001", 1);
  for (const std::string token : {"", "wrong-join-token-0123456789", kAlice}) {
    auto stub = v1::WorkerRegistry::NewStub(As(token));
    grpc::ClientContext ctx;
    v1::RegisterResponse resp;
    EXPECT_EQ(stub->Register(&ctx, request, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << token;
  }
  EXPECT_TRUE(manager_->ListWorkers().empty());

  auto worker = v1::WorkerRegistry::NewStub(As(kJoin));
  v1::RegisterResponse registered;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(worker->Register(&ctx, request, &registered).ok());
    EXPECT_EQ(registered.session_token().size(), 64u);
  }
  {
    // Heartbeats need the join token and the session token.
    v1::HeartbeatRequest beat;
    beat.set_worker_id("w1");
    beat.set_session_token(registered.session_token());
    v1::HeartbeatResponse resp;
    grpc::ClientContext no_join, ok, forged;
    EXPECT_EQ(v1::WorkerRegistry::NewStub(As(""))->Heartbeat(&no_join, beat, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(worker->Heartbeat(&ok, beat, &resp).ok());
    beat.set_session_token("guess");
    EXPECT_EQ(worker->Heartbeat(&forged, beat, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    // A forged worker with the join token but not the session: refused, and
    // the registered one keeps its address and devices.
    v1::RegisterRequest forged = RegisterRequestFor("w1", "10.9.9.9:1", 1000);
    grpc::ClientContext ctx;
    v1::RegisterResponse resp;
    grpc::Status s = worker->Register(&ctx, forged, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
    EXPECT_TRUE(resp.session_token().empty());
    ASSERT_EQ(manager_->ListWorkers().size(), 1u);
    EXPECT_EQ(manager_->ListWorkers()[0].address(), "127.0.0.1:7001");
  }
}

TEST(JobAccessTest, AUserReadsTheirOwnJobsAndAnAdminAnyWithoutALookup) {
  int lookups = 0;
  const JobOwnerLookup owner_of = [&lookups](const std::string& id) -> absl::StatusOr<std::string> {
    ++lookups;
    if (id == "gone") return absl::NotFoundError("job gone not found");
    return std::string("alice");
  };
  Caller alice{.user = "alice"}, bob{.user = "bob"}, admin{.user = "root", .admin = true};
  EXPECT_OK(MayReadJob(alice, "j1", owner_of));
  EXPECT_THAT(MayReadJob(bob, "j1", owner_of),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("belongs to another user")));
  EXPECT_THAT(MayReadJob(bob, "gone", owner_of),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));
  lookups = 0;
  EXPECT_OK(MayReadJob(admin, "gone", owner_of));
  EXPECT_EQ(lookups, 0) << "an admin's access needs no owner";
  EXPECT_EQ(JobsListedFor(alice), std::optional<std::string>("alice"));
  EXPECT_EQ(JobsListedFor(admin), std::nullopt);
}

TEST(TokensFileTest, MalformedLinesAreRefusedNamingTheLineAndNeverTheToken) {
  EXPECT_THAT(ParseTokens("short bob\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f:1: a token must have")));
  auto refused = ParseTokens("# users\nsecret-token-0123456789 bob root\n", "f");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f:2")));
  EXPECT_THAT(refused.status().message(), ::testing::Not(HasSubstr("secret-token")));
  EXPECT_THAT(ParseTokens("secret-token-0123456789\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("TOKEN USER")));
  EXPECT_THAT(ParseTokens("secret-token-0123456789 bo/b\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("user 'bo/b'")));
  EXPECT_THAT(
      ParseTokens("secret-token-0123456789 a\nsecret-token-0123456789 b\n", "f"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f:2: this token is listed twice")));
  auto good = ParseTokens("  secret-token-0123456789\tbob  admin \n", "f");
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->size(), 1u);
  EXPECT_EQ((*good)[0].user, "bob");
  EXPECT_TRUE((*good)[0].admin);
  EXPECT_EQ((*good)[0].expires, absl::InfiniteFuture());
  EXPECT_THAT(ParseTokens("secret-token-0123456789 bob expires=soon\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f:1: expires='soon'")));
  EXPECT_THAT(ParseTokens("secret-token-0123456789 bob admin admin\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("once each")));
}

TEST(TokensFileTest, ATokenExpiresWhenItsLineSays) {
  auto tokens = ParseTokens(
      "secret-token-0123456789 bob expires=2027-01-31\n"
      "other-token-0123456789ab carol admin expires=2027-01-31T18:00:00+02:00\n",
      "f");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)[0].expires,
            absl::FromCivil(absl::CivilDay(2027, 1, 31), absl::UTCTimeZone()));
  EXPECT_EQ((*tokens)[1].expires,
            absl::FromCivil(absl::CivilSecond(2027, 1, 31, 16, 0, 0), absl::UTCTimeZone()));
  FakeClock clock;
  clock.SetTime(absl::FromCivil(absl::CivilSecond(2027, 1, 30, 23, 59, 59), absl::UTCTimeZone()));
  Authenticator auth(*tokens, "", &clock);
  EXPECT_OK(auth.UserWithToken("secret-token-0123456789").status());
  clock.Advance(absl::Seconds(1));
  EXPECT_THAT(auth.UserWithToken("secret-token-0123456789"),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       HasSubstr("the token of user bob expired at 2027-01-31T00:00:00Z")));
  EXPECT_EQ(auth.UserWithToken("other-token-0123456789ab")->user, "carol");
}

TEST(TokensFileTest, AReloadRevokesAddsAndRenewsTokensButCannotTurnThemOff) {
  auto before = ParseTokens("secret-token-0123456789 bob\nother-token-0123456789ab carol\n", "f");
  ASSERT_TRUE(before.ok());
  Authenticator auth(*before, "join-token-0123456789ab");
  auto after = ParseTokens("other-token-0123456789ab carol\nthird-token-0123456789ab dave\n", "f");
  ASSERT_TRUE(after.ok());
  EXPECT_OK(auth.Reload(*after, "join-token-9876543210ab"));
  EXPECT_THAT(auth.UserWithToken("secret-token-0123456789"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("not one")));
  EXPECT_EQ(auth.UserWithToken("other-token-0123456789ab")->user, "carol");
  EXPECT_EQ(auth.UserWithToken("third-token-0123456789ab")->user, "dave");
  EXPECT_THAT(auth.Reload({}, "join-token-9876543210ab"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("on or off")));
  EXPECT_THAT(auth.Reload(*after, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("on or off")));
  EXPECT_EQ(auth.UserWithToken("third-token-0123456789ab")->user, "dave");  // unchanged
  EXPECT_TRUE(auth.users_required());
}

}  // namespace
}  // namespace autoaccel
