// autoaccel-server: the coordinator.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/daemon_start.h"
#include "common/json_log.h"
#include "common/listen_policy.h"
#include "common/memory_trim.h"
#include "common/protobuf_log.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "common/tls_files.h"
#include "proto/convert.h"
#include "server/auth.h"
#include "server/grpc_executor.h"
#include "server/http/dashboard_routes.h"
#include "server/http/http_endpoint.h"
#include "server/http/monitoring_routes.h"
#include "server/job_manager.h"
#include "server/service.h"
#include "server/store/store.h"
#include "server/store/store_backup.h"
#include "server/trial_logs.h"

namespace {

// On a termination signal: running RPCs get this long to finish; after the
// trials still running were cut (--drain-timeout), their workers get this
// long to answer.
constexpr absl::Duration kRpcShutdownGrace = absl::Seconds(5);
constexpr absl::Duration kCutAnswerTimeout = absl::Seconds(10);

// The --tokens and --join-token-file files (either may be ""), as at start
// and on SIGHUP. The first file's error.
absl::Status ReadTokenFiles(const std::string& tokens_file, const std::string& join_token_file,
                            std::vector<autoaccel::UserToken>* users, std::string* join_token) {
  if (!tokens_file.empty()) {
    ASSIGN_OR_RETURN(*users, autoaccel::ReadTokensFile(tokens_file));
  }
  if (!join_token_file.empty()) {
    ASSIGN_OR_RETURN(*join_token, autoaccel::ReadTokenFile(join_token_file, "--join-token-file"));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  autoaccel::BlockTerminationSignals(/*reload=*/true);  // SIGHUP reads the token files again
  autoaccel::LogProtobufThroughSpdlog();
  CLI::App app{"autoaccel-server: coordinates tuning jobs and worker daemons"};
  std::string listen = "127.0.0.1:50051";
  std::string db = "autoaccel.db";
  std::string log_level = "info";
  double heartbeat_s = 2, worker_timeout_s = 10, drain_timeout_s = 10;
  app.add_option("--listen", listen, "HOST:PORT to serve on (port 0 picks a free one)");
  app.add_option("--db", db, "SQLite database file (created if missing)");
  std::string http_listen;
  app.add_option("--http-listen", http_listen,
                 "HOST:PORT to serve HTTP on (port 0 picks a free one): the dashboard at /, "
                 "Prometheus metrics at /metrics, /healthz and /readyz (the dashboard's data "
                 "needs a user token when --tokens is given: docs/MONITORING.md). A non-loopback "
                 "address needs --tokens and --http-tls-cert/--http-tls-key, or --insecure");
  std::string http_tls_cert, http_tls_key;
  app.add_option("--http-tls-cert", http_tls_cert,
                 "PEM certificate chain to serve the HTTP port with (HTTPS)");
  app.add_option("--http-tls-key", http_tls_key, "PEM private key of --http-tls-cert");
  std::vector<std::string> http_hosts;
  app.add_option("--http-host", http_hosts,
                 "a host name the HTTP port is reached by (repeatable). Without --tokens a "
                 "request naming any other host (besides IP addresses and localhost) is refused, "
                 "so no web page can reach the dashboard through DNS rebinding");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "text, or json: one JSON object per line with job_id and trial_id where the line "
                 "is about one")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--heartbeat-interval", heartbeat_s, "seconds between worker heartbeats")
      ->check(CLI::PositiveNumber);
  app.add_option("--worker-timeout", worker_timeout_s,
                 "seconds of silence after which a worker is declared lost")
      ->check(CLI::PositiveNumber);
  app.add_option("--drain-timeout", drain_timeout_s,
                 "on SIGTERM/SIGINT, seconds the trials running get to finish and be recorded; "
                 "those still running then are cut and run again when the server starts again "
                 "on the same --db (running jobs always go on then)")
      ->check(CLI::NonNegativeNumber);
  autoaccel::ModelFileLimits model_file_limits;
  double model_files_per_user_gib =
      static_cast<double>(model_file_limits.per_user_bytes) / (1 << 30);
  double model_files_gib = static_cast<double>(model_file_limits.total_bytes) / (1 << 30);
  app.add_option("--model-files-per-user", model_files_per_user_gib,
                 "GiB of TorchScript files one user's unfinished jobs may hold (kept on disk "
                 "beside --db as DB.model-files/, deleted when each job ends)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--model-files-total", model_files_gib,
                 "GiB of TorchScript files every user's unfinished jobs may hold together")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::string tokens_file, join_token_file;
  autoaccel::TlsFiles tls;
  bool insecure = false;
  app.add_option("--tokens", tokens_file,
                 "file of user tokens, one \"TOKEN USER [admin]\" per line: clients must present "
                 "one, and see and cancel only their own jobs (admins: every job)");
  app.add_option("--join-token-file", join_token_file,
                 "file whose first line is the token workers must present to register");
  app.add_option("--tls-cert", tls.cert, "PEM certificate chain to serve TLS with");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", tls.ca,
                 "PEM CA certificates to trust when connecting to workers that serve TLS "
                 "(default: the system's)");
  bool open_registration = false;
  app.add_flag("--open-registration", open_registration,
               "with --tokens but no --join-token-file: let any process that reaches the port "
               "register as a worker (it receives every user's models; logged as insecure)");
  app.add_flag("--insecure", insecure,
               "serve on a non-loopback address without TLS or tokens (every log line says so)");
  std::string backup;  // --backup: copy the database and exit (server/store/store_backup.h)
  app.add_option("--backup", backup,
                 "copy the database (--db) to FILE and exit; safe while a server uses it");
  CLI11_PARSE(app, argc, argv);
  if (!backup.empty()) {
    auto copied = autoaccel::BackupDatabase(db, backup);
    if (!copied.ok()) {
      std::fprintf(stderr, "autoaccel-server: %s\n", copied.status().ToString().c_str());
      return 1;
    }
    std::printf(
        "autoaccel-server: copied %s to %s (%lld bytes, schema %d, %lld jobs, %lld trials)\n",
        db.c_str(), backup.c_str(), static_cast<long long>(copied->bytes), copied->schema_version,
        static_cast<long long>(copied->jobs), static_cast<long long>(copied->trials));
    return 0;
  }
  std::vector<std::string> missing =
      autoaccel::MissingProtections(tls, !tokens_file.empty(), !join_token_file.empty());
  autoaccel::DaemonStart start;
  start.daemon = "autoaccel-server";
  start.log_level = log_level;
  start.log_format = log_format;
  start.insecure = insecure;
  start.ports = {{listen, missing, ""}};
  if (!http_listen.empty()) {
    std::vector<std::string> http_missing;
    if (http_tls_cert.empty()) http_missing.push_back("TLS (--http-tls-cert/--http-tls-key)");
    if (tokens_file.empty()) http_missing.push_back("user tokens (--tokens)");
    start.ports.push_back({http_listen, http_missing, "HTTP port"});
  }
  if (!tokens_file.empty() && join_token_file.empty() && !open_registration) {
    std::fprintf(stderr,
                 "autoaccel-server: --tokens without --join-token-file: any process that reaches "
                 "the port could register as a worker and receive every user's model configs "
                 "and files. Give --join-token-file (deploy/tls/make-tokens writes one), or "
                 "--open-registration to allow that knowingly\n");
    return 2;
  }
  if (!tokens_file.empty() && join_token_file.empty()) {
    start.also_insecure = "open registration: any process may register as a worker";
  }
  absl::StatusOr<std::string> unprotected = autoaccel::StartDaemon(start);
  if (!unprotected.ok()) {
    std::fprintf(stderr, "autoaccel-server: %s\n",
                 std::string(unprotected.status().message()).c_str());
    return 2;
  }
  const std::string insecure_why = *unprotected;
  std::vector<autoaccel::UserToken> users;
  std::string join_token;
  if (absl::Status read = ReadTokenFiles(tokens_file, join_token_file, &users, &join_token);
      !read.ok()) {
    std::fprintf(stderr, "autoaccel-server: %s\n", std::string(read.message()).c_str());
    return 2;
  }
  autoaccel::Authenticator auth(std::move(users), std::move(join_token));
  auto server_credentials = autoaccel::ServerCredentialsFor(tls);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> worker_credentials = nullptr;
  if (server_credentials.ok() && !tls.ca.empty()) {
    worker_credentials = autoaccel::ChannelCredentialsFor(autoaccel::TlsFiles{"", "", tls.ca});
  }
  for (const absl::Status& s : {server_credentials.status(), worker_credentials.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "autoaccel-server: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }

  auto store = autoaccel::Store::Open(db);
  if (!store.ok()) {
    std::fprintf(stderr, "autoaccel-server: %s\n", store.status().ToString().c_str());
    return 1;
  }
  autoaccel::GrpcTrialExecutorOptions executor_options;
  if (!tls.ca.empty()) executor_options.tls_credentials = *worker_credentials;
  autoaccel::GrpcTrialExecutor executor(executor_options);
  autoaccel::JobManagerOptions options;
  options.heartbeat_interval = absl::Seconds(heartbeat_s);
  options.worker_timeout = absl::Seconds(worker_timeout_s);
  options.model_file_dir = db == ":memory:" ? "" : db + ".model-files";
  options.model_file_limits.per_user_bytes =
      static_cast<int64_t>(model_files_per_user_gib * (int64_t{1} << 30));
  options.model_file_limits.total_bytes =
      static_cast<int64_t>(model_files_gib * (int64_t{1} << 30));
  auto manager =
      autoaccel::JobManager::Create(store->get(), &executor, autoaccel::RealClock(), options);
  if (!manager.ok()) {
    std::fprintf(stderr, "autoaccel-server: %s\n", manager.status().ToString().c_str());
    return 1;
  }
  autoaccel::TrialLogRelay logs((*manager).get(), &executor);
  autoaccel::TuningServiceImpl tuning((*manager).get(), store->get(), &auth, insecure_why, &logs);
  autoaccel::WorkerRegistryImpl registry((*manager).get(), &auth);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, *server_credentials, &port);
  builder.SetMaxReceiveMessageSize(autoaccel::kMaxMessageBytes);  // torchscript files
  builder.RegisterService(&tuning);
  builder.RegisterService(&registry);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "autoaccel-server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  autoaccel::Announce(
      absl::StrFormat("autoaccel-server listening on %s:%d (database %s; %s, %s, %s)%s", host, port,
                      db, tls.serves_tls() ? "TLS" : "plaintext",
                      auth.users_required() ? "user tokens required" : "no user tokens",
                      auth.join_token_required() ? "join token required" : "no join token",
                      insecure_why.empty() ? "" : " INSECURE: " + insecure_why));
  autoaccel::Readiness readiness;
  std::unique_ptr<autoaccel::HttpEndpoint> http;
  if (!http_listen.empty()) {
    std::map<std::string, autoaccel::HttpHandler> routes = autoaccel::MonitoringRoutes(
        (*manager).get(), &readiness, [store = store->get()] { return store->Health(); });
    routes.merge(autoaccel::DashboardRoutes((*manager).get(), &auth));
    autoaccel::HttpEndpointOptions http_options;
    http_options.tls_cert_file = http_tls_cert;
    http_options.tls_key_file = http_tls_key;
    http_options.check_host = !auth.users_required();
    http_options.allowed_hosts = http_hosts;
    auto started =
        autoaccel::HttpEndpoint::Start(http_listen, std::move(routes), std::move(http_options));
    if (!started.ok()) {
      std::fprintf(stderr, "autoaccel-server: %s\n",
                   std::string(started.status().message()).c_str());
      server->Shutdown();
      return 2;
    }
    http = *std::move(started);
    autoaccel::Announce(absl::StrFormat(
        "autoaccel-server http listening on %s:%d (%s; dashboard /, /metrics, /healthz, "
        "/readyz)",
        http->host().find(':') == std::string::npos ? http->host() : "[" + http->host() + "]",
        http->port(), http->tls() ? "HTTPS" : "plain HTTP"));
  }
  (*manager)->Start();
  readiness.Set(autoaccel::Readiness::kReady);
  // Large requests (TorchScript files) leave freed memory in malloc's heaps.
  autoaccel::PeriodicMemoryTrim memory_trim(absl::Seconds(5));

  int sig = 0;
  while ((sig = autoaccel::WaitForTerminationSignal(/*reload=*/true)) == SIGHUP) {
    std::vector<autoaccel::UserToken> reloaded_users;
    std::string reloaded_join_token;
    absl::Status reloaded =
        ReadTokenFiles(tokens_file, join_token_file, &reloaded_users, &reloaded_join_token);
    const size_t count = reloaded_users.size();
    if (reloaded.ok()) {
      reloaded = auth.Reload(std::move(reloaded_users), std::move(reloaded_join_token));
    }
    if (tokens_file.empty() && join_token_file.empty()) {
      spdlog::info("SIGHUP: no --tokens or --join-token-file to read again");
    } else if (reloaded.ok()) {
      spdlog::info("SIGHUP: token files read again: {} user token(s){}", count,
                   join_token_file.empty() ? "" : " and the join token");
    } else {
      spdlog::error("SIGHUP: the token files were not taken, the earlier tokens stay: {}",
                    std::string(reloaded.message()));
    }
  }
  spdlog::info(
      "signal {}: shutting down: no new trials; running jobs go on when the server "
      "starts again on {}",
      sig, db);
  readiness.Set(autoaccel::Readiness::kShuttingDown);
  (*manager)->Shutdown();
  server->Shutdown(absl::ToChronoTime(absl::Now() + kRpcShutdownGrace));
  if ((*manager)->Drain(absl::Seconds(drain_timeout_s))) {
    spdlog::info("every running trial answered and was recorded");
  } else {
    const int cut = (*manager)->CutRunning();
    spdlog::warn(
        "cut {} trial(s) still running after --drain-timeout {}s; recorded as cut, they "
        "run again when the server starts again",
        cut, drain_timeout_s);
  }
  (*manager)->Stop();
  if (http) http->Stop();
  // Workers were told to stop the trials cut; wait for their answers so no
  // callback outlives the manager.
  if (!(*manager)->Drain(kCutAnswerTimeout)) {
    spdlog::warn("some workers did not answer in time; exiting anyway");
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}
