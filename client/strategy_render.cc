#include "client/strategy_render.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/render.h"

namespace autoaccel {
namespace {

using nlohmann::json;

int EngineVersion(const v1::StrategyAnswer& a) {
  int version = 0;
  return absl::SimpleAtoi(a.engine_version(), &version) ? version : 0;
}

// "124.4M", "6.7B"; "-" for 0 (unknown).
std::string Parameters(int64_t n) {
  if (n <= 0) return "-";
  if (n >= 1'000'000'000) return absl::StrFormat("%.1fB", n / 1e9);
  if (n >= 1'000'000) return absl::StrFormat("%.1fM", n / 1e6);
  return absl::StrFormat("%.1fK", n / 1e3);
}

}  // namespace

std::string CertaintyText(const v1::StrategyAnswer& a) {
  if (a.certainty().empty()) return a.confirmed() ? "measured again" : "measured once";
  const std::string measured =
      a.measurements() > 1
          ? absl::StrFormat("%d measurements, spread %.1f%%, 95%% interval %.0f-%.0f tokens/s",
                            a.measurements(), 100 * a.spread(), a.interval_low(), a.interval_high())
          : std::string("measured once");
  if (a.certainty() == "tie") {
    return absl::StrCat("a tie (", measured, ") with ", a.tied_with_size(), " other strateg",
                        a.tied_with_size() == 1 ? "y" : "ies");
  }
  return absl::StrCat(a.certainty(), " (", measured, ")");
}

std::string EngineVersionText(const v1::StrategyAnswer& a) {
  const int version = EngineVersion(a);
  return version > 0 ? absl::StrCat("v", version) : "-";
}

std::string StoredDate(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

json AnswerProvenanceJson(const v1::StrategyAnswer& a) {
  return json{
      {"job_id", a.job_id()},
      {"stored_at", a.updated_at()},
      {"first_stored_at", a.created_at()},
      {"engine_version", EngineVersion(a)},
      {"confirmed", a.confirmed()},
      {"certainty", a.certainty()},
      {"figure", a.figure()},
      {"interval", json::array({a.interval_low(), a.interval_high()})},
      {"spread", a.spread()},
      {"measurements", a.measurements()},
      {"tied_with", json(std::vector<std::string>(a.tied_with().begin(), a.tied_with().end()))},
      {"hardware", a.hardware()},
      {"parameters", a.parameters()},
      {"signature", a.signature()},
      {"model",
       {{"family", a.model_family()},
        {"seq_len", a.seq_len()},
        {"global_batch_size", a.global_batch_size()}}}};
}

json StrategyListJson(const v1::ListStrategiesResponse& list) {
  json out = json::array();
  for (const v1::StrategyAnswer& a : list.answers()) {
    json entry = AnswerProvenanceJson(a);
    const json answer = StrategyAnswerJson(a);
    entry["strategy"] = answer["best"]["strategy"];
    entry["strategy_json"] = answer["best"]["strategy_json"];
    entry["metrics"] = answer["best"]["metrics"];
    out.push_back(std::move(entry));
  }
  return json{{"strategies", out}};
}

void PrintStrategyList(std::ostream& out, const v1::ListStrategiesResponse& list) {
  if (list.answers().empty()) {
    out << "no strategy recorded\n";
    return;
  }
  out << absl::StrFormat("%-12s %8s %-10s %6s %6s %-9s %10s %9s %-6s %-20s %-28s  %s\n", "model",
                         "params", "signature", "seq", "batch", "hardware", "tokens/s", "peak MiB",
                         "engine", "stored", "job", "strategy");
  for (const v1::StrategyAnswer& a : list.answers()) {
    out << absl::StrFormat("%-12s %8s %-10s %6d %6d %-9s %10.0f %9.1f %-6s %-20s %-28s  %s%s\n",
                           a.model_family(), Parameters(a.parameters()),
                           a.signature().substr(0, 10), a.seq_len(), a.global_batch_size(),
                           a.hardware(), a.metrics().tokens_per_second(),
                           a.metrics().peak_memory_bytes() / (1024.0 * 1024.0),
                           EngineVersionText(a), StoredDate(a.updated_at()), a.job_id(),
                           a.strategy().text(), absl::StrCat("  (", CertaintyText(a), ")"));
  }
}

std::string AnsweredFromLine(const v1::StrategyAnswer& a) {
  return absl::StrCat("answered from the strategy database: job ", a.job_id(), " of ",
                      StoredDate(a.updated_at()), ", engine ", EngineVersionText(a), ", ",
                      CertaintyText(a), "; --force to tune again");
}

}  // namespace autoaccel
