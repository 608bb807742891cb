#include "server/http/monitoring_routes.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/prometheus_text.h"

namespace autoaccel {

std::map<std::string, HttpHandler> MonitoringRoutes(JobManager* manager, const Readiness* readiness,
                                                    std::function<absl::Status()> store_health) {
  std::map<std::string, HttpHandler> routes;
  routes["/metrics"] = [manager](const HttpRequest&) {
    HttpResponse r;
    r.content_type = std::string(kPrometheusContentType);
    r.body = manager->MetricsText();
    return r;
  };
  routes["/healthz"] = [](const HttpRequest&) {
    return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
  };
  routes["/readyz"] = [readiness, store_health = std::move(store_health)](const HttpRequest&) {
    switch (readiness->Get()) {
      case Readiness::kReady:
        if (const absl::Status health = store_health(); !health.ok()) {
          return HttpResponse{503, "text/plain; charset=utf-8",
                              absl::StrCat("database unusable: ", health.message(), "\n")};
        }
        return HttpResponse{200, "text/plain; charset=utf-8", "ready\n"};
      case Readiness::kStarting:
        return HttpResponse{503, "text/plain; charset=utf-8",
                            "starting: the scheduler is not running yet\n"};
      case Readiness::kShuttingDown:
        break;
    }
    return HttpResponse{503, "text/plain; charset=utf-8",
                        "shutting down: running trials are draining\n"};
  };
  return routes;
}

}  // namespace autoaccel
