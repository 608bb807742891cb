#include "report/report_html.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/training_cost.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "proto/convert.h"
#include "report/report_figures.h"
#include "report/svg_chart.h"

namespace autoaccel {
namespace {

using google::protobuf::FieldDescriptor;

std::string Mib(double bytes) { return absl::StrFormat("%.1f", bytes / (1024.0 * 1024.0)); }
std::string Utc(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}
std::string Seconds(double s) { return absl::StrFormat("%.1f s", s); }
std::string E(absl::string_view text) { return HtmlEscape(text); }

// A row of the settings table; `value` is escaped here.
std::string Row(absl::string_view key, absl::string_view value) {
  return absl::StrCat("<tr><th>", E(key), "</th><td>", E(value), "</td></tr>\n");
}

// A field of the request, as text: a list joined with ", ", a scalar as
// itself.
std::string RequestFieldText(const google::protobuf::Message& m, const FieldDescriptor* f) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<std::string> parts;
  const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
  for (int i = 0; i < n; ++i) {
    const bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        parts.push_back(absl::StrCat(rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f)));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        parts.push_back(absl::StrCat(rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f)));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        parts.push_back(absl::StrCat(rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f)));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        parts.push_back((rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f)) ? "yes" : "no");
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        if (f->type() == FieldDescriptor::TYPE_BYTES) {
          parts.push_back("(bytes)");
        } else {
          parts.push_back(rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f));
        }
        break;
      default:
        parts.push_back("(message)");
    }
  }
  return absl::StrJoin(parts, ", ");
}

// Every field of the request that is set, by reflection (a new request
// field shows without a change here); the model is shown on its own.
std::string RequestRows(const v1::TuneRequest& request) {
  std::string out;
  const google::protobuf::Reflection* r = request.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(request, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) continue;
    absl::StrAppend(&out, Row(f->name(), RequestFieldText(request, f)));
  }
  return out;
}

std::string Settings(const ReportInput& in) {
  const v1::Job& j = in.job;
  const v1::ModelSpec& model = j.request().model();
  std::string out = "<section id=\"settings\"><h2>Settings</h2>\n<div class=\"cols\">\n";
  absl::StrAppend(&out, "<table class=\"kv\"><caption>Job</caption>\n", Row("job", j.job_id()),
                  Row("state", j.state()), Row("status", j.status_message()),
                  Row("model family", model.family().empty() ? "not given" : model.family()));
  if (j.has_launcher()) {
    absl::StrAppend(
        &out, Row("launcher", j.launcher().name()),
        Row("launcher format", j.launcher().format().empty() ? "none" : j.launcher().format()));
  }
  if (!model.overrides().empty()) {
    absl::StrAppend(&out, Row("overrides", absl::StrJoin(model.overrides(), ", ")));
  }
  if (!model.new_overrides().empty()) {
    absl::StrAppend(&out, Row("new overrides", absl::StrJoin(model.new_overrides(), ", ")));
  }
  if (!model.input_spec().empty()) absl::StrAppend(&out, Row("input spec", model.input_spec()));
  absl::StrAppend(
      &out, Row("created", Utc(j.created_at())), Row("finished", Utc(j.finished_at())),
      Row("elapsed", absl::StrFormat("%.1f s of a %.0f s limit", j.elapsed_seconds(),
                                     j.request().time_limit_seconds())),
      Row("search", j.algorithm().empty() ? "-" : j.algorithm()),
      Row("trials", absl::StrFormat("%d run, %d running, %d pruned, of %d candidates",
                                    j.trials_done() - j.trials_pruned(), j.trials_running(),
                                    j.trials_pruned(), j.trials_total())),
      Row("signature", j.signature()));
  if (j.infrastructure_failures() > 0) {
    absl::StrAppend(
        &out, Row("infrastructure",
                  absl::StrFormat("%d attempt(s) failed outside the strategy, %d trial(s) lost%s: "
                                  "%s",
                                  j.infrastructure_failures(), j.trials_lost(),
                                  j.partial_evidence() ? " (partial evidence)" : "",
                                  absl::StrJoin(j.infrastructure_reasons(), "; "))));
  }
  for (const v1::PrunedSummary& p : j.pruned_summary()) {
    absl::StrAppend(&out,
                    Row(absl::StrCat("pruned: ", p.kind()),
                        absl::StrFormat("%d, e.g. %s: %s", p.count(), p.example().strategy().text(),
                                        p.example().reason())));
  }
  absl::StrAppend(&out, "</table>\n<table class=\"kv\"><caption>Request</caption>\n",
                  RequestRows(j.request()), "</table>\n</div>\n");
  if (!model.config_json().empty()) {
    absl::StrAppend(&out, "<details><summary>model config</summary><pre>", E(model.config_json()),
                    "</pre></details>\n");
  }
  out += "</section>\n";
  return out;
}

std::string Figure(absl::string_view label, absl::string_view value) {
  return absl::StrCat("<div class=\"figure\"><div class=\"value\">", E(value),
                      "</div><div class=\"label\">", E(label), "</div></div>");
}

// "Settled. ", "A tie with ...: the simplest answers. ", "Provisional: its
// measurements disagree. " or "" (a job finished before certainties).
std::string CertaintySentence(const v1::Job& j) {
  if (j.best_certainty() == "settled") return "Settled. ";
  if (j.best_certainty() == "tie") {
    return absl::StrCat("A tie within the measurements' uncertainty with ",
                        absl::StrJoin(j.best_tied_with(), "; "), ": the simplest answers. ");
  }
  if (j.best_certainty() == "provisional") {
    return "Provisional: its measurements do not agree within the tolerance. ";
  }
  return "";
}

// "To train 1e+12 tokens on this job's 8 devices at the answer's 13000
// tokens/s: 890.3 days (876.8-904.2 by the 95% interval), $427,351 at
// $2.50 per GPU-hour ($420,893-$434,013)." Empty without tokens.
std::string TrainingSentence(const ReportInput& in, double tokens_per_second) {
  const v1::Job& j = in.job;
  if (in.tokens <= 0 || tokens_per_second <= 0) return "";
  const int world_size = std::max(1, j.request().world_size());
  const bool interval = j.best_measurements() > 1 && j.best_interval_low() > 0 &&
                        j.best_interval_high() >= j.best_interval_low();
  const TrainingCost c =
      TrainingCostBetween(tokens_per_second, interval ? j.best_interval_low() : tokens_per_second,
                          interval ? j.best_interval_high() : tokens_per_second, in.tokens,
                          world_size, in.price_per_gpu_hour);
  std::string text = absl::StrFormat(
      "To train %.4g tokens on this job's %d devices at the answer's %.0f tokens/s: %.1f days",
      double(in.tokens), world_size, tokens_per_second, c.days);
  if (interval) {
    absl::StrAppend(&text,
                    absl::StrFormat(" (%.1f-%.1f by the 95%% interval)", c.days_fast, c.days_slow));
  }
  if (c.priced) {
    absl::StrAppend(&text, ", ", FormatMoney(c.cost),
                    absl::StrFormat(" at $%.2f per GPU-hour", c.price_per_gpu_hour));
    if (interval) {
      absl::StrAppend(&text, " (", FormatMoney(c.cost_low), "-", FormatMoney(c.cost_high), ")");
    }
  }
  absl::StrAppend(&text, interval ? "." : " (measured once: no interval).");
  return absl::StrCat("<p id=\"training\">", E(text), "</p>\n");
}

std::string Answer(const ReportInput& in) {
  const v1::Job& j = in.job;
  std::string out = "<section id=\"answer\"><h2>Answer</h2>\n";
  if (!j.has_best()) {
    absl::StrAppend(&out, "<p class=\"none\">No trial succeeded: this job has no answer.</p>",
                    "</section>\n");
    return out;
  }
  const v1::Trial& b = j.best();
  const v1::TrialMetrics& m = b.metrics();
  // The answer's figure (the mean of its kept measurements), as every other
  // place states it; a job from before figures, its trial's.
  const double figure = j.best_figure() > 0 ? j.best_figure() : m.tokens_per_second();
  absl::StrAppend(&out, "<p class=\"strategy\">", E(b.strategy().text()), "</p>\n");
  absl::StrAppend(
      &out, "<div class=\"figures\">", Figure("tokens/s", absl::StrFormat("%.0f", figure)),
      Figure("step time", absl::StrFormat("%.1f ms", 1000 * m.step_time_median_s())),
      Figure("peak memory per device", absl::StrCat(Mib(m.peak_memory_bytes()), " MiB")),
      Figure("MFU", m.mfu() > 0 ? absl::StrFormat("%.1f%%", 100 * m.mfu()) : "-"),
      Figure("samples/s", absl::StrFormat("%.1f", m.samples_per_second())),
      Figure("final loss", absl::StrFormat("%.3f", m.final_loss())), "</div>\n");
  absl::StrAppend(
      &out, "<p>", E(CertaintySentence(j)),
      j.best_measurements() > 1
          ? E(absl::StrFormat("Measured %d times; the measurements spread %.1f%% (trial %s); "
                              "%.0f tokens/s on average, 95%% interval %.0f-%.0f.",
                              j.best_measurements(), 100 * j.best_spread(), b.trial_id(),
                              j.best_figure(), j.best_interval_low(), j.best_interval_high()))
          : E(absl::StrCat("Measured once (trial ", b.trial_id(),
                           "): no time was left to measure it again.")),
      j.partial_evidence()
          ? " <strong>Partial evidence:</strong> trials were lost to infrastructure failures."
          : "",
      "</p>\n", TrainingSentence(in, figure), "</section>\n");
  return out;
}

std::string Dimensions(const ReportInput& in) {
  std::string out =
      "<section id=\"dimensions\"><h2>Effect of each dimension</h2>\n<p class=\"caption\">"
      "For each strategy dimension the job varied: the best figure of a strategy with each "
      "value (bar; a strategy's figure is the mean of its measurements, as the answer's), the "
      "median over its measured trials, and how many trials ran with it (repeats left out). "
      "Green: the answer's value.</p>\n<div class=\"dims\">\n";
  std::vector<std::string> fixed;
  for (const DimensionEffect& d : DimensionEffects(in.job, in.trials)) {
    if (d.values.size() == 1) {
      fixed.push_back(absl::StrCat(d.dimension, " = ", d.values[0].value));
      continue;
    }
    if (d.values.empty()) continue;
    double max_best = 0;
    for (const ValueEffect& v : d.values) max_best = std::max(max_best, v.best_tokens_per_second);
    absl::StrAppend(&out, "<table class=\"dim\" data-dimension=\"", E(d.dimension), "\"><caption>",
                    E(d.dimension),
                    "</caption>\n<tr><th>value</th><th class=\"barcol\">best tokens/s</th>"
                    "<th>median</th><th title=\"measured / run\">trials</th><th>OOM</th></tr>\n");
    for (const ValueEffect& v : d.values) {
      const double share = max_best > 0 ? 100 * v.best_tokens_per_second / max_best : 0;
      // The label sits beside the bar's track, never over the next cell.
      absl::StrAppend(
          &out, "<tr", v.answer ? " class=\"answer\"" : "", "><td class=\"mono\">", E(v.value),
          "</td><td class=\"barcol\"><div class=\"barline\"><div class=\"track\"><div "
          "class=\"bar",
          v.answer ? " top" : "", "\" style=\"width:", absl::StrFormat("%.1f", share),
          "%\"></div></div><span class=\"barlabel\">",
          v.succeeded == 0               ? "none measured"
          : v.best_tokens_per_second > 0 ? absl::StrFormat("%.0f", v.best_tokens_per_second)
                                         : "no figure",
          "</span></div></td><td class=\"num\">",
          v.succeeded > 0 ? absl::StrFormat("%.0f", v.median_tokens_per_second) : "-",
          "</td><td class=\"num\">", absl::StrFormat("%d/%d", v.succeeded, v.trials),
          "</td><td class=\"num\">", v.out_of_memory, "</td></tr>\n");
    }
    out += "</table>\n";
  }
  out += "</div>\n";
  if (!fixed.empty()) {
    absl::StrAppend(&out, "<p class=\"caption\">Held at one value in every trial: ",
                    E(absl::StrJoin(fixed, ", ")), ".</p>\n");
  }
  out += "</section>\n";
  return out;
}

// A numeric cell that sorts by `key` and shows `text`.
std::string NumCell(double key, absl::string_view text) {
  return absl::StrCat("<td class=\"num\" data-sort=\"", absl::StrFormat("%.6g", key), "\">",
                      E(text), "</td>");
}

// A trial's strategy's figure: "1234 (1200-1268, 3x)" for a strategy
// measured more than once, "1234 (once)" for one measured once, "-" for one
// that cannot answer.
std::string StandingCell(const std::map<int, const v1::StrategyStanding*>& standing_of, int index) {
  auto it = standing_of.find(index);
  if (it == standing_of.end()) return NumCell(-1, "-");
  const v1::StrategyStanding& s = *it->second;
  return NumCell(
      s.figure(),
      s.measurements() > 1
          ? absl::StrFormat("%.0f (%.0f-%.0f, %dx)%s", s.figure(), s.interval_low(),
                            s.interval_high(), s.measurements(), s.answer() ? " answer" : "")
          : absl::StrFormat("%.0f (once)%s", s.figure(), s.answer() ? " answer" : ""));
}

// The row's style: one per way a trial that ran can end.
std::string StatusClass(const v1::Trial& t) {
  const std::optional<TrialStatus> status = TrialStatusOf(t);
  if (!status || !IsTerminal(*status) || *status == TrialStatus::kPruned) return "st-other";
  return absl::StrCat("st-", TrialStatusName(*status));
}

std::string Trials(const ReportInput& in) {
  std::string out = absl::StrCat(
      "<section id=\"trials\"><h2>Trials</h2>\n<p class=\"caption\">Every trial that ran, in "
      "the order proposed",
      in.job.trials_pruned() > 0
          ? absl::StrFormat(" (%d pruned candidates, never run, are counted under Settings)",
                            in.job.trials_pruned())
          : "",
      ". Click a column's header to sort by it.</p>\n<table id=\"trial-table\" "
      "class=\"sortable\">\n<thead><tr><th>#</th><th>status</th><th>tokens/s</th>"
      "<th title=\"(p90 - p10) / median of its step times\">step spread</th>"
      "<th title=\"its strategy's figure over all its measurements, with the 95% interval\">"
      "strategy's figure</th><th>step ms</th><th>comm ms</th><th>peak MiB</th><th>MFU</th>"
      "<th>pred. step ms</th><th>pred. peak MiB</th><th>done at</th><th>strategy</th>"
      "<th>reason</th></tr></thead>\n<tbody>\n");
  std::map<std::string, int> index_of;  // a confirmation names the trial it repeats by id
  for (const v1::Trial& t : in.trials) index_of[t.trial_id()] = t.index();
  const std::map<int, const v1::StrategyStanding*> standing_of = StandingsByTrial(in.job);
  for (const v1::Trial& t : in.trials) {
    if (TrialStatusOf(t) == TrialStatus::kPruned) continue;
    const v1::TrialMetrics& m = t.metrics();
    const bool ok = TrialStatusOf(t) == TrialStatus::kSucceeded;
    const bool pred = t.has_predicted() && t.predicted().step_time_s() > 0;
    std::string note = t.reason();
    if (!t.confirms().empty()) {
      auto it = index_of.find(t.confirms());
      note = absl::StrCat("repeat of ",
                          it == index_of.end() ? t.confirms() : absl::StrCat("#", it->second),
                          note.empty() ? "" : "; ", note);
    }
    absl::StrAppend(
        &out, "<tr>", NumCell(t.index(), absl::StrCat(t.index())), "<td class=\"", StatusClass(t),
        "\">", E(t.status()), "</td>",
        NumCell(ok ? m.tokens_per_second() : -1,
                ok ? absl::StrFormat("%.0f", m.tokens_per_second()) : "-"),
        NumCell(
            ok ? m.step_time_spread() : -1,
            ok && m.step_time_spread() > 0
                ? absl::StrFormat("%.0f%%%s", 100 * m.step_time_spread(), m.noisy() ? " noisy" : "")
                : "-"),
        StandingCell(standing_of, t.index()),
        NumCell(ok ? m.step_time_median_s() : -1,
                ok ? absl::StrFormat("%.1f", 1000 * m.step_time_median_s()) : "-"),
        NumCell(ok && m.comm_time_s() > 0 ? m.comm_time_s() : -1,
                ok && m.comm_time_s() > 0 ? absl::StrFormat("%.1f", 1000 * m.comm_time_s()) : "-"),
        NumCell(m.peak_memory_bytes() > 0 ? m.peak_memory_bytes() : -1,
                m.peak_memory_bytes() > 0 ? Mib(m.peak_memory_bytes()) : "-"),
        NumCell(ok ? m.mfu() : -1,
                ok && m.mfu() > 0 ? absl::StrFormat("%.1f%%", 100 * m.mfu()) : "-"),
        NumCell(pred ? t.predicted().step_time_s() : -1,
                pred ? absl::StrFormat("%.1f", 1000 * t.predicted().step_time_s()) : "-"),
        NumCell(pred ? t.predicted().peak_memory_bytes() : -1,
                pred ? Mib(t.predicted().peak_memory_bytes()) : "-"),
        NumCell(SecondsIntoJob(in.job, t),
                t.finished_at() > 0 ? Seconds(SecondsIntoJob(in.job, t)) : "-"),
        "<td class=\"mono\">", E(t.strategy().text()), "</td><td class=\"reason\">", E(note),
        "</td></tr>\n");
  }
  out += "</tbody></table>\n</section>\n";
  return out;
}

constexpr char kStyle[] = R"css(
:root { --fg: #1d2430; --muted: #5b6573; --line: #dde2e8; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
header { background: #1f2d3d; color: #fff; padding: 18px 32px; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header .sub { color: #c7d0db; margin-top: 4px; }
main { max-width: 1280px; margin: 0 auto; padding: 8px 24px 32px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 14px 20px; margin: 16px 0; }
h2 { font-size: 16px; margin: 0 0 10px; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; align-items: start; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 0 16px; }
.charts section { margin: 16px 0 0; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
.kv th { text-align: left; font-weight: normal; color: var(--muted); width: 34%;
  vertical-align: top; padding: 2px 8px 2px 0; }
.kv td { padding: 2px 0; word-break: break-word; }
.strategy, .mono { font-family: "DejaVu Sans Mono", ui-monospace, monospace; }
.strategy { font-size: 15px; background: #eef5ee; border: 1px solid #cfe5d3; padding: 8px 12px;
  border-radius: 6px; word-break: break-all; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; margin: 10px 0; }
.figure { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.figure .value { font-size: 20px; font-weight: 600; }
.figure .label { color: var(--muted); font-size: 12px; }
.caption { color: var(--muted); margin: 6px 0; }
.none { color: var(--muted); font-style: italic; }
svg.chart { width: 100%; height: auto; display: block; }
svg .grid { stroke: #eceff3; }
svg .axis { stroke: #6b7480; }
svg .tick { font-size: 11px; fill: var(--muted); }
svg .axis-label, svg .legend { font-size: 12px; fill: var(--fg); }
svg .diagonal { stroke: #9aa3ad; stroke-dasharray: 5 4; }
svg .marker { stroke-width: 2; stroke-dasharray: 6 3; }
svg .series-line { fill: none; stroke-width: 2.5; }
svg .offscale { font-size: 12px; }
svg .ring { fill: none; stroke-width: 2; }
svg .dot { stroke: #fff; stroke-width: 1; fill-opacity: 0.85; }
.dims { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: 12px 24px; }
.dim td, .dim th { padding: 2px 6px; border-bottom: 1px solid var(--line); text-align: left; }
.dim th { color: var(--muted); font-weight: normal; }
.barcol { width: 50%; }
.barline { display: flex; align-items: center; gap: 6px; }
.track { flex: 1 1 auto; min-width: 24px; }
.bar { background: #b9cde8; height: 14px; border-radius: 3px; }
.bar.top { background: #7fc796; }
.barlabel { flex: none; font-size: 12px; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.answer td.mono { font-weight: 600; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
#trial-table th, #trial-table td { padding: 3px 6px; border-bottom: 1px solid var(--line);
  text-align: left; vertical-align: top; }
#trial-table th { cursor: pointer; background: #f0f2f5; position: sticky; top: 0; }
#trial-table td.num { text-align: right; }
#trial-table td.mono { font-size: 12px; word-break: break-all; }
#trial-table td.reason { font-size: 12px; color: var(--muted); max-width: 320px;
  word-break: break-word; }
.st-SUCCEEDED { color: #1f7a40; } .st-OOM { color: #b3541e; } .st-FAILED, .st-TIMEOUT { color: #b02a2a; }
.st-CANCELLED, .st-other { color: var(--muted); }
pre { white-space: pre-wrap; word-break: break-all; background: #f6f7f9; padding: 8px; }
footer { color: var(--muted); font-size: 12px; text-align: center; margin: 12px 0 24px; }
@media (max-width: 900px) { .cols, .charts { grid-template-columns: 1fr; } }
)css";

// Sorts the trial table by a clicked header (numbers by data-sort), then
// marks the page as rendered. Reads only the DOM: no job data is in here.
constexpr char kScript[] = R"js(
(function () {
  var table = document.getElementById('trial-table');
  if (table) {
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) {
      (function (col) {
        var asc = false;
        heads[col].addEventListener('click', function () {
          asc = !asc;
          var body = table.tBodies[0];
          var rows = Array.prototype.slice.call(body.rows);
          rows.sort(function (a, b) {
            var x = a.cells[col], y = b.cells[col];
            var xs = x.getAttribute('data-sort'), ys = y.getAttribute('data-sort');
            var c = (xs !== null && ys !== null) ? parseFloat(xs) - parseFloat(ys)
                                                 : x.textContent.localeCompare(y.textContent);
            return asc ? c : -c;
          });
          rows.forEach(function (r) { body.appendChild(r); });
        });
      })(i);
    }
  }
  document.documentElement.setAttribute('data-report', 'rendered');
})();
)js";

}  // namespace

absl::string_view ReportStyle() { return kStyle; }

std::string ReportHtml(const ReportInput& in) {
  const v1::Job& j = in.job;
  const FigureInput figures{in.job, in.trials, in.device_memory};
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Nothing is loaded from anywhere: the page is whole on its own.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>autoaccel "
      "report: ",
      E(j.job_id()), "</title>\n<style>", kStyle,
      "</style>\n</head>\n<body>\n<header><h1>autoaccel "
      "job ",
      E(j.job_id()), "</h1><div class=\"sub\">",
      E(absl::StrFormat(
          "%s, sequence length %d, global batch %d, %d rank(s) on %s — %s",
          j.has_launcher()
              ? absl::StrCat("launcher ", j.launcher().name(),
                             j.request().model().family().empty()
                                 ? ""
                                 : absl::StrCat(" (", j.request().model().family(), " model)"))
              : absl::StrCat(j.request().model().family(), " model"),
          j.request().seq_len(), j.request().global_batch_size(),
          std::max(1, j.request().world_size()),
          j.request().device_type().empty() ? "cpu" : j.request().device_type(), j.state())),
      "</div></header>\n<main>\n", Answer(in), Settings(in), "<div class=\"charts\">\n",
      ThroughputMemorySection(figures), BestOverTimeSection(figures), "</div>\n",
      PredictedMeasuredSection(figures), Dimensions(in), Trials(in), "</main>\n<footer>",
      E(absl::StrCat("written by autoaccel report at ", Utc(in.generated_at))),
      "</footer>\n<script>", kScript, "</script>\n</body>\n</html>\n");
  return out;
}

}  // namespace autoaccel
