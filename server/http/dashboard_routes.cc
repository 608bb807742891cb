#include "server/http/dashboard_routes.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "report/report_data.h"
#include "report/report_figures.h"
#include "report/report_html.h"
#include "server/http/dashboard_files.h"

namespace autoaccel {
namespace {

// Scripts and styles only from the coordinator's own files (no inline
// script, no CDN); the API is fetched from the same origin.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
constexpr char kJson[] = "application/json; charset=utf-8";

// `text` as a JSON string; bytes that are not UTF-8 (an id from the query)
// become U+FFFD.
std::string JsonString(absl::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse Error(const absl::Status& status) {
  int code = 500;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      code = 400;
      break;
    case absl::StatusCode::kUnauthenticated:
      code = 401;
      break;
    case absl::StatusCode::kPermissionDenied:
      code = 403;
      break;
    case absl::StatusCode::kNotFound:
      code = 404;
      break;
    default:
      break;
  }
  HttpResponse r{code, kJson, absl::StrCat("{\"error\": ", JsonString(status.message()), "}\n")};
  if (code == 401) r.headers["WWW-Authenticate"] = "Bearer realm=\"autoaccel\"";
  return r;
}

HttpResponse Json(std::string body) { return HttpResponse{200, kJson, std::move(body)}; }

// The caller the request's bearer token names (server/auth.h).
absl::StatusOr<Caller> CallerOf(const Authenticator& auth, const HttpRequest& request) {
  std::string token;
  if (auto it = request.headers.find("authorization"); it != request.headers.end()) {
    absl::string_view value = absl::StripAsciiWhitespace(it->second);
    if (!absl::StartsWithIgnoreCase(value, "bearer ")) {
      return absl::UnauthenticatedError(
          "the Authorization header must be \"Bearer TOKEN\" (a user token of --tokens)");
    }
    token = std::string(absl::StripAsciiWhitespace(value.substr(7)));
  }
  absl::StatusOr<Caller> caller = auth.UserWithToken(token);
  if (!caller.ok() && token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires a user token: send \"Authorization: Bearer TOKEN\"");
  }
  return caller;
}

// The job's id from ?id=, once the caller may see it.
absl::StatusOr<std::string> JobIdFor(JobManager& manager, const Authenticator& auth,
                                     const HttpRequest& request) {
  ASSIGN_OR_RETURN(const Caller caller, CallerOf(auth, request));
  auto it = request.query.find("id");
  if (it == request.query.end() || it->second.empty()) {
    return absl::InvalidArgumentError("give the job as ?id=JOB");
  }
  RETURN_IF_ERROR(MayReadJob(caller, it->second,
                             [&manager](const std::string& id) { return manager.JobOwner(id); }));
  return it->second;
}

// What the pages need of a job: not its model's config text or script.
void Slim(v1::Job* job) {
  job->mutable_request()->mutable_model()->clear_config_json();
  job->mutable_request()->mutable_model()->clear_script();
}

std::string ContentTypeOf(absl::string_view name) {
  if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  if (absl::EndsWith(name, ".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

HttpHandler Static(std::string content_type, std::string body) {
  return [content_type = std::move(content_type), body = std::move(body)](const HttpRequest&) {
    HttpResponse r{200, content_type, body};
    r.headers["Content-Security-Policy"] = kContentSecurityPolicy;
    return r;
  };
}

HttpResponse Jobs(JobManager& manager, const Authenticator& auth, const HttpRequest& request) {
  absl::StatusOr<Caller> caller = CallerOf(auth, request);
  if (!caller.ok()) return Error(caller.status());
  absl::StatusOr<std::vector<v1::Job>> jobs = manager.ListJobs(0, JobsListedFor(*caller));
  if (!jobs.ok()) return Error(jobs.status());
  v1::ListJobsResponse list;
  for (v1::Job& job : *jobs) {
    Slim(&job);
    *list.add_jobs() = std::move(job);
  }
  return Json(ProtoToJson(list));
}

HttpResponse Job(JobManager& manager, const Authenticator& auth, const HttpRequest& request) {
  absl::StatusOr<std::string> id = JobIdFor(manager, auth, request);
  if (!id.ok()) return Error(id.status());
  uint64_t since = 0;
  if (auto it = request.query.find("since");
      it != request.query.end() && !absl::SimpleAtoi(it->second, &since)) {
    return Error(absl::InvalidArgumentError(
        absl::StrCat("since: '", it->second, "' is not a version this server gave")));
  }
  uint64_t version = 0;
  absl::StatusOr<v1::JobEvent> event = manager.GetJobEvent(*id, since, false, &version);
  if (!event.ok()) return Error(event.status());
  if (event->has_job()) Slim(event->mutable_job());
  // The version as a string: it may exceed what a JavaScript number holds.
  std::string body = ProtoToJson(*event);  // "{...}" (or "{}")
  body.insert(1, absl::StrCat("\"version\":\"", version, "\"", body.size() > 2 ? "," : ""));
  return Json(std::move(body));
}

HttpResponse Figures(JobManager& manager, const Authenticator& auth, const HttpRequest& request) {
  absl::StatusOr<std::string> id = JobIdFor(manager, auth, request);
  if (!id.ok()) return Error(id.status());
  absl::StatusOr<v1::Job> job = manager.GetJob(*id);
  if (!job.ok()) return Error(job.status());
  absl::StatusOr<std::vector<v1::Trial>> trials = manager.ListTrials(*id);
  if (!trials.ok()) return Error(trials.status());
  v1::ListWorkersResponse workers;
  for (v1::Worker& w : manager.ListWorkers()) *workers.add_workers() = std::move(w);
  const DeviceMemory memory = JobDeviceMemory(workers, *trials, job->request().device_type());
  const FigureInput in{*job, *trials, memory};
  return HttpResponse{
      200, "text/html; charset=utf-8",
      absl::StrCat("<div class=\"charts\">\n", ThroughputMemorySection(in), BestOverTimeSection(in),
                   "</div>\n", PredictedMeasuredSection(in))};
}

HttpResponse Workers(JobManager& manager, const Authenticator& auth, const HttpRequest& request) {
  absl::StatusOr<Caller> caller = CallerOf(auth, request);
  if (!caller.ok()) return Error(caller.status());
  // A page of the pool (?page_token=ID&limit=N, as ListWorkers), with the
  // whole pool's counts: a poll of a large pool stays small.
  v1::ListWorkersRequest page;
  if (auto it = request.query.find("page_token"); it != request.query.end()) {
    page.set_page_token(it->second);
  }
  if (auto it = request.query.find("limit"); it != request.query.end()) {
    int limit = 0;
    if (!absl::SimpleAtoi(it->second, &limit)) {
      return Error(absl::InvalidArgumentError("limit: not a number"));
    }
    page.set_limit(limit);
  }
  absl::StatusOr<v1::ListWorkersResponse> list = manager.ListWorkers(page);
  if (!list.ok()) return Error(list.status());
  return Json(ProtoToJson(*list));
}

}  // namespace

std::map<std::string, HttpHandler> DashboardRoutes(JobManager* manager, const Authenticator* auth) {
  std::map<std::string, HttpHandler> routes;
  for (size_t i = 0; i < kDashboardFilesCount; ++i) {
    const EmbeddedFile& f = kDashboardFiles[i];
    const std::string name = f.name;
    std::string body(reinterpret_cast<const char*>(f.data), f.size);
    const std::string type = ContentTypeOf(name);
    if (name == "index.html") routes["/"] = Static(type, body);
    if (name == "job.html") routes["/job"] = Static(type, body);
    routes["/" + name] = Static(type, std::move(body));
  }
  routes["/report.css"] = Static(ContentTypeOf(".css"), std::string(ReportStyle()));
  routes["/api/jobs"] = [manager, auth](const HttpRequest& r) { return Jobs(*manager, *auth, r); };
  routes["/api/job"] = [manager, auth](const HttpRequest& r) { return Job(*manager, *auth, r); };
  routes["/api/job/figures"] = [manager, auth](const HttpRequest& r) {
    return Figures(*manager, *auth, r);
  };
  routes["/api/workers"] = [manager, auth](const HttpRequest& r) {
    return Workers(*manager, *auth, r);
  };
  return routes;
}

}  // namespace autoaccel
