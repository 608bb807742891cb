#include "client/render.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/strategy_render.h"
#include "common/trial_reason.h"
#include "common/untrusted_json.h"
#include "proto/convert.h"
#include "spec/trial.h"

namespace autoaccel {
namespace {

using nlohmann::json;

template <typename Repeated>
std::vector<std::string> Strings(const Repeated& r) {
  return std::vector<std::string>(r.begin(), r.end());
}

json StrategyJsonOf(const std::string& text) {
  absl::StatusOr<json> j = ParseUntrustedJson(text, "strategy_json");
  return j.ok() ? *j : json(nullptr);
}

json MetricsJson(const v1::TrialMetrics& m) { return TrialMetricsToJson(FromProto(m)); }

// The job's request as the server validated it (defaults filled in; a
// torchscript file is never sent back), in the form the server stores.
json RequestJson(const v1::TuneRequest& r) {
  json j = json::parse(ProtoToJson(r), nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

json PrunedSummaryJson(const v1::Job& j) {
  json out = json::array();
  for (const v1::PrunedSummary& p : j.pruned_summary()) {
    out.push_back(
        {{"kind", p.kind()},
         {"count", p.count()},
         {"example",
          {{"strategy", p.example().strategy().text()}, {"reason", p.example().reason()}}}});
  }
  return out;
}

json DeviceJson(const v1::Device& d) {
  return {{"type", d.type()},
          {"index", d.index()},
          {"name", d.name()},
          {"memory_bytes", d.memory_bytes()},
          {"peak_tflops",
           {{"fp32", d.peak_tflops().fp32()},
            {"bf16", d.peak_tflops().bf16()},
            {"fp16", d.peak_tflops().fp16()}}},
          {"held_by_trial", d.held_by_trial()},
          {"ordinal", d.ordinal()}};
}

// {"name", "format", "dimensions"} of each launcher; a launcher without
// dimensions honours every one.
json LauncherJson(const v1::Launcher& l) {
  return {{"name", l.name()}, {"format", l.format()}, {"dimensions", Strings(l.dimensions())}};
}

json LaunchersJson(const google::protobuf::RepeatedPtrField<v1::Launcher>& launchers) {
  json out = json::array();
  for (const v1::Launcher& l : launchers) out.push_back(LauncherJson(l));
  return out;
}

// "hf-llama (format hf-trainer; dimensions precision, sharding)".
std::string LauncherText(const v1::Launcher& l) {
  return absl::StrCat(l.name(), " (format ", l.format().empty() ? "none" : l.format(),
                      "; dimensions ",
                      l.dimensions().empty() ? "all" : absl::StrJoin(l.dimensions(), ", "), ")");
}

json WorkerJson(const v1::Worker& w) {
  json devices = json::array();
  for (const v1::Device& d : w.devices()) devices.push_back(DeviceJson(d));
  return {
      {"worker_id", w.worker_id()},
      {"address", w.address()},
      {"healthy", w.healthy()},
      {"last_seen", w.last_seen()},
      {"registered_at", w.registered_at()},
      {"rendezvous_ports", {{"min", w.rendezvous_port_min()}, {"max", w.rendezvous_port_max()}}},
      {"host_cpu_cores", w.host_cpu_cores()},
      {"host_memory_bytes", w.host_memory_bytes()},
      {"warnings", Strings(w.warnings())},
      {"launchers", LaunchersJson(w.launchers())},
      {"tls", w.tls()},
      {"insecure", w.insecure()},
      {"timing_jitter", w.timing_jitter()},
      {"devices", devices}};
}

std::string Mib(int64_t bytes) { return absl::StrFormat("%.1f", bytes / (1024.0 * 1024.0)); }

// MFU as a percentage, or "-" when the device's peak is unknown.
std::string Mfu(double mfu) { return mfu > 0 ? absl::StrFormat("%.1f%%", 100 * mfu) : "-"; }

// The cost model's prediction for the trial when it was proposed:
// {"step_time_s", "peak_memory_bytes", "tokens_per_second"}, a figure it
// has none for (peak memory of a torchscript model) null; null when the
// trial has no prediction (a confirmation, or a job without a model).
json PredictedJson(const v1::Trial& t) {
  if (!t.has_predicted()) return nullptr;
  const v1::Prediction& p = t.predicted();
  const auto figure = [](auto v) { return v > 0 ? json(v) : json(nullptr); };
  return json{{"step_time_s", figure(p.step_time_s())},
              {"peak_memory_bytes", figure(p.peak_memory_bytes())},
              {"tokens_per_second", figure(p.tokens_per_second())}};
}

// A proxy trial's own measurement (the trial's metrics are then
// extrapolated from it): {"proxy", "strategy", "measured", "step_time_low_s",
// "step_time_high_s", "relative_uncertainty"}; null for a trial measured at
// full size.
json ProxyJson(const v1::Trial& t) {
  if (!t.has_proxy()) return nullptr;
  const v1::ProxyMeasurement& p = t.proxy();
  return json{{"proxy", p.proxy()},
              {"strategy", p.strategy_text()},
              {"measured", MetricsJson(p.measured())},
              {"step_time_low_s", p.step_time_low_s()},
              {"step_time_high_s", p.step_time_high_s()},
              {"relative_uncertainty", p.relative_uncertainty()}};
}

// The predicted step time in ms and peak memory in MiB columns, "-" where
// there is no prediction.
std::string PredictedMs(const v1::Trial& t) {
  const double s = t.has_predicted() ? t.predicted().step_time_s() : 0;
  return s > 0 ? absl::StrFormat("%.1f", s * 1000) : "-";
}
std::string PredictedMib(const v1::Trial& t) {
  const int64_t b = t.has_predicted() ? t.predicted().peak_memory_bytes() : 0;
  return b > 0 ? Mib(b) : "-";
}

}  // namespace

// ---- JSON -------------------------------------------------------------------

void WriteJson(std::ostream& out, const json& doc) {
  out << doc.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

json ErrorJson(const std::string& what, int code) { return json{{"error", what}, {"code", code}}; }

json TrialJson(const v1::Trial& t) {
  return json{{"trial_id", t.trial_id()},
              {"index", t.index()},
              {"attempt", t.attempt()},
              {"strategy", t.strategy().text()},
              {"strategy_json", StrategyJsonOf(t.strategy_json())},
              {"status", t.status()},
              {"reason", t.reason()},
              {"metrics", MetricsJson(t.metrics())},
              {"worker_ids", Strings(t.worker_ids())},
              {"started_at", t.started_at()},
              {"finished_at", t.finished_at()},
              {"failed_attempts", Strings(t.failed_attempts())},
              {"infrastructure", t.infrastructure()},
              {"confirms", t.confirms()},
              {"predicted", PredictedJson(t)},
              {"proxy", ProxyJson(t)},
              {"full_size", t.full_size()}};
}

json JobJson(const v1::Job& j, const std::vector<v1::Trial>* trials) {
  json out{{"job_id", j.job_id()},
           {"owner", j.owner()},
           {"state", j.state()},
           {"status_message", j.status_message()},
           {"signature", j.signature()},
           {"elapsed_seconds", j.elapsed_seconds()},
           {"created_at", j.created_at()},
           {"finished_at", j.finished_at()},
           {"time_limit_seconds", j.request().time_limit_seconds()},
           {"trials_total", j.trials_total()},
           {"trials_done", j.trials_done()},
           {"trials_running", j.trials_running()},
           {"trials_pruned", j.trials_pruned()},
           {"pruned_summary", PrunedSummaryJson(j)},
           {"algorithm", j.algorithm()},
           {"infrastructure_failures", j.infrastructure_failures()},
           {"trials_lost", j.trials_lost()},
           {"infrastructure_reasons", Strings(j.infrastructure_reasons())},
           {"partial_evidence", j.partial_evidence()},
           {"model",
            {{"family", j.request().model().family()},
             {"seq_len", j.request().seq_len()},
             {"global_batch_size", j.request().global_batch_size()}}},
           {"launcher", j.has_launcher() ? LauncherJson(j.launcher()) : json(nullptr)},
           {"request", RequestJson(j.request())}};
  if (j.has_best()) {
    out["best"] = json{{"trial_id", j.best().trial_id()},
                       {"index", j.best().index()},
                       {"strategy", j.best().strategy().text()},
                       {"strategy_json", StrategyJsonOf(j.best().strategy_json())},
                       {"metrics", MetricsJson(j.best().metrics())},
                       {"proxy", ProxyJson(j.best())},
                       {"confirmed", j.best_confirmed()},
                       {"measurements", j.best_measurements()},
                       {"spread", j.best_spread()},
                       {"certainty", j.best_certainty()},
                       {"figure", j.best_figure()},
                       {"interval", json::array({j.best_interval_low(), j.best_interval_high()})},
                       {"tied_with", json(std::vector<std::string>(j.best_tied_with().begin(),
                                                                   j.best_tied_with().end()))}};
  } else {
    out["best"] = nullptr;
  }
  out["answered_from"] =
      j.has_answered_from() ? AnswerProvenanceJson(j.answered_from()) : json(nullptr);
  out["standings"] = json::array();
  for (const v1::StrategyStanding& s : j.standings()) {
    out["standings"].push_back(
        json{{"strategy", s.strategy_text()},
             {"figure", s.figure()},
             {"interval", json::array({s.interval_low(), s.interval_high()})},
             {"spread", s.spread()},
             {"measurements", s.measurements()},
             {"agrees", s.agrees()},
             {"trial_indices",
              json(std::vector<int>(s.trial_indices().begin(), s.trial_indices().end()))},
             {"peak_memory_bytes", s.peak_memory_bytes()},
             {"answer", s.answer()}});
  }
  if (trials != nullptr) {
    out["trials"] = json::array();
    for (const v1::Trial& t : *trials) out["trials"].push_back(TrialJson(t));
  }
  return out;
}

json JobListJson(const v1::ListJobsResponse& jobs) {
  json out = json::array();
  for (const v1::Job& j : jobs.jobs()) out.push_back(JobJson(j, nullptr));
  return json{{"jobs", out}};
}

json TrialListJson(const std::string& job_id, const std::vector<v1::Trial>& trials,
                   const v1::Job& job) {
  json out = json::array();
  for (const v1::Trial& t : trials) out.push_back(TrialJson(t));
  return json{{"job_id", job_id}, {"trials", out}, {"pruned_summary", PrunedSummaryJson(job)}};
}

json StrategyAnswerJson(const v1::StrategyAnswer& a) {
  return json{{"signature", a.signature()},
              {"hardware", a.hardware()},
              {"job_id", a.job_id()},
              {"updated_at", a.updated_at()},
              {"provenance", AnswerProvenanceJson(a)},
              {"best",
               {{"strategy", a.strategy().text()},
                {"strategy_json", StrategyJsonOf(a.strategy_json())},
                {"metrics", MetricsJson(a.metrics())}}}};
}

json NoStrategyJson(const std::string& what) { return json{{"best", nullptr}, {"error", what}}; }

json WorkerListJson(const v1::ListWorkersResponse& workers) {
  json out = json::array();
  for (const v1::Worker& w : workers.workers()) out.push_back(WorkerJson(w));
  return json{{"workers", out},
              {"coordinator_insecure", workers.coordinator_insecure()},
              {"workers_total", workers.workers_total()},
              {"workers_healthy", workers.workers_healthy()},
              {"devices_total", workers.devices_total()},
              {"devices_free", workers.devices_free()}};
}

// ---- Text -------------------------------------------------------------------

// Each measured figure the cost model predicts has its prediction beside
// it ("pred"), for every trial the search proposed, whatever its status (an
// OOM row shows how much the model thought it needed).
std::string TrialTableHeader() {
  return absl::StrFormat("%4s  %-9s %10s %9s %9s %7s %9s %9s %6s %7s  %s", "#", "status",
                         "tokens/s", "step ms", "pred ms", "comm ms", "peak MiB", "pred MiB", "MFU",
                         "loss", "strategy");
}

// The strategy column comes last: its canonical text varies in length (new
// dimensions add keys, ckpt_pct appears only when not 100), so fixed-width
// columns stay aligned only before it.
std::string TrialRow(const v1::Trial& t) {
  const v1::TrialMetrics& m = t.metrics();
  // A confirmation names the trial it measures again: "repeat of #3"; a
  // proxy job's full-size check "#3 at full size"; a proxy trial's figures
  // are extrapolated.
  std::string repeat = t.has_proxy() ? "  extrapolated" : "";
  if (const size_t at = t.confirms().rfind("-t"); at != std::string::npos) {
    int index = 0;
    if (absl::SimpleAtoi(t.confirms().substr(at + 2), &index)) {
      absl::StrAppend(&repeat, t.full_size() ? absl::StrCat("  #", index, " at full size")
                                             : absl::StrCat("  repeat of #", index));
    }
  }
  if (TrialStatusOf(t) == TrialStatus::kSucceeded) {
    return absl::StrFormat("%4d  %-9s %10.0f %9.1f %9s %7.1f %9s %9s %6s %7.3f  %s%s%s", t.index(),
                           t.status(), m.tokens_per_second(), m.step_time_median_s() * 1000,
                           PredictedMs(t), m.comm_time_s() * 1000, Mib(m.peak_memory_bytes()),
                           PredictedMib(t), Mfu(m.mfu()), m.final_loss(), t.strategy().text(),
                           FromProto(m).IsNoisy() ? "  noisy" : "", repeat);
  }
  // What happened and the last line of the rank's stderr, not who said it.
  const std::string reason = ReasonSummary(t.reason(), 100);
  return absl::StrFormat("%4d  %-9s %10s %9s %9s %7s %9s %9s %6s %7s  %s%s", t.index(), t.status(),
                         "-", "-", PredictedMs(t), "-", "-", PredictedMib(t), "-", "-",
                         t.strategy().text(),
                         reason.empty() ? "" : absl::StrCat("  (", reason, ")"));
}

void PrintTrialTable(std::ostream& out, const std::vector<v1::Trial>& trials, const v1::Job& job) {
  out << TrialTableHeader() << "\n";
  const v1::Trial* failed = nullptr;  // the first that failed by itself
  for (const v1::Trial& t : trials) {
    const std::optional<TrialStatus> status = TrialStatusOf(t);
    if (status != TrialStatus::kPruned) out << TrialRow(t) << "\n";
    const bool own_failure = status == TrialStatus::kFailed || status == TrialStatus::kTimeout;
    if (failed == nullptr && own_failure && !t.infrastructure()) failed = &t;
  }
  if (failed != nullptr) {
    out << absl::StrFormat("      a failed trial's whole output: autoaccel logs %s %d [--rank N]\n",
                           job.job_id(), failed->index());
  }
  for (const v1::PrunedSummary& p : job.pruned_summary()) {
    out << absl::StrFormat("      %d candidate(s) PRUNED, %s; e.g. %s: %s\n", p.count(), p.kind(),
                           p.example().strategy().text(), p.example().reason());
  }
}

std::string JobStateLine(const v1::Job& j) {
  return absl::StrCat("job ", j.job_id(), ": ", j.state(), " — ", j.status_message());
}

void PrintJobSummary(std::ostream& out, const v1::Job& j) {
  out << JobStateLine(j) << "\n";
  PrintJobDetails(out, j);
}

void PrintJobDetails(std::ostream& out, const v1::Job& j) {
  out << absl::StrFormat(
      "  elapsed %.1fs of %.0fs limit; %d trial(s) run, %d candidate(s) pruned, of %d\n",
      j.elapsed_seconds(), j.request().time_limit_seconds(), j.trials_done() - j.trials_pruned(),
      j.trials_pruned(), j.trials_total());
  if (!j.algorithm().empty()) out << "  search: " << j.algorithm() << "\n";
  if (!j.owner().empty()) out << "  owner: " << j.owner() << "\n";
  if (j.has_launcher()) {
    out << "  launcher: " << LauncherText(j.launcher()) << " (each trial runs your script)\n";
  }
  if (j.infrastructure_failures() > 0) {
    out << absl::StrFormat(
        "  %s: %d attempt(s) failed outside the strategy, %d trial(s) lost after every retry "
        "(%s)\n",
        j.partial_evidence() ? "WARNING, partial evidence" : "infrastructure",
        j.infrastructure_failures(), j.trials_lost(),
        absl::StrJoin(j.infrastructure_reasons(), "; "));
  }
  if (j.has_answered_from()) out << "  " << AnsweredFromLine(j.answered_from()) << "\n";
  if (j.has_best()) {
    const v1::TrialMetrics& m = j.best().metrics();
    out << "  best strategy: " << j.best().strategy().text() << "\n";
    // An answer from the database was measured by the job its line names.
    if (!j.has_answered_from()) {
      const std::string certainty =
          j.best_certainty().empty() ? std::string() : absl::StrCat(j.best_certainty(), ": ");
      out << (j.best_measurements() > 1
                  ? absl::StrFormat("    %smeasured %d times, spread %.1f%%, %.0f tokens/s, 95%% "
                                    "interval %.0f-%.0f (figures below: the trial closest)\n",
                                    certainty, j.best_measurements(), 100 * j.best_spread(),
                                    j.best_figure(), j.best_interval_low(), j.best_interval_high())
                  : absl::StrCat("    ", certainty,
                                 "measured once (no time was left to measure it again)\n"));
      if (!j.best_tied_with().empty()) {
        out << "    a tie within the measurements' uncertainty with "
            << absl::StrJoin(j.best_tied_with(), "; ") << ": the simplest answers\n";
      }
    }
    out << absl::StrFormat(
        "    %.0f tokens/s, %.1f samples/s, %.3f TFLOP/s%s, step %.1f ms, peak memory %s MiB, "
        "loss %.3f\n",
        m.tokens_per_second(), m.samples_per_second(), m.achieved_tflops(),
        m.mfu() > 0
            ? absl::StrFormat(" (MFU %s of %.3g TFLOP/s peak)", Mfu(m.mfu()), m.peak_tflops())
            : "",
        m.step_time_median_s() * 1000, Mib(m.peak_memory_bytes()), m.final_loss());
    if (m.skipped_steps() > 0) {
      out << absl::StrFormat(
          "    note: %d of %d measured fp16 steps skipped their update (gradient overflow), so "
          "the step time is optimistic\n",
          m.skipped_steps(), m.measured_steps());
    }
    if (j.best().has_proxy()) {
      const v1::ProxyMeasurement& p = j.best().proxy();
      out << absl::StrFormat(
          "    EXTRAPOLATED, not measured at full size: step %.1f ms (%.1f-%.1f, +-%.0f%%) from "
          "its proxy (%s: %s) measured at %.1f ms/step, %s MiB\n",
          m.step_time_median_s() * 1000, p.step_time_low_s() * 1000, p.step_time_high_s() * 1000,
          100 * p.relative_uncertainty(), p.proxy(), p.strategy_text(),
          p.measured().step_time_median_s() * 1000, Mib(p.measured().peak_memory_bytes()));
    }
  }
}

std::string ProgressLine(const v1::Job& j) {
  const double limit = j.request().time_limit_seconds();
  const double frac = limit > 0 ? std::min(1.0, j.elapsed_seconds() / limit) : 0;
  const int width = 24;
  const int filled = static_cast<int>(std::round(frac * width));
  std::string bar = std::string(filled, '#') + std::string(width - filled, '-');
  std::string best =
      j.has_best() ? absl::StrFormat("best %.0f tok/s", j.best().metrics().tokens_per_second())
                   : "no result yet";
  // What the job will settle at most: the space, or the trial budget (pruned
  // candidates do not count against it) if smaller.
  int planned = j.trials_total();
  if (j.request().max_trials() > 0) {
    planned = std::min(planned, j.request().max_trials() + j.trials_pruned());
  }
  return absl::StrFormat("[%s] %5.0fs/%.0fs  %s  trials %d/%d done (%d pruned), %d running  %s",
                         bar, j.elapsed_seconds(), limit, j.state(), j.trials_done(), planned,
                         j.trials_pruned(), j.trials_running(), best);
}

std::string PrunedProgressLine(const v1::PrunedSummary& p, int newly) {
  return absl::StrFormat("pruned %d candidate(s), %s (%d of that kind in all), e.g. %s: %s\n",
                         newly, p.kind(), p.count(), p.example().strategy().text(),
                         p.example().reason());
}

void PrintJobList(std::ostream& out, const v1::ListJobsResponse& jobs) {
  out << absl::StrFormat("%-28s %-20s %8s %7s  %s\n", "job", "state", "elapsed", "trials", "best");
  for (const v1::Job& j : jobs.jobs()) {
    out << absl::StrFormat("%-28s %-20s %7.0fs %3d/%-3d  %s\n", j.job_id(), j.state(),
                           j.elapsed_seconds(), j.trials_done(), j.trials_total(),
                           j.has_best() ? j.best().strategy().text() : "-");
  }
}

void PrintStrategyAnswer(std::ostream& out, const v1::StrategyAnswer& a) {
  out << "best strategy: " << a.strategy().text() << "\n"
      << absl::StrFormat(
             "  %.0f tokens/s%s, peak memory %s MiB on %s (found by job %s, stored %s, engine "
             "%s)\n",
             a.metrics().tokens_per_second(),
             a.metrics().mfu() > 0 ? absl::StrCat(", MFU ", Mfu(a.metrics().mfu())) : "",
             Mib(a.metrics().peak_memory_bytes()), a.hardware(), a.job_id(),
             StoredDate(a.updated_at()), EngineVersionText(a))
      << "  " << CertaintyText(a) << "\n";
}

void PrintWorkerList(std::ostream& out, const v1::ListWorkersResponse& workers) {
  if (!workers.coordinator_insecure().empty()) {
    out << "INSECURE coordinator: " << workers.coordinator_insecure() << "\n";
  }
  if (workers.workers().empty()) out << "no workers registered\n";
  if (workers.workers_total() > 0) {
    out << absl::StrFormat("%d worker(s), %d healthy; %d device(s), %d free\n",
                           workers.workers_total(), workers.workers_healthy(),
                           workers.devices_total(), workers.devices_free());
  }
  for (const v1::Worker& w : workers.workers()) {
    out << w.worker_id() << " at " << w.address() << (w.healthy() ? "" : " (LOST)")
        << (w.tls() ? " TLS" : "");
    if (!w.insecure().empty()) out << " INSECURE: " << w.insecure();
    if (w.rendezvous_port_max() > 0) {
      out << "  rendezvous ports " << w.rendezvous_port_min() << "-" << w.rendezvous_port_max();
    }
    if (w.timing_jitter() > 0) {
      out << absl::StrFormat("  timing jitter ±%.1f%%", 100 * w.timing_jitter());
    }
    out << "\n";
    for (const std::string& warning : w.warnings()) out << "  warning: " << warning << "\n";
    for (const v1::Launcher& l : w.launchers()) out << "  launcher " << LauncherText(l) << "\n";
    for (const v1::Device& d : w.devices()) {
      const v1::PeakTflops& peak = d.peak_tflops();
      const std::string peak_text =
          peak.fp32() == 0 && peak.bf16() == 0 && peak.fp16() == 0
              ? "peak unknown"
              : absl::StrFormat("peak TFLOP/s bf16 %.4g fp16 %.4g fp32 %.4g", peak.bf16(),
                                peak.fp16(), peak.fp32());
      out << absl::StrFormat("  %s:%d  %s  %s MiB  %s  %s\n", d.type(), d.index(), d.name(),
                             Mib(d.memory_bytes()), peak_text,
                             d.held_by_trial().empty() ? "free" : "running " + d.held_by_trial());
    }
  }
}

json TrialLogsJson(const v1::TrialLogs& logs) {
  json files = json::array();
  for (const v1::RankLogFile& f : logs.logs().files()) {
    files.push_back(json{{"name", f.name()},
                         {"size_bytes", f.size_bytes()},
                         {"truncated", f.truncated()},
                         {"tail", f.tail()}});
  }
  return json{{"trial_id", logs.trial_id()},
              {"attempt", logs.attempt()},
              {"rank", logs.rank()},
              {"worker_id", logs.worker_id()},
              {"directory", logs.logs().directory()},
              {"running", logs.logs().running()},
              {"files", std::move(files)}};
}

void PrintTrialLogs(std::ostream& out, const v1::TrialLogs& logs) {
  out << absl::StrFormat("trial %s attempt %d, rank %d on worker %s: %s%s\n", logs.trial_id(),
                         logs.attempt(), logs.rank(), logs.worker_id(), logs.logs().directory(),
                         logs.logs().running() ? " (still running)" : "");
  if (logs.logs().files().empty()) out << "(no log files there)\n";
  for (const v1::RankLogFile& f : logs.logs().files()) {
    const double kib = f.size_bytes() / 1024.0;
    out << absl::StrFormat(
        "\n==> %s (%s%s) <==\n", f.name(),
        kib < 1 ? absl::StrCat(f.size_bytes(), " bytes") : absl::StrFormat("%.1f KiB", kib),
        f.truncated() ? ", last lines" : "");
    out << f.tail();
    if (!f.tail().empty() && f.tail().back() != '\n') out << "\n";
  }
}

}  // namespace autoaccel
