#include "report/report_figures.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/convert.h"
#include "report/svg_chart.h"

namespace autoaccel {
namespace {

// The figures' palette (never from the job).
constexpr char kBlue[] = "#3b6fb6";
constexpr char kOrange[] = "#e07b1f";
constexpr char kGreen[] = "#2e9e55";
constexpr char kRed[] = "#c23b3b";
constexpr char kGrey[] = "#9aa3ad";

std::string Mib(double bytes) { return absl::StrFormat("%.1f", bytes / (1024.0 * 1024.0)); }
std::string Gib(double bytes) {
  return absl::StrFormat("%.2f", bytes / (1024.0 * 1024.0 * 1024.0));
}
std::string E(absl::string_view text) { return HtmlEscape(text); }

// Which trial found the answer and when, by the same figures as the
// answer; and the faster single measurement it did not take, if any.
std::string BestOverTimeCaption(const FigureInput& in, const std::vector<BestSoFarPoint>& steps) {
  if (steps.empty()) return "No trial succeeded.";
  const v1::StrategyStanding* answer = AnswerStanding(in.job);
  if (answer == nullptr || answer->trial_indices().empty()) {
    return absl::StrFormat(
        "The best was found %.1f s into the job, by trial #%d; it improved "
        "%d time(s).",
        steps.back().seconds, steps.back().trial_index, static_cast<int>(steps.size()) - 1);
  }
  const int found_by = answer->trial_indices(0);
  double found_at = 0;
  for (const v1::Trial& t : in.trials) {
    if (t.index() == found_by) found_at = SecondsIntoJob(in.job, t);
  }
  std::string out = absl::StrFormat(
      "The answer, %.0f tokens/s (%s), was found %.1f s into the job, by trial #%d.",
      answer->figure(),
      answer->measurements() > 1
          ? absl::StrFormat("the mean of %d measurements", answer->measurements())
          : std::string("measured once"),
      found_at, found_by);
  const auto& tie = in.job.best_tied_with();
  if (steps.back().trial_index != found_by &&
      std::find(tie.begin(), tie.end(), steps.back().strategy) != tie.end()) {
    absl::StrAppend(&out,
                    absl::StrFormat(" Trial #%d's strategy has the higher figure, %.0f "
                                    "tokens/s, but ties with the answer, the simpler.",
                                    steps.back().trial_index, steps.back().tokens_per_second));
  }
  if (const v1::Trial* faster = FasterUnconfirmed(in.job, in.trials)) {
    const std::map<int, const v1::StrategyStanding*> standing_of = StandingsByTrial(in.job);
    auto it = standing_of.find(faster->index());
    std::string why = "measured once, not confirmed";
    if (it == standing_of.end()) {
      why = "not eligible as an answer (a noisy measurement)";
    } else if (it->second->measurements() > 1) {
      why = absl::StrFormat("its strategy's %d measurements average %.0f tokens/s",
                            it->second->measurements(), it->second->figure());
    }
    absl::StrAppend(&out,
                    absl::StrFormat(" A faster single measurement, trial #%d at %.0f tokens/s, "
                                    "was not taken: %s.",
                                    faster->index(), faster->metrics().tokens_per_second(), why));
  }
  return out;
}

}  // namespace

std::string ThroughputMemorySection(const FigureInput& in) {
  const std::vector<ThroughputPoint> points = MeasuredPoints(in.trials);
  const std::vector<ThroughputPoint> front = ParetoFront(points);
  Chart chart;
  chart.title = "tokens per second against peak memory per trial";
  chart.x_label = "peak memory per device (MiB)";
  chart.y_label = "tokens/s";
  auto to_point = [](const ThroughputPoint& p) {
    return ChartPoint{p.peak_memory_bytes / (1024.0 * 1024.0), p.tokens_per_second,
                      absl::StrFormat("#%d %s: %.0f tokens/s, %s MiB", p.trial_index, p.strategy,
                                      p.tokens_per_second, Mib(p.peak_memory_bytes))};
  };
  ChartSeries all{"trial", kBlue, ChartSeries::Style::kDots, {}};
  for (const ThroughputPoint& p : points) all.points.push_back(to_point(p));
  ChartSeries pareto{"Pareto front", kOrange, ChartSeries::Style::kStep, {}};
  for (const ThroughputPoint& p : front) pareto.points.push_back(to_point(p));
  chart.series = {all, pareto};
  if (in.job.has_best() && in.job.best().metrics().tokens_per_second() > 0) {
    // At the answer's figure (the mean of its measurements), as the answer
    // states it; a job without standings at its trial's measurement.
    const v1::Trial& b = in.job.best();
    const v1::StrategyStanding* a = AnswerStanding(in.job);
    ChartPoint point =
        to_point({static_cast<double>(a != nullptr ? a->peak_memory_bytes()
                                                   : b.metrics().peak_memory_bytes()),
                  a != nullptr ? a->figure() : b.metrics().tokens_per_second(), b.index(),
                  b.strategy().text()});
    if (a != nullptr && a->measurements() > 1) {
      point.tooltip += absl::StrFormat(" (the answer: mean of %d measurements)", a->measurements());
    }
    chart.series.push_back(ChartSeries{"answer", kGreen, ChartSeries::Style::kDots, {point}});
  }
  std::string note;
  chart.marker_stretch_limit = 4;
  if (in.device_memory.bytes > 0) {
    chart.vertical_lines.push_back(
        {in.device_memory.bytes / (1024.0 * 1024.0),
         absl::StrCat("device memory ", Gib(in.device_memory.bytes), " GiB"), kRed});
    double most = 0;
    for (const ThroughputPoint& p : points) most = std::max(most, p.peak_memory_bytes);
    const bool off_scale = most > 0 && in.device_memory.bytes > chart.marker_stretch_limit * most;
    note = absl::StrCat(off_scale ? "The device memory, " : "The red line is the device memory, ",
                        Mib(in.device_memory.bytes), " MiB (", in.device_memory.note, ")",
                        off_scale ? ", lies far right of every trial: the chart names it instead "
                                    "of drawing it to scale."
                                  : ".");
  } else {
    note = absl::StrCat("No device-memory line: ", in.device_memory.note, ".");
  }
  int oom = 0, failed = 0;
  for (const v1::Trial& t : in.trials) {
    const std::optional<TrialStatus> status = TrialStatusOf(t);
    if (status == TrialStatus::kOom) ++oom;
    if (status == TrialStatus::kFailed || status == TrialStatus::kTimeout) ++failed;
  }
  std::string out = absl::StrCat(
      "<section id=\"throughput-memory\"><h2>Throughput against peak memory</h2>\n",
      SvgChart(chart), "<p class=\"caption\">",
      E(absl::StrFormat("%d measured trial(s); %zu on the Pareto front (no other trial is "
                        "faster with less memory). ",
                        static_cast<int>(points.size()), front.size())),
      E(note));
  if (oom + failed > 0) {
    absl::StrAppend(
        &out, " ",
        E(absl::StrFormat("Not plotted: %d out of memory, %d failed or timed out.", oom, failed)));
  }
  out += "</p>\n</section>\n";
  return out;
}

std::string BestOverTimeSection(const FigureInput& in) {
  Chart chart;
  chart.title = "best tokens per second found over the job's time";
  chart.x_label = "seconds into the job";
  chart.y_label = "tokens/s";
  ChartSeries each{"trial", kGrey, ChartSeries::Style::kDots, {}};
  for (const v1::Trial& t : in.trials) {
    if (TrialStatusOf(t) != TrialStatus::kSucceeded || t.metrics().tokens_per_second() <= 0)
      continue;
    each.points.push_back({SecondsIntoJob(in.job, t), t.metrics().tokens_per_second(),
                           absl::StrFormat("#%d %s: %.0f tokens/s", t.index(), t.strategy().text(),
                                           t.metrics().tokens_per_second())});
  }
  ChartSeries best{"best strategy so far", kGreen, ChartSeries::Style::kStep, {}};
  best.extend_to_right = true;
  const std::vector<BestSoFarPoint> steps = BestSoFar(in.job, in.trials);
  for (const BestSoFarPoint& p : steps) {
    best.points.push_back({p.seconds, p.tokens_per_second,
                           absl::StrFormat("%.1f s: #%d %s, %.0f tokens/s", p.seconds,
                                           p.trial_index, p.strategy, p.tokens_per_second)});
  }
  chart.series = {each, best};
  return absl::StrCat("<section id=\"best-over-time\"><h2>Best so far over time</h2>\n",
                      SvgChart(chart), "<p class=\"caption\">", E(BestOverTimeCaption(in, steps)),
                      "</p>\n</section>\n");
}

std::string PredictedMeasuredSection(const FigureInput& in) {
  std::string out = "<section id=\"predicted-measured\"><h2>Predicted against measured</h2>\n";
  const std::vector<PredictedMeasured> pairs = PredictionPairs(in.trials);
  if (pairs.empty()) {
    absl::StrAppend(&out,
                    "<p class=\"none\">This job recorded no predictions: none of its measured "
                    "trials carries the cost model's figures, so there is nothing to compare."
                    "</p>\n</section>\n");
    return out;
  }
  Chart step;
  step.title = "predicted against measured step time";
  step.x_label = "measured step time (ms)";
  step.y_label = "predicted step time (ms)";
  step.diagonal = true;
  Chart memory;
  memory.title = "predicted against measured peak memory";
  memory.x_label = "measured peak memory (MiB)";
  memory.y_label = "predicted peak memory (MiB)";
  memory.diagonal = true;
  ChartSeries steps{"trial", kBlue, ChartSeries::Style::kDots, {}};
  ChartSeries mems{"trial", kOrange, ChartSeries::Style::kDots, {}};
  for (const PredictedMeasured& p : pairs) {
    if (p.predicted_step_s > 0 && p.measured_step_s > 0) {
      steps.points.push_back(
          {1000 * p.measured_step_s, 1000 * p.predicted_step_s,
           absl::StrFormat("#%d %s: measured %.1f ms, predicted %.1f ms", p.trial_index, p.strategy,
                           1000 * p.measured_step_s, 1000 * p.predicted_step_s)});
    }
    if (p.predicted_peak_bytes > 0 && p.measured_peak_bytes > 0) {
      mems.points.push_back(
          {p.measured_peak_bytes / (1024.0 * 1024.0), p.predicted_peak_bytes / (1024.0 * 1024.0),
           absl::StrFormat("#%d %s: measured %s MiB, predicted %s MiB", p.trial_index, p.strategy,
                           Mib(p.measured_peak_bytes), Mib(p.predicted_peak_bytes))});
    }
  }
  step.series = {steps};
  memory.series = {mems};
  absl::StrAppend(
      &out, "<div class=\"cols\"><div>", SvgChart(step), "<p class=\"caption\">",
      E(absl::StrFormat("Median error of the predicted step time: %.0f%% over %zu trial(s).",
                        100 * MedianRelativeError(pairs, true), steps.points.size())),
      "</p></div><div>", SvgChart(memory), "<p class=\"caption\">",
      E(absl::StrFormat("Median error of the predicted peak memory: %.0f%% over %zu trial(s).",
                        100 * MedianRelativeError(pairs, false), mems.points.size())),
      "</p></div></div>\n<p class=\"caption\">On the dashed line the prediction was exact; "
      "above it, the model predicted more than was measured.</p>\n</section>\n");
  return out;
}

}  // namespace autoaccel
