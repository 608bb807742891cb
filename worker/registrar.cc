#include "worker/registrar.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "worker/timing_jitter.h"

namespace autoaccel {
namespace {

// How often an idle worker measures its timing jitter again.
constexpr std::chrono::minutes kJitterEvery{5};

}  // namespace

Registrar::Registrar(std::shared_ptr<grpc::Channel> coordinator, v1::RegisterRequest registration,
                     CoordinatorGate* gate, RunningRanks running_ranks)
    : stub_(v1::WorkerRegistry::NewStub(coordinator)),
      gate_(gate),
      running_ranks_(std::move(running_ranks)),
      registration_(std::move(registration)) {}

Registrar::~Registrar() { Stop(); }

void Registrar::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Registrar::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  thread_.join();
  // Registered: say so, so the coordinator places nothing more here and
  // `workers` stops listing this worker (instead of calling it LOST later).
  v1::LeaveRequest req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (registration_.session_token().empty()) return;
    req.set_worker_id(registration_.worker_id());
    req.set_session_token(registration_.session_token());
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::LeaveResponse resp;
  if (grpc::Status s = stub_->Leave(&ctx, req, &resp); !s.ok()) {
    spdlog::warn("could not tell the coordinator this worker leaves: {}", s.error_message());
  } else {
    spdlog::info("left the coordinator's pool");
  }
}

void Registrar::Run() {
  double interval_s = 2;
  bool registered = false;
  double backoff_s = 0.2;
  bool warned = false;
  std::string session_token;                                // the current registration's
  auto jitter_measured = std::chrono::steady_clock::now();  // main measured it before Start
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (reregister_) registered = false;
    reregister_ = false;
    v1::RegisterRequest registration = registration_;
    lock.unlock();
    double wait_s;
    if (!registered) {
      if (running_ranks_) {
        for (v1::RunningRank& r : running_ranks_()) *registration.add_running_ranks() = r;
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::RegisterResponse resp;
      gate_->RegistrationStarted();
      grpc::Status s = stub_->Register(&ctx, registration, &resp);
      if (!s.ok()) gate_->RegistrationFailed();
      if (s.ok()) {
        registered = true;
        session_token = resp.session_token();
        gate_->Accept(session_token);
        interval_s = resp.heartbeat_interval_seconds() > 0 ? resp.heartbeat_interval_seconds() : 2;
        spdlog::info("registered with the coordinator as {}{}", registration.worker_id(),
                     registration.running_ranks_size() > 0
                         ? absl::StrCat(" (", registration.running_ranks_size(),
                                        " trial rank(s) running or answered here)")
                         : "");
        backoff_s = 0.2;
        warned = false;
        wait_s = interval_s;
      } else {
        if (!warned) {
          spdlog::warn("cannot register with the coordinator ({}); retrying", s.error_message());
          warned = true;
        }
        wait_s = backoff_s;
        backoff_s = std::min(backoff_s * 2, 5.0);
      }
    } else {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::HeartbeatRequest req;
      req.set_worker_id(registration.worker_id());
      req.set_session_token(session_token);
      // The machine's noise again, every few minutes while no rank runs
      // (a rank's own load would be measured instead).
      const auto now = std::chrono::steady_clock::now();
      if (now - jitter_measured >= kJitterEvery && running_ranks_ && running_ranks_().empty()) {
        req.set_timing_jitter(MeasureTimingJitter());
        jitter_measured = now;
      }
      v1::HeartbeatResponse resp;
      grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
      if (s.error_code() == grpc::StatusCode::NOT_FOUND ||
          s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        spdlog::info("the coordinator does not know this worker's session ({}); registering again",
                     s.error_message());
        registered = false;
        session_token.clear();
        wait_s = 0;
      } else {
        if (!s.ok() && !warned) {
          spdlog::warn("heartbeat failed: {}", s.error_message());
          warned = true;
        } else if (s.ok()) {
          warned = false;
        }
        wait_s = interval_s;
      }
    }
    lock.lock();
    registration_.set_session_token(session_token);
    cv_.wait_for(lock, std::chrono::duration<double>(wait_s),
                 [this] { return stopping_ || reregister_; });
  }
}

void Registrar::UpdateDevices(const std::vector<v1::Device>& devices) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    registration_.clear_devices();
    for (const v1::Device& d : devices) *registration_.add_devices() = d;
    reregister_ = true;
  }
  cv_.notify_all();
}

}  // namespace autoaccel
