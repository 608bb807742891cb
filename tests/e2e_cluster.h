// The end-to-end tests' cluster: a real autoaccel-server, real workers and
// the CLI, each a subprocess with its log in one temporary folder (kept
// for a failed test), and the SQLite file read back directly. Test code
// only; one thread.
#ifndef AUTOACCEL_TESTS_E2E_CLUSTER_H_
#define AUTOACCEL_TESTS_E2E_CLUSTER_H_

#include <signal.h>
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/subprocess.h"

namespace autoaccel::e2e {

using ::autoaccel::testing::AddressFromLine;
using ::autoaccel::testing::FreePort;
using ::autoaccel::testing::MakeTempDir;
using ::autoaccel::testing::RunCommand;
using ::autoaccel::testing::Subprocess;
using ::autoaccel::testing::WriteFile;
using nlohmann::json;

inline constexpr char kTinyGpt[] =
    R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4,
  "vocab_size": 64, "n_positions": 32})";

class Cluster {
 public:
  Cluster() : dir_(MakeTempDir("autoaccel-e2e-")), db_(dir_ + "/autoaccel.db") {
    config_ = dir_ + "/config.json";
    WriteFile(config_, kTinyGpt);
  }
  // Stops every process; keeps the folder (logs, database) only for a failed test.
  ~Cluster() {
    workers_.clear();
    server_.reset();
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_);
  }

  // `extra`: more server flags (TLS, tokens).
  bool StartServer(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        AUTOACCEL_SERVER_BIN,   "--listen", "127.0.0.1:0",      "--db", db_,
        "--heartbeat-interval", "0.5",      "--worker-timeout", "3"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<Subprocess>(argv, dir_, absl::StrCat("server", ++servers_));
    address_ = AddressFromLine(server_->WaitForLine("listening on", absl::Seconds(20)));
    return !address_.empty();
  }
  void StopServer() { server_->Signal(SIGTERM); }
  // A coordinator crash (SIGKILL), then one started again on the same
  // database and address (the CLI and workers keep theirs).
  void KillServer() { server_->Signal(SIGKILL); }
  bool RestartServer() {
    const std::string was = address_;
    std::vector<std::string> argv = {
        AUTOACCEL_SERVER_BIN, "--listen", was, "--db", db_, "--heartbeat-interval", "0.5",
        "--worker-timeout",   "3"};
    server_ = std::make_unique<Subprocess>(argv, dir_, absl::StrCat("server", ++servers_));
    address_ = AddressFromLine(server_->WaitForLine("listening on", absl::Seconds(20)));
    return address_ == was;
  }
  // The CLI with `args`, running in the background (stdout and stderr to
  // files in dir()).
  std::unique_ptr<Subprocess> StartCli(std::vector<std::string> args, const std::string& name) {
    std::vector<std::string> argv = {AUTOACCEL_CLI_BIN, "--server", address_};
    argv.insert(argv.end(), cli_flags.begin(), cli_flags.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Subprocess>(argv, dir_, name);
  }

  // `ports`: the worker's rendezvous range; "" for a port of its own, so
  // that tests running side by side do not meet in each other's stores.
  Subprocess* StartWorker(const std::string& name, const std::string& devices = "cpu:1",
                          std::string ports = "", std::vector<std::string> extra = {}) {
    if (ports.empty()) {
      const int port = FreePort();
      ports = absl::StrCat(port, "-", port);
    }
    std::vector<std::string> argv = {AUTOACCEL_WORKER_BIN, "--coordinator", address_, "--listen",
                                     "127.0.0.1:0", "--devices", devices, "--id", name,
                                     "--threads-per-device", "1", "--work-dir", dir_,
                                     "--rendezvous-ports", ports,
                                     // Known peaks skip the GEMM probe (~1 s per start).
                                     "--peak-tflops", "fp32=0.1,bf16=0.4,fp16=0.01"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    workers_.push_back(std::make_unique<Subprocess>(argv, dir_, name));
    return workers_.back().get();
  }
  bool WaitForWorkers(int n) {
    const absl::Time end = absl::Now() + absl::Seconds(20);
    while (absl::Now() < end) {
      std::string out;
      if (Cli({"workers", "--json"}, &out) == 0) {
        json j = json::parse(out, nullptr, false);
        int healthy = 0;
        if (!j.is_discarded()) {
          for (const auto& w : j["workers"]) healthy += w["healthy"].get<bool>() ? 1 : 0;
        }
        if (healthy >= n) return true;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return false;
  }

  int Cli(std::vector<std::string> args, std::string* out, std::string* err = nullptr,
          absl::Duration timeout = absl::Minutes(5)) {
    std::vector<std::string> argv = {AUTOACCEL_CLI_BIN, "--server", address_};
    argv.insert(argv.end(), cli_flags.begin(), cli_flags.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_, out, err, timeout);
  }

  // `tune` of the tiny model with global batch `batch`, then `flags`.
  std::vector<std::string> TuneArgs(int batch, std::initializer_list<const char*> flags) const {
    std::vector<std::string> args = {"tune"};
    for (const std::string& a : ModelArgs(batch)) args.push_back(a);
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  std::vector<std::string> ModelArgs(int batch = 4) const {
    return {"--model",   "gpt2", "--model-config",      config_,
            "--seq-len", "16",   "--global-batch-size", std::to_string(batch)};
  }

  // Rows of `sql` (first column joined with '|' per row).
  std::vector<std::string> Query(const std::string& sql) const {
    sqlite3* db = nullptr;
    std::vector<std::string> rows;
    if (sqlite3_open_v2(db_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      return rows;
    }
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
    while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        const unsigned char* text = sqlite3_column_text(stmt, i);
        absl::StrAppend(&row, i ? "|" : "", text ? reinterpret_cast<const char*>(text) : "");
      }
      rows.push_back(row);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return rows;
  }

  const std::string& dir() const { return dir_; }
  const std::string& address() const { return address_; }
  Subprocess* server() { return server_.get(); }

  // Flags every Cli call passes before its arguments (--tls-ca, --token-file).
  std::vector<std::string> cli_flags;
  const std::string& config() const { return config_; }

 private:
  std::string dir_, db_, config_, address_;
  int servers_ = 0;
  std::unique_ptr<Subprocess> server_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

inline nlohmann::json ParseJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text;
  return j;
}

}  // namespace autoaccel::e2e

#endif  // AUTOACCEL_TESTS_E2E_CLUSTER_H_
