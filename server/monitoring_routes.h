// The coordinator's monitoring endpoints, served on --http-listen
// (server/http_endpoint.h):
//   GET /metrics  Prometheus's text format (server/coordinator_metrics.h);
//   GET /healthz  200 "ok" while the process serves HTTP at all (liveness);
//   GET /readyz   200 "ready" once the store is open and the scheduler runs,
//                 503 with the reason before that and once shutting down
//                 (readiness: stop sending clients here).
// docs/MONITORING.md describes them for operators.
#ifndef AUTOACCEL_SERVER_MONITORING_ROUTES_H_
#define AUTOACCEL_SERVER_MONITORING_ROUTES_H_

#include <atomic>
#include <map>
#include <string>

#include "server/http_endpoint.h"
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

// The three routes above. `manager` and `readiness` must outlive the
// endpoint serving them.
std::map<std::string, HttpHandler> MonitoringRoutes(JobManager* manager,
                                                    const Readiness* readiness);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_MONITORING_ROUTES_H_
