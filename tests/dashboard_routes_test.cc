// The dashboard's routes (server/http/dashboard_routes.h) on a real store and job
// manager, called as the HTTP endpoint calls them: the API's access rules
// (as the gRPC API's), its JSON and versions, the figures, and the pages'
// security headers.
#include "server/http/dashboard_routes.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "tests/in_process_coordinator.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
  "n_positions": 32})";
constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kCarol[] = "carol-token-0123456789";
constexpr char kAdmin[] = "admin-token-0123456789";

v1::TuneRequest Request() {
  v1::TuneRequest r;
  r.mutable_model()->set_family("gpt2");
  r.mutable_model()->set_config_json(kTinyGpt);
  r.set_seq_len(16);
  r.set_global_batch_size(4);
  r.set_time_limit_seconds(60);
  return r;
}

class DashboardRoutesTest : public ::testing::Test {
 protected:
  void Start(bool tokens) {
    if (tokens) {
      auto users = ParseTokens(
          absl::StrCat(kAlice, " alice\n", kCarol, " carol\n", kAdmin, " root admin\n"), "tokens");
      ASSERT_TRUE(users.ok()) << users.status();
      auth_ = std::make_unique<Authenticator>(*users, "");
    } else {
      auth_ = std::make_unique<Authenticator>();
    }
    ASSERT_NO_FATAL_FAILURE(coordinator_.Start("autoaccel-dashboard-", &executor_, auth_.get()));
    routes_ = DashboardRoutes(coordinator_.manager(), auth_.get());
  }

  std::string Submit(const std::string& owner) {
    auto job = coordinator_.manager()->SubmitJob(Request(), owner);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->job_id() : "";
  }

  // GET `path` with the query `query` as `token` ("" for no header).
  HttpResponse Get(const std::string& path, std::map<std::string, std::string> query = {},
                   const std::string& token = "") {
    HttpRequest request{path, std::move(query), {}};
    if (!token.empty()) request.headers["authorization"] = "Bearer " + token;
    auto it = routes_.find(path);
    EXPECT_NE(it, routes_.end()) << path;
    return it == routes_.end() ? HttpResponse{404, "", "", {}} : it->second(request);
  }

  testing::NoWorkers executor_;
  std::unique_ptr<Authenticator> auth_;
  testing::InProcessCoordinator coordinator_;
  std::map<std::string, HttpHandler> routes_;
};

TEST_F(DashboardRoutesTest, EveryApiRouteAnswers401WithoutAValidToken) {
  ASSERT_NO_FATAL_FAILURE(Start(true));
  const std::string job = Submit("alice");
  for (const char* path : {"/api/jobs", "/api/workers", "/api/job", "/api/job/figures"}) {
    HttpResponse none = Get(path, {{"id", job}});
    EXPECT_EQ(none.status, 401) << path;
    EXPECT_THAT(none.headers["WWW-Authenticate"], HasSubstr("Bearer")) << path;
    EXPECT_EQ(json::parse(none.body)["error"].get<std::string>().empty(), false) << path;
    EXPECT_EQ(Get(path, {{"id", job}}, "not-a-known-token-at-all").status, 401) << path;
    HttpRequest basic{path, {{"id", job}}, {{"authorization", "Basic YWxpY2U6eA=="}}};
    EXPECT_EQ(routes_[path](basic).status, 401) << path;
  }
}

TEST_F(DashboardRoutesTest, AUserSeesOnlyTheirOwnJobsAndAnAdminEveryJob) {
  ASSERT_NO_FATAL_FAILURE(Start(true));
  const std::string alices = Submit("alice");
  const std::string carols = Submit("carol");
  auto listed = [&](const std::string& token) {
    HttpResponse r = Get("/api/jobs", {}, token);
    EXPECT_EQ(r.status, 200) << r.body;
    const json list = json::parse(r.body);
    std::set<std::string> ids;
    for (const json& j : list["jobs"]) ids.insert(j["job_id"].get<std::string>());
    return ids;
  };
  EXPECT_EQ(listed(kAlice), std::set<std::string>{alices});
  EXPECT_EQ(listed(kCarol), std::set<std::string>{carols});
  EXPECT_EQ(listed(kAdmin), (std::set<std::string>{alices, carols}));

  for (const char* path : {"/api/job", "/api/job/figures"}) {
    EXPECT_EQ(Get(path, {{"id", carols}}, kAlice).status, 403) << path;
    EXPECT_EQ(Get(path, {{"id", carols}}, kCarol).status, 200) << path;
    EXPECT_EQ(Get(path, {{"id", carols}}, kAdmin).status, 200) << path;
    HttpResponse unknown = Get(path, {{"id", "job-none\xff\"<"}}, kAdmin);
    EXPECT_EQ(unknown.status, 404) << path;
    EXPECT_THAT(json::parse(unknown.body)["error"].get<std::string>(), HasSubstr("job-none"))
        << path;
    EXPECT_EQ(Get(path, {}, kAdmin).status, 400) << path;
  }
}

TEST_F(DashboardRoutesTest, WithoutTokensTheApiIsOpenAsTheGrpcApiIs) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  const std::string job = Submit("");
  HttpResponse r = Get("/api/jobs");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["jobs"][0]["job_id"], job);
  EXPECT_EQ(Get("/api/job", {{"id", job}}).status, 200);
  EXPECT_EQ(Get("/api/workers").status, 200);
}

TEST_F(DashboardRoutesTest, AJobPollAnswersOnlyTheVersionWhenNothingChanged) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  const std::string job = Submit("");
  HttpResponse first = Get("/api/job", {{"id", job}});
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_THAT(first.content_type, HasSubstr("application/json"));
  json event = json::parse(first.body);
  EXPECT_EQ(event["job"]["job_id"], job);
  EXPECT_EQ(event["job"]["request"]["seq_len"], 16);
  // The model's config text stays out of what the page polls.
  EXPECT_FALSE(event["job"]["request"]["model"].contains("config_json")) << first.body;
  const std::string version = event["version"].get<std::string>();
  EXPECT_NE(version, "0");

  HttpResponse again = Get("/api/job", {{"id", job}, {"since", version}});
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(json::parse(again.body), json({{"version", version}})) << again.body;
  EXPECT_EQ(Get("/api/job", {{"id", job}, {"since", "soon"}}).status, 400);
}

TEST_F(DashboardRoutesTest, TheFiguresAreTheReportsThreeSvgSections) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  HttpResponse r = Get("/api/job/figures", {{"id", Submit("")}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.content_type, HasSubstr("text/html"));
  for (const char* id : {"throughput-memory", "best-over-time", "predicted-measured"}) {
    EXPECT_THAT(r.body, HasSubstr(absl::StrCat("<section id=\"", id, "\">")));
  }
  EXPECT_THAT(r.body, HasSubstr("<svg"));
  EXPECT_THAT(r.body, Not(HasSubstr("<script")));
}

TEST_F(DashboardRoutesTest, PagesAreServedWithoutATokenAndForbidInlineAndForeignScripts) {
  ASSERT_NO_FATAL_FAILURE(Start(true));
  for (const char* path : {"/", "/job", "/dashboard.js", "/dashboard.css", "/report.css"}) {
    HttpResponse r = Get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_FALSE(r.body.empty()) << path;
    const std::string csp = r.headers["Content-Security-Policy"];
    EXPECT_THAT(csp, HasSubstr("default-src 'self'")) << path;
    EXPECT_THAT(csp, Not(HasSubstr("unsafe"))) << path;
  }
  EXPECT_THAT(Get("/").content_type, HasSubstr("text/html"));
  EXPECT_THAT(Get("/dashboard.js").content_type, HasSubstr("text/javascript"));
  EXPECT_THAT(Get("/report.css").content_type, HasSubstr("text/css"));
  // Nothing is loaded from elsewhere, and no script is inline.
  for (const char* page : {"/", "/job"}) {
    const std::string html = Get(page).body;
    EXPECT_THAT(html, Not(HasSubstr("://"))) << page;
    EXPECT_THAT(html, Not(HasSubstr("<script>"))) << page;
    EXPECT_THAT(html, HasSubstr("<script src=\"/dashboard.js\"")) << page;
  }
}

}  // namespace
}  // namespace autoaccel
