// The CLI following a job across a lost coordinator (client/watch_retry.h):
// the backoff schedule, which errors are retried, and `autoaccel watch`
// against an in-process server whose stream breaks.
#include "client/watch_retry.h"

#include <grpcpp/grpcpp.h>

#include <deque>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "client/commands.h"
#include "client/render.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_server.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

WatchBackoff NoJitter() {
  WatchBackoff b;
  b.jitter = 0;
  return b;
}

TEST(ReconnectScheduleTest, DoublesFromHalfASecondToTenSeconds) {
  ReconnectSchedule schedule(absl::Minutes(5), NoJitter(), 1);
  const absl::Time t0 = absl::UnixEpoch();
  std::vector<double> delays;
  for (int i = 0; i < 8; ++i) delays.push_back(absl::ToDoubleSeconds(*schedule.Next(t0)));
  EXPECT_THAT(delays, ::testing::ElementsAre(0.5, 1, 2, 4, 8, 10, 10, 10));
  EXPECT_EQ(schedule.attempt(), 8);
}

TEST(ReconnectScheduleTest, JitterStaysWithinItsShareAndVaries) {
  ReconnectSchedule schedule(absl::Hours(1), WatchBackoff(), 42);
  std::vector<absl::Duration> seen;
  for (int i = 0; i < 20; ++i) {
    const absl::Duration d = *schedule.Next(absl::UnixEpoch());
    const absl::Duration base =
        std::min(absl::Milliseconds(500) * (1 << std::min(i, 5)), absl::Seconds(10));
    EXPECT_GE(d, base * 0.8) << "attempt " << i + 1;
    EXPECT_LE(d, base * 1.2) << "attempt " << i + 1;
    seen.push_back(d);
  }
  // Attempts 6.. share the 10 s base: jitter makes them differ.
  EXPECT_NE(seen[10], seen[11]);
}

TEST(ReconnectScheduleTest, NeverWaitsPastTheBudgetAndThenGivesUp) {
  ReconnectSchedule schedule(absl::Seconds(3), NoJitter(), 1);
  const absl::Time t0 = absl::UnixEpoch();
  EXPECT_EQ(*schedule.Next(t0), absl::Milliseconds(500));
  EXPECT_EQ(*schedule.Next(t0 + absl::Milliseconds(500)), absl::Seconds(1));
  // 2.5 s into the loss: the 2 s step is cut to the 0.5 s left.
  EXPECT_EQ(*schedule.Next(t0 + absl::Milliseconds(2500)), absl::Milliseconds(500));
  EXPECT_EQ(schedule.Next(t0 + absl::Seconds(3)), std::nullopt);
}

TEST(ReconnectScheduleTest, ResetStartsAFreshBudgetAtTheNextLoss) {
  ReconnectSchedule schedule(absl::Seconds(3), NoJitter(), 1);
  const absl::Time t0 = absl::UnixEpoch();
  schedule.Next(t0);
  schedule.Next(t0 + absl::Seconds(1));
  schedule.Reset();
  EXPECT_EQ(*schedule.Next(t0 + absl::Minutes(1)), absl::Milliseconds(500));
  EXPECT_EQ(schedule.attempt(), 1);
}

TEST(ReconnectScheduleTest, ZeroBudgetNeverRetries) {
  ReconnectSchedule schedule(absl::ZeroDuration(), WatchBackoff(), 1);
  EXPECT_EQ(schedule.Next(absl::UnixEpoch()), std::nullopt);
}

TEST(RetryableWatchErrorTest, OnlyALostCoordinatorIsRetried) {
  EXPECT_TRUE(IsRetryableWatchError(grpc::StatusCode::UNAVAILABLE));
  EXPECT_TRUE(IsRetryableWatchError(grpc::StatusCode::CANCELLED));
  for (grpc::StatusCode code :
       {grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::NOT_FOUND, grpc::StatusCode::INVALID_ARGUMENT,
        grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::DEADLINE_EXCEEDED,
        grpc::StatusCode::INTERNAL}) {
    EXPECT_FALSE(IsRetryableWatchError(code)) << code;
  }
}

// FollowWithReconnect over scripted attempts and a fake clock.
struct Script {
  struct Step {
    int events;  // how many events the attempt delivers
    grpc::Status end;
    bool terminal = false;  // the last event is the job's end
  };
  std::deque<Step> steps;
  bool terminal = false;
  absl::Time now = absl::UnixEpoch();
  std::vector<absl::Duration> slept;
  int attempts = 0;

  grpc::Status Run(absl::Duration reconnect_for, std::string* err_text,
                   absl::Time deadline = absl::InfiniteFuture()) {
    ReconnectOptions options;
    options.deadline = deadline;
    options.reconnect_for = reconnect_for;
    options.backoff = NoJitter();
    options.server = "127.0.0.1:9";
    options.job_id = "j1";
    options.now = [this] { return now; };
    options.sleep = [this](absl::Duration d) {
      slept.push_back(d);
      now += d;
    };
    std::ostringstream err;
    grpc::Status s = FollowWithReconnect(
        [this](const std::function<void()>& delivered) {
          ++attempts;
          if (steps.empty()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
          Step step = steps.front();
          steps.pop_front();
          for (int i = 0; i < step.events; ++i) delivered();
          terminal = step.terminal;
          return step.end;
        },
        [this] { return terminal; }, options, err);
    *err_text = err.str();
    return s;
  }
};

const grpc::Status kUnavailable(grpc::StatusCode::UNAVAILABLE, "Socket closed");

TEST(FollowWithReconnectTest, RetriesALostStreamUntilTheJobEnds) {
  Script script;
  script.steps = {
      {2, kUnavailable}, {0, kUnavailable}, {0, kUnavailable}, {1, grpc::Status::OK, true}};
  std::string err;
  EXPECT_TRUE(script.Run(absl::Minutes(5), &err).ok());
  EXPECT_EQ(script.attempts, 4);
  EXPECT_THAT(script.slept,
              ::testing::ElementsAre(absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2)));
  EXPECT_THAT(err, HasSubstr("lost the coordinator at 127.0.0.1:9 (Socket closed); reconnecting "
                             "in 0.5 s (attempt 1)"));
  EXPECT_THAT(err, HasSubstr("reconnecting in 2.0 s (attempt 3)"));
  EXPECT_THAT(err, HasSubstr("reconnected to the coordinator at 127.0.0.1:9"));
}

TEST(FollowWithReconnectTest, AStreamEndingBeforeTheJobIsRetried) {
  Script script;
  script.steps = {{1, grpc::Status::OK}, {1, grpc::Status::OK, true}};
  std::string err;
  EXPECT_TRUE(script.Run(absl::Minutes(5), &err).ok());
  EXPECT_THAT(err, HasSubstr("(the stream ended before the job did); reconnecting"));
}

TEST(FollowWithReconnectTest, ErrorsARetryCannotFixEndAtOnce) {
  for (grpc::StatusCode code :
       {grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::NOT_FOUND, grpc::StatusCode::INVALID_ARGUMENT}) {
    Script script;
    script.steps = {{1, grpc::Status(code, "no")}};
    std::string err;
    EXPECT_EQ(script.Run(absl::Minutes(5), &err).error_code(), code);
    EXPECT_EQ(script.attempts, 1);
    EXPECT_EQ(err, "");
  }
}

TEST(FollowWithReconnectTest, AStreamThatNeverDeliveredIsNotRetried) {
  Script script;  // a wrong --server: nothing to reconnect to
  std::string err;
  EXPECT_EQ(script.Run(absl::Minutes(5), &err).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(script.attempts, 1);
  EXPECT_EQ(err, "");
}

TEST(FollowWithReconnectTest, GivesUpAfterTheBudgetSayingHowToFollowAgain) {
  Script script;
  script.steps = {{1, kUnavailable}};  // then down for good
  std::string err;
  grpc::Status s = script.Run(absl::Seconds(20), &err);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("gave up reconnecting after 20s"));
  EXPECT_THAT(s.error_message(), HasSubstr("`autoaccel watch j1` follows it again"));
  absl::Duration total;
  for (absl::Duration d : script.slept) total += d;
  EXPECT_EQ(total, absl::Seconds(20));
  // 0.5 + 1 + 2 + 4 + 8 = 15.5 s, then the 4.5 s left.
  EXPECT_EQ(script.slept.size(), 6u);
  EXPECT_THAT(err, Not(HasSubstr("reconnected")));
}

TEST(FollowWithReconnectTest, NoReconnectWaitsPastTheWatchTimeout) {
  Script script;
  script.steps = {{1, kUnavailable}};  // then down for good
  std::string err;
  // --watch-timeout 5 s: attempts after 0.5, 1.5 and 3.5 s; the next would be at 7.5 s.
  grpc::Status s = script.Run(absl::Minutes(5), &err, script.now + absl::Seconds(5));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(s.error_message(), HasSubstr("--watch-timeout ran out"));
  EXPECT_THAT(s.error_message(), HasSubstr("`autoaccel watch j1` follows it again"));
  EXPECT_EQ(script.attempts, 4);
  EXPECT_LT(script.now, absl::UnixEpoch() + absl::Seconds(5)) << "slept past the timeout";
}

TEST(FollowWithReconnectTest, ZeroReconnectForReturnsTheFirstLoss) {
  Script script;
  script.steps = {{3, kUnavailable}};
  std::string err;
  EXPECT_EQ(script.Run(absl::ZeroDuration(), &err).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(script.attempts, 1);
  EXPECT_EQ(err, "");
}

// `autoaccel watch` against a server whose streams are scripted: each call of
// WatchJob plays the next script (events, then its status).
class ScriptedTuningService final : public v1::TuningService::Service {
 public:
  struct Stream {
    std::vector<v1::JobEvent> events;
    grpc::Status end;
  };
  ScriptedTuningService(std::vector<Stream> streams, v1::Job job, std::vector<v1::Trial> trials)
      : streams_(std::move(streams)), job_(std::move(job)), trials_(std::move(trials)) {}

  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest*,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    Stream stream;
    {
      absl::MutexLock lock(&mu_);
      ++calls_;
      if (streams_.empty()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "still down");
      stream = streams_.front();
      streams_.erase(streams_.begin());
    }
    for (const v1::JobEvent& e : stream.events) writer->Write(e);
    return stream.end;
  }
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest*, v1::Job* job) override {
    *job = job_;
    return grpc::Status::OK;
  }
  grpc::Status ListTrials(grpc::ServerContext*, const v1::ListTrialsRequest*,
                          v1::ListTrialsResponse* resp) override {
    for (const v1::Trial& t : trials_) *resp->add_trials() = t;
    return grpc::Status::OK;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Stream> streams_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  const v1::Job job_;
  const std::vector<v1::Trial> trials_;
};

v1::Trial FinishedTrial(const std::string& id, int index) {
  v1::Trial t;
  t.set_trial_id(id);
  t.set_job_id("j1");
  t.set_index(index);
  t.set_status("SUCCEEDED");
  return t;
}

v1::JobEvent Event(const std::string& state, const std::vector<v1::Trial>& trials) {
  v1::JobEvent e;
  e.mutable_job()->set_job_id("j1");
  e.mutable_job()->set_state(state);
  e.mutable_job()->set_trials_done(static_cast<int>(trials.size()));
  for (const v1::Trial& t : trials) *e.add_trials() = t;
  return e;
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

struct WatchRun {
  int code;
  std::string out, err;
};

WatchRun RunWatch(ScriptedTuningService* service, absl::Duration reconnect_for) {
  testing::LocalServer local = testing::ServeLocally(service);
  std::unique_ptr<v1::TuningService::Stub> stub = v1::TuningService::NewStub(local.channel);
  std::ostringstream out, err;
  ClientContext c;
  c.stub = stub.get();
  c.server = "127.0.0.1:" + std::to_string(local.port);
  c.out = &out;
  c.err = &err;
  c.reconnect_for = reconnect_for;
  WatchRun run;
  run.code = WatchCommand(c, "j1");
  run.out = out.str();
  run.err = err.str();
  return run;
}

TEST(WatchCommandTest, ReconnectsAfterALostStreamShowingEachTrialOnce) {
  const v1::Trial t1 = FinishedTrial("j1-t1", 1), t2 = FinishedTrial("j1-t2", 2);
  v1::Job done = Event("SUCCEEDED", {t1, t2}).job();
  ScriptedTuningService service(
      {{{Event("RUNNING", {t1})}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed")},
       {{Event("RUNNING", {t1}), Event("RUNNING", {t1, t2}), Event("SUCCEEDED", {t1, t2})},
        grpc::Status::OK}},
      done, {t1, t2});
  WatchRun run = RunWatch(&service, absl::Minutes(5));
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(service.calls(), 2);
  EXPECT_THAT(run.err, HasSubstr("(Socket closed); reconnecting in"));
  EXPECT_THAT(run.err, HasSubstr("(attempt 1)"));
  EXPECT_THAT(run.err, HasSubstr("reconnected to the coordinator"));
  EXPECT_EQ(CountOf(run.err, TrialRow(t1)), 1) << run.err;
  EXPECT_EQ(CountOf(run.err, TrialRow(t2)), 1) << run.err;
  EXPECT_EQ(CountOf(run.err, TrialTableHeader()), 1) << run.err;
}

TEST(WatchCommandTest, GivesUpAfterReconnectForWithExitCodeOne) {
  const v1::Trial t1 = FinishedTrial("j1-t1", 1);
  ScriptedTuningService service(
      {{{Event("RUNNING", {t1})}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed")}},
      Event("RUNNING", {t1}).job(), {t1});
  const absl::Time start = absl::Now();
  WatchRun run = RunWatch(&service, absl::Seconds(1));
  EXPECT_EQ(run.code, 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_GE(service.calls(), 2);
  EXPECT_THAT(run.err, HasSubstr("gave up reconnecting after 1s (--reconnect-for)"));
  EXPECT_THAT(run.err, Not(HasSubstr("reconnected")));
}

TEST(WatchCommandTest, AJobTheRestartedServerDoesNotKnowIsNotRetried) {
  const v1::Trial t1 = FinishedTrial("j1-t1", 1);
  ScriptedTuningService service(
      {{{Event("RUNNING", {t1})}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed")},
       {{}, grpc::Status(grpc::StatusCode::NOT_FOUND, "no job j1")}},
      Event("RUNNING", {t1}).job(), {t1});
  WatchRun run = RunWatch(&service, absl::Minutes(5));
  EXPECT_EQ(run.code, 1);
  EXPECT_EQ(service.calls(), 2);
  EXPECT_THAT(run.err, HasSubstr("not found: no job j1"));
  EXPECT_THAT(run.err, Not(HasSubstr("(attempt 2)")));
}

}  // namespace
}  // namespace autoaccel
