// The coordinator's read-only web dashboard, served on --http-listen beside
// the monitoring routes (server/http/monitoring_routes.h):
//   GET /                  the job list and the worker pool (HTML)
//   GET /job?id=JOB        one job: its progress, live trial table and the
//                          report's figures (HTML; the id is read by the
//                          page's script)
//   GET /dashboard.js, /dashboard.css, /report.css   the pages' files
//                          (server/http/dashboard/, embedded at build time; the
//                          report's style sheet from report/report_html.h)
// and the JSON and SVG the pages poll (every 2 s):
//   GET /api/jobs                    {"jobs": [Job...]} newest first (50)
//   GET /api/job?id=JOB&since=V      {"version": "V2", "job": Job,
//                                    "trials": [Trial...]}: what changed
//                                    since version V ("0" or none: all of
//                                    it; JobManager::GetJobEvent), the job
//                                    left out when unchanged
//   GET /api/job/figures?id=JOB      the three figures of the HTML report
//                                    (report/report_figures.h) as an HTML
//                                    fragment of inline SVG
//   GET /api/workers                 {"workers": [Worker...]}, each
//                                    device with the trial holding it
// JSON is the proto3 mapping with the .proto field names (proto/convert.h);
// jobs come without their model's config text.
//
// Access, as the gRPC API's: when `auth` requires user tokens, every /api/
// route needs "Authorization: Bearer TOKEN" (401 without one or with an
// unknown one), a user sees only their own jobs (another user's job: 403)
// and an admin every job; without tokens the routes are open. The pages and
// their files carry no job data and are always served. Errors are JSON:
// {"error": "..."} with 400 (a missing or bad parameter), 401, 403 or 404.
//
// Every page forbids inline scripts and loads from elsewhere
// (Content-Security-Policy: default-src 'self').
#ifndef AUTOACCEL_SERVER_HTTP_DASHBOARD_ROUTES_H_
#define AUTOACCEL_SERVER_HTTP_DASHBOARD_ROUTES_H_

#include <map>
#include <string>

#include "server/auth.h"
#include "server/http/http_endpoint.h"
#include "server/job_manager.h"

namespace autoaccel {

// `manager` and `auth` must outlive the endpoint serving the routes.
std::map<std::string, HttpHandler> DashboardRoutes(JobManager* manager, const Authenticator* auth);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_HTTP_DASHBOARD_ROUTES_H_
