// The coordinator's monitoring endpoints, served on --http-listen
// (server/http/http_endpoint.h):
//   GET /metrics  Prometheus's text format (server/coordinator_metrics.h);
//   GET /healthz  200 "ok" while the process serves HTTP at all (liveness);
//   GET /readyz   200 "ready" once the store is open and the scheduler runs
//                 and while the store can take writes; 503 with the reason
//                 before that, once shutting down, and while the database
//                 file is deleted or replaced or its disk is full
//                 (readiness: stop sending clients here).
// docs/MONITORING.md describes them for operators.
#ifndef AUTOACCEL_SERVER_HTTP_MONITORING_ROUTES_H_
#define AUTOACCEL_SERVER_HTTP_MONITORING_ROUTES_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "server/http/http_endpoint.h"
#include "server/job_manager.h"

namespace autoaccel {

// What /readyz says. Thread-safe.
class Readiness {
 public:
  enum State { kStarting, kReady, kShuttingDown };
  void Set(State state) { state_.store(state); }
  State Get() const { return state_.load(); }

 private:
  std::atomic<State> state_{kStarting};
};

// The three routes above; `store_health` says whether the store can take
// writes (Store::Health; called on each /readyz). `manager` and `readiness`
// must outlive the endpoint serving them.
std::map<std::string, HttpHandler> MonitoringRoutes(
    JobManager* manager, const Readiness* readiness,
    std::function<absl::Status()> store_health = [] { return absl::OkStatus(); });

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_HTTP_MONITORING_ROUTES_H_
