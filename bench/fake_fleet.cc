// fake_fleet: many simulated workers in one process, for measuring the
// coordinator at scale (bench/scale.py drives it). Each worker registers
// with the coordinator under its own id and its own loopback address
// (127.1.X.Y:PORT, so each is a host of its own, with its own rendezvous
// ports), heartbeats as a real worker does, and answers RunTrial after a
// simulated trial time with figures the coordinator's checks accept. One
// gRPC server (callback API) listens on every address; a call is told apart
// by the session token it carries; one thread finishes the calls when they
// are due.
//
// It prints one JSON line when it ends (after --seconds, or on SIGTERM):
// RunTrial calls received and answered in the measured window (after
// --warmup seconds), and the dispatch gap: per device, the time from
// answering a rank to receiving the device's next one, p50/p99/max.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/autoaccel.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = autoaccel::v1;

struct FleetOptions {
  std::string coordinator = "127.0.0.1:50051";
  int workers = 1000;
  int devices = 8;
  int port = 46000;
  double trial_seconds = 1.0;  // mean simulated trial time
  double jitter = 0.1;         // ± share of it, uniform
  double seconds = 60;
  double warmup = 10;
};

// The "127.1.X.Y" address of worker `i` (Y from 1 to 250).
std::string AddressOf(int i, int port) {
  return absl::StrFormat("127.1.%d.%d:%d", i / 250, i % 250 + 1, port);
}

class Fleet final : public v1::WorkerService::CallbackService {
 public:
  explicit Fleet(FleetOptions options) : options_(std::move(options)) {}

  void Start() {
    timer_ = std::thread([this] { RunTimer(); });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    due_cv_.notify_all();
    if (timer_.joinable()) timer_.join();
  }

  // Session token -> worker index, once registered.
  void AddSession(const std::string& token, int worker) {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[token] = worker;
  }

  grpc::ServerUnaryReactor* RunTrial(grpc::CallbackServerContext* ctx,
                                     const v1::RunTrialRequest* request,
                                     v1::RunTrialResponse* response) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    const auto now = Clock::now();
    std::string token;
    auto it = ctx->client_metadata().find("authorization");
    if (it != ctx->client_metadata().end()) {
      token = std::string(it->second.data(), it->second.size());
      if (token.rfind("Bearer ", 0) == 0) token = token.substr(7);
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) {  // the timer thread is gone: nothing would answer it
      lock.unlock();
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fleet stopping"));
      return reactor;
    }
    auto session = sessions_.find(token);
    if (session == sessions_.end()) {
      lock.unlock();
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no such session"));
      return reactor;
    }
    const int64_t device = int64_t{session->second} * options_.devices + request->device_index();
    const bool measuring = now >= measure_from_;
    if (measuring) ++received_;
    if (auto freed = freed_at_.find(device); freed != freed_at_.end()) {
      if (measuring) {
        gaps_.push_back(std::chrono::duration<double>(now - freed->second).count());
      }
      freed_at_.erase(freed);
    }
    std::uniform_real_distribution<double> spread(1 - options_.jitter, 1 + options_.jitter);
    const double seconds = options_.trial_seconds * spread(rng_);
    due_.push(Pending{
        now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
        device, seconds, reactor, response});
    lock.unlock();
    due_cv_.notify_one();
    return reactor;
  }

  grpc::ServerUnaryReactor* CancelTrial(grpc::CallbackServerContext* ctx,
                                        const v1::CancelTrialRequest*,
                                        v1::CancelTrialResponse*) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);  // the simulated rank ends when it is due
    return reactor;
  }

  void SetMeasureFrom(Clock::time_point t) {
    std::lock_guard<std::mutex> lock(mu_);
    measure_from_ = t;
  }

  // The JSON line of the measured window.
  std::string Report(double window_seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<double> gaps = gaps_;
    std::sort(gaps.begin(), gaps.end());
    const auto at = [&](double q) {
      return gaps.empty() ? 0.0 : gaps[std::min(gaps.size() - 1, size_t(q * gaps.size()))];
    };
    return absl::StrFormat(
        "{\"window_s\": %.3f, \"received\": %d, \"answered\": %d, \"gaps\": %d, "
        "\"gap_p50_ms\": %.3f, \"gap_p99_ms\": %.3f, \"gap_max_ms\": %.3f}",
        window_seconds, received_, answered_, gaps.size(), 1000 * at(0.5), 1000 * at(0.99),
        gaps.empty() ? 0.0 : 1000 * gaps.back());
  }

 private:
  struct Pending {
    Clock::time_point due;
    int64_t device;
    double seconds;
    grpc::ServerUnaryReactor* reactor;
    v1::RunTrialResponse* response;
    bool operator>(const Pending& o) const { return due > o.due; }
  };

  // Finishes each call when it is due, with figures of a small model: 5
  // steps of `seconds`/5, 64 tokens a step, 1 GiB of peak memory.
  void RunTimer() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      if (due_.empty()) {
        due_cv_.wait(lock);
        continue;
      }
      const auto next = due_.top().due;
      if (Clock::now() < next) {
        due_cv_.wait_until(lock, next);
        continue;
      }
      Pending p = due_.top();
      due_.pop();
      const auto now = Clock::now();
      if (now >= measure_from_) ++answered_;
      freed_at_[p.device] = now;
      lock.unlock();
      const double step = p.seconds / 5;
      p.response->set_status(v1::TRIAL_STATUS_SUCCEEDED);
      v1::TrialMetrics* m = p.response->mutable_metrics();
      m->set_measured_steps(5);
      m->set_step_time_median_s(step);
      m->set_step_time_min_s(step);
      m->set_step_time_max_s(step);
      m->set_tokens_per_second(64 / step);
      m->set_samples_per_second(4 / step);
      m->set_peak_memory_bytes(int64_t{1} << 30);
      m->set_final_loss(3.5);
      p.reactor->Finish(grpc::Status::OK);
      lock.lock();
    }
    while (!due_.empty()) {  // answer what is left so the server can shut down
      due_.top().reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "fleet stopping"));
      due_.pop();
    }
  }

  const FleetOptions options_;
  std::mutex mu_;
  std::condition_variable due_cv_;
  bool stopping_ = false;
  std::map<std::string, int> sessions_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> due_;
  std::map<int64_t, Clock::time_point> freed_at_;
  std::vector<double> gaps_;
  int received_ = 0;
  int answered_ = 0;
  Clock::time_point measure_from_ = Clock::time_point::max();
  std::mt19937_64 rng_{42};
  std::thread timer_;
};

v1::RegisterRequest RegistrationOf(int i, const FleetOptions& o) {
  v1::RegisterRequest r;
  r.set_worker_id(absl::StrFormat("fake%04d", i));
  r.set_address(AddressOf(i, o.port));
  for (int d = 0; d < o.devices; ++d) {
    v1::Device* device = r.add_devices();
    device->set_type("cpu");
    device->set_index(d);
    device->set_name(absl::StrCat("cpu:", d));
    device->set_memory_bytes(int64_t{16} << 30);
    device->mutable_peak_tflops()->set_fp32(1);
    device->mutable_peak_tflops()->set_bf16(2);
    device->mutable_peak_tflops()->set_fp16(2);
  }
  r.set_rendezvous_port_min(29500);
  r.set_rendezvous_port_max(29999);
  r.set_identity_key(absl::StrFormat("%064x", i + 1));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  FleetOptions o;
  CLI::App app{"fake_fleet: simulated workers for bench/scale.py"};
  app.add_option("--coordinator", o.coordinator, "HOST:PORT of the coordinator");
  app.add_option("--workers", o.workers, "simulated workers (127.1.X.Y each)");
  app.add_option("--devices", o.devices, "cpu devices per worker");
  app.add_option("--port", o.port, "the port every worker's address listens on");
  app.add_option("--trial-seconds", o.trial_seconds, "mean simulated trial time");
  app.add_option("--seconds", o.seconds, "how long to run after registering");
  app.add_option("--warmup", o.warmup, "seconds after registering before measuring");
  CLI11_PARSE(app, argc, argv);

  Fleet fleet(o);
  grpc::ServerBuilder builder;
  for (int i = 0; i < o.workers; ++i) {
    builder.AddListeningPort(AddressOf(i, o.port), grpc::InsecureServerCredentials());
  }
  builder.RegisterService(&fleet);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "fake_fleet: cannot listen on 127.1.x.y:%d\n", o.port);
    return 1;
  }
  fleet.Start();

  auto channel = grpc::CreateChannel(o.coordinator, grpc::InsecureChannelCredentials());
  auto registry = v1::WorkerRegistry::NewStub(channel);
  std::vector<std::string> tokens(o.workers);
  double heartbeat_s = 2;
  for (int i = 0; i < o.workers; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::RegisterResponse resp;
    grpc::Status s = registry->Register(&ctx, RegistrationOf(i, o), &resp);
    if (!s.ok()) {
      std::fprintf(stderr, "fake_fleet: worker %d: %s\n", i, s.error_message().c_str());
      return 1;
    }
    tokens[i] = resp.session_token();
    fleet.AddSession(tokens[i], i);
    heartbeat_s = resp.heartbeat_interval_seconds();
  }
  std::fprintf(stderr, "fake_fleet: %d workers x %d devices registered\n", o.workers, o.devices);
  const auto start = Clock::now();
  fleet.SetMeasureFrom(
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup)));
  // Each worker heartbeats on its own, as worker/registrar.cc does: the
  // next one `heartbeat_s` after the last one's answer, each with a 5 s
  // deadline, so a slow answer to one worker delays no other.
  struct Beat {
    std::atomic<bool> in_flight{false};
    std::atomic<int64_t> next_ns{0};  // steady clock
  };
  std::vector<Beat> beats(o.workers);
  std::atomic<int> beats_sent{0}, beats_failed{0};
  const auto ns_of = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  const int64_t interval_ns = static_cast<int64_t>(heartbeat_s * 1e9);
  while (Clock::now() - start < std::chrono::duration<double>(o.seconds)) {
    const int64_t now_ns = ns_of(Clock::now());
    for (int i = 0; i < o.workers; ++i) {
      Beat& beat = beats[i];
      if (beat.in_flight || beat.next_ns > now_ns) continue;
      beat.in_flight = true;
      ++beats_sent;
      auto ctx = std::make_shared<grpc::ClientContext>();
      ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      ctx->AddMetadata("authorization", "Bearer " + tokens[i]);
      auto req = std::make_shared<v1::HeartbeatRequest>();
      req->set_worker_id(absl::StrFormat("fake%04d", i));
      req->set_session_token(tokens[i]);
      auto resp = std::make_shared<v1::HeartbeatResponse>();
      registry->async()->Heartbeat(
          ctx.get(), req.get(), resp.get(),
          [ctx, req, resp, &beat, &beats_failed, &ns_of, interval_ns](grpc::Status s) {
            if (!s.ok()) ++beats_failed;
            beat.next_ns = ns_of(Clock::now()) + interval_ns;
            beat.in_flight = false;
          });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  while (
      std::any_of(beats.begin(), beats.end(), [](const Beat& b) { return b.in_flight.load(); })) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double window = o.seconds - o.warmup;
  std::printf("%s\n", fleet.Report(window).c_str());
  std::fprintf(stderr, "fake_fleet: %d heartbeats failed of %d sent\n", beats_failed.load(),
               beats_sent.load());
  std::fflush(stdout);
  fleet.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
