// The HTML job report (report/report_html.h) and the figures it plots
// (report/report_data.h), from canned jobs: no server.
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/report_data.h"
#include "report/report_html.h"
#include "report/svg_chart.h"
#include "spec/field_table.h"
#include "spec/strategy_fields.h"
#include "tests/report/report_fixture.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

using ::autoaccel::testing::FixtureOptions;
using ::autoaccel::testing::FixtureReport;
using ::autoaccel::testing::kHostile;

v1::Trial Measured(int index, double tokens_per_second, double mib, double finished_at) {
  v1::Trial t;
  t.set_index(index);
  t.set_status("SUCCEEDED");
  t.mutable_strategy()->set_text(absl::StrCat("s", index));
  t.mutable_metrics()->set_tokens_per_second(tokens_per_second);
  t.mutable_metrics()->set_peak_memory_bytes(static_cast<int64_t>(mib * 1024 * 1024));
  t.set_finished_at(finished_at);
  return t;
}

std::vector<int> Indices(const std::vector<ThroughputPoint>& points) {
  std::vector<int> out;
  for (const ThroughputPoint& p : points) out.push_back(p.trial_index);
  return out;
}

TEST(ReportData, ParetoFrontKeepsTheTrialsNothingBeatsOnBothAxesByMemory) {
  std::vector<v1::Trial> trials = {
      Measured(0, 100, 50, 1),   // front: least memory
      Measured(1, 90, 60, 2),    // beaten by 0 on both
      Measured(2, 300, 200, 3),  // front
      Measured(3, 200, 100, 4),  // front
      Measured(4, 250, 250, 5),  // beaten by 2
  };
  v1::Trial oom;
  oom.set_status("OOM");
  trials.push_back(oom);
  EXPECT_THAT(Indices(MeasuredPoints(trials)), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(Indices(ParetoFront(MeasuredPoints(trials))), ElementsAre(0, 3, 2));
}

TEST(ReportData, BestSoFarStepsOnlyWhenATrialBeatsTheBestByFinishTimeFromTheJobsStart) {
  v1::Job job;
  job.set_created_at(990);
  job.set_started_at(1000);
  // Proposal order differs from finish order.
  std::vector<v1::Trial> trials = {Measured(0, 100, 1, 1030), Measured(1, 50, 1, 1010),
                                   Measured(2, 80, 1, 1040), Measured(3, 400, 1, 1050)};
  std::vector<BestSoFarPoint> best = BestSoFar(job, trials);
  ASSERT_THAT(best, SizeIs(3));
  EXPECT_EQ(best[0].trial_index, 1);
  EXPECT_DOUBLE_EQ(best[0].seconds, 10);
  EXPECT_EQ(best[1].trial_index, 0);
  EXPECT_EQ(best[2].trial_index, 3);
  EXPECT_DOUBLE_EQ(best[2].seconds, 50);
}

// A job whose standings rank strategy "s1" (measured 3 times, 300 on
// average) the answer, while trial 2 measured "s2" once at 500.
v1::Job JobWithStandings() {
  v1::Job job;
  job.set_started_at(1000);
  v1::StrategyStanding* a = job.add_standings();
  a->set_strategy_text("s1");
  a->set_figure(300);
  a->set_measurements(3);
  for (int i : {1, 3, 4}) a->add_trial_indices(i);
  a->set_answer(true);
  v1::StrategyStanding* b = job.add_standings();
  b->set_strategy_text("s0");
  b->set_figure(100);
  b->set_measurements(1);
  b->add_trial_indices(0);
  job.set_best_figure(300);
  return job;
}

std::vector<v1::Trial> TrialsOfStandings() {
  std::vector<v1::Trial> trials = {Measured(0, 100, 1, 1010), Measured(1, 400, 1, 1020),
                                   Measured(2, 500, 1, 1030), Measured(3, 250, 1, 1040),
                                   Measured(4, 250, 1, 1050)};
  for (int i : {3, 4}) trials[i].mutable_strategy()->set_text("s1");
  trials[2].mutable_metrics()->set_noisy(true);  // so it has no standing
  return trials;
}

TEST(ReportData, BestSoFarFollowsTheStandingsFiguresNotSingleMeasurements) {
  const v1::Job job = JobWithStandings();
  const std::vector<v1::Trial> trials = TrialsOfStandings();
  std::vector<BestSoFarPoint> best = BestSoFar(job, trials);
  ASSERT_THAT(best, SizeIs(2));
  EXPECT_EQ(best[0].trial_index, 0);
  EXPECT_DOUBLE_EQ(best[0].tokens_per_second, 100);
  // s1 enters when its first measurement finished, at its mean, not 400;
  // the single 500 of trial 2 never counts.
  EXPECT_EQ(best[1].trial_index, 1);
  EXPECT_DOUBLE_EQ(best[1].seconds, 20);
  EXPECT_DOUBLE_EQ(best[1].tokens_per_second, 300);
  const v1::Trial* faster = FasterUnconfirmed(job, trials);
  ASSERT_NE(faster, nullptr);
  EXPECT_EQ(faster->index(), 2);
  EXPECT_EQ(AnswerStanding(job)->strategy_text(), "s1");
  EXPECT_EQ(StandingsByTrial(job).at(4)->strategy_text(), "s1");
  EXPECT_EQ(StandingsByTrial(job).count(2), 0u);
}

TEST(ReportHtml, TheBestOverTimeCaptionNamesTheAnswersTrialAndTheFasterMeasurementItDidNotTake) {
  ReportInput in;
  in.job = JobWithStandings();
  in.job.set_job_id("job-standings");
  *in.job.mutable_best() = TrialsOfStandings()[3];
  in.trials = TrialsOfStandings();
  const std::string html = ReportHtml(in);
  EXPECT_THAT(html, HasSubstr("The answer, 300 tokens/s (the mean of 3 measurements), was found "
                              "20.0 s into the job, by trial #1."));
  EXPECT_THAT(html, HasSubstr("A faster single measurement, trial #2 at 500 tokens/s, was not "
                              "taken: not eligible as an answer (a noisy measurement)."));
  // The trial table gives each trial its strategy's figure.
  EXPECT_THAT(html, HasSubstr(">300 (0-0, 3x) answer</td>"));
  EXPECT_THAT(html, HasSubstr(">100 (once)</td>"));
}

TEST(ReportData, EveryStrategyDimensionHasAnEffectEntryWithEachValueTried) {
  const ReportInput in = FixtureReport();
  const std::vector<DimensionEffect> effects = DimensionEffects(in.job, in.trials);
  std::vector<std::string> names;
  ForEachRow(kStrategyFields, [&](const auto& field) { names.emplace_back(field.name); });
  std::vector<std::string> got;
  for (const DimensionEffect& d : effects) got.push_back(d.dimension);
  EXPECT_EQ(got, names);
  for (const DimensionEffect& d : effects) {
    if (d.dimension == "precision") {
      // In the enum's order; the fixture's fp32 + mbs 8 + no checkpointing ran
      // out of memory; pure_bf16 at mbs 8 is the fastest (13000 tokens/s).
      ASSERT_THAT(d.values, SizeIs(3));
      EXPECT_EQ(d.values[0].value, "fp32");
      EXPECT_EQ(d.values[0].trials, 4);
      EXPECT_EQ(d.values[0].out_of_memory, 1);
      EXPECT_EQ(d.values[0].succeeded, 3);
      EXPECT_EQ(d.values[1].value, "bf16");
      EXPECT_EQ(d.values[2].value, "pure_bf16");
      // The repeat of the best is not counted a second time.
      EXPECT_EQ(d.values[2].trials, 4);
      EXPECT_DOUBLE_EQ(d.values[2].best_tokens_per_second, 13000);
      // The answer's value is the one marked.
      EXPECT_FALSE(d.values[0].answer);
      EXPECT_FALSE(d.values[1].answer);
      EXPECT_TRUE(d.values[2].answer);
    }
    if (d.dimension == "micro_batch_size") {
      ASSERT_THAT(d.values, SizeIs(2));
      EXPECT_EQ(d.values[0].value, "2");  // numbers ascending
      EXPECT_EQ(d.values[1].value, "8");
    }
    if (d.dimension == "data_parallel") {
      ASSERT_THAT(d.values, SizeIs(1));
      EXPECT_EQ(d.values[0].value, "1");
    }
  }
}

TEST(ReportData, DeviceMemoryIsTheSmallestDeviceOfTheJobsTypeOnTheWorkersThatRanIt) {
  v1::ListWorkersResponse workers;
  v1::Worker* w1 = workers.add_workers();
  w1->set_worker_id("w1");
  auto add = [](v1::Worker* w, const std::string& type, int index, int64_t bytes) {
    v1::Device* d = w->add_devices();
    d->set_type(type);
    d->set_index(index);
    d->set_memory_bytes(bytes);
  };
  add(w1, "cuda", 0, 80LL << 30);
  add(w1, "cuda", 1, 40LL << 30);
  add(w1, "cpu", 0, 8LL << 30);
  v1::Worker* idle = workers.add_workers();
  idle->set_worker_id("idle");
  add(idle, "cuda", 0, 16LL << 30);  // never ran the job
  std::vector<v1::Trial> trials(1);
  trials[0].add_worker_ids("w1");

  DeviceMemory m = JobDeviceMemory(workers, trials, "cuda");
  EXPECT_EQ(m.bytes, 40LL << 30);
  EXPECT_THAT(m.note, HasSubstr("w1 cuda:1"));

  trials[0].set_worker_ids(0, "gone");
  m = JobDeviceMemory(workers, trials, "cuda");
  EXPECT_EQ(m.bytes, 0);
  EXPECT_THAT(m.note, HasSubstr("none of the workers that ran this job's trials (gone)"));
}

TEST(ReportHtml, HasEverySectionAndNoMarkupFromTheJob) {
  const std::string html = ReportHtml(FixtureReport());
  for (const char* id : {"settings", "answer", "throughput-memory", "best-over-time",
                         "predicted-measured", "dimensions", "trials"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<section id=\"", id, "\">"))) << id;
  }
  // The hostile text appears only escaped: no element of it, and the page's
  // one script is its own.
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_THAT(html, Not(HasSubstr("onerror=\"")));
  EXPECT_THAT(html, HasSubstr(HtmlEscape(kHostile)));
  const std::regex script("<script");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(html.begin(), html.end(), script), std::sregex_iterator()),
      1);
  // Nothing to fetch from anywhere.
  EXPECT_THAT(html, Not(HasSubstr("src=\"")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, HasSubstr("Content-Security-Policy"));
}

TEST(ReportHtml, ShowsTheAnswerAndEveryTrialThatRan) {
  const ReportInput in = FixtureReport();
  const std::string html = ReportHtml(in);
  EXPECT_THAT(html, HasSubstr(absl::StrCat("<p class=\"strategy\">",
                                           HtmlEscape(in.job.best().strategy().text()), "</p>")));
  EXPECT_THAT(html, HasSubstr("Measured 2 times; the measurements spread 2.0%"));
  // How sure the job is: a tie, naming the other strategy, with the interval.
  EXPECT_THAT(html, HasSubstr("A tie within the measurements&#39; uncertainty with mbs=8,ga=1"));
  EXPECT_THAT(html, HasSubstr("13000 tokens/s on average, 95% interval 12800-13200"));
  for (const v1::Trial& t : in.trials) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("data-sort=\"", t.index(), "\">", t.index(), "<")))
        << t.index();
  }
  // The confirmation names the trial it repeats by its number.
  EXPECT_THAT(html, HasSubstr("<td class=\"reason\">repeat of #10</td>"));
}

// `report --tokens 1T --price-per-gpu-hour 2.5`: the answer says the days
// and cost to train at the job's world size, from the answer's measured
// figure, the ends from its 95% interval; without a price, the days only.
TEST(ReportHtml, TheAnswerSaysTheTimeAndCostToTrainAtTheJobsWorldSizeWhenAsked) {
  ReportInput in = FixtureReport();
  EXPECT_THAT(ReportHtml(in), Not(HasSubstr("id=\"training\"")));
  in.job.mutable_request()->set_world_size(8);
  in.tokens = 1000000000000;
  in.price_per_gpu_hour = 2.5;
  // 1e12 / 13000 tokens/s = 890.3 days; x 24 x 2.5 x 8 = $427,350; the
  // interval 12800-13200 tokens/s gives 876.8-904.2 days.
  const std::string html = ReportHtml(in);
  EXPECT_THAT(html, HasSubstr("To train 1e+12 tokens on this job&#39;s 8 devices at the "
                              "answer&#39;s 13000 tokens/s: 890.3 days (876.8-904.2 by the 95% "
                              "interval), $427,350 at $2.50 per GPU-hour ($420,875-$434,028)."));
  in.price_per_gpu_hour = 0;
  EXPECT_THAT(ReportHtml(in), HasSubstr("890.3 days (876.8-904.2 by the 95% interval)."));
  EXPECT_THAT(ReportHtml(in), Not(HasSubstr("per GPU-hour")));
}

TEST(ReportHtml, PredictionsArePlottedWithTheirMedianErrorOrTheAbsenceIsSaid) {
  // The fixture predicts 1.2x the step time and 0.9x the memory.
  std::string html = ReportHtml(FixtureReport());
  EXPECT_THAT(html, HasSubstr("Median error of the predicted step time: 20% over 11 trial(s)"));
  EXPECT_THAT(html, HasSubstr("Median error of the predicted peak memory: 10% over 11 trial(s)"));
  EXPECT_THAT(html, Not(HasSubstr("recorded no predictions")));

  FixtureOptions none;
  none.predictions = false;
  html = ReportHtml(FixtureReport(none));
  EXPECT_THAT(html, HasSubstr("This job recorded no predictions"));
  EXPECT_THAT(html, Not(HasSubstr("Median error")));
}

TEST(ReportHtml, DeviceMemoryLineIsDrawnWhenKnownAndItsAbsenceExplainedWhenNot) {
  std::string html = ReportHtml(FixtureReport());
  EXPECT_THAT(html, HasSubstr("<line class=\"marker\""));
  EXPECT_THAT(html, HasSubstr("device memory 1.00 GiB"));

  // Far to the right of every trial (a CPU device's share of host memory),
  // the line would squeeze the points against the axis: a note instead.
  ReportInput far = FixtureReport();
  far.device_memory.bytes = int64_t{64} << 30;
  html = ReportHtml(far);
  EXPECT_THAT(html, Not(HasSubstr("<line class=\"marker\"")));
  EXPECT_THAT(html, HasSubstr("device memory 64.00 GiB: off the scale"));

  FixtureOptions unknown;
  unknown.device_memory = false;
  html = ReportHtml(FixtureReport(unknown));
  EXPECT_THAT(html, Not(HasSubstr("<line class=\"marker\"")));
  EXPECT_THAT(html,
              HasSubstr("No device-memory line: no worker that ran this job is registered now."));
}

TEST(ReportHtml, AJobWithNoTrialsSaysItHasNoAnswer) {
  ReportInput in;
  in.job.set_job_id("job-empty");
  in.job.set_state("FAILED");
  in.device_memory.note = "no trial of this job ran on a worker, so no device is known";
  const std::string html = ReportHtml(in);
  EXPECT_THAT(html, HasSubstr("No trial succeeded: this job has no answer."));
  EXPECT_THAT(html, HasSubstr("This job recorded no predictions"));
  EXPECT_THAT(html, HasSubstr("</html>"));
}

TEST(SvgChart, EscapesItsTextAndKeepsEveryPointInsideThePlot) {
  Chart chart;
  chart.title = "<t>";
  chart.x_label = "x & y";
  chart.series.push_back({"a\"b", "#123456", ChartSeries::Style::kDots, {{10, 20, "<p>"}}});
  const std::string svg = SvgChart(chart);
  EXPECT_THAT(svg, HasSubstr("aria-label=\"&lt;t&gt;\""));
  EXPECT_THAT(svg, HasSubstr("x &amp; y"));
  EXPECT_THAT(svg, HasSubstr("a&quot;b"));
  EXPECT_THAT(svg, HasSubstr("<title>&lt;p&gt;</title>"));
  // Axes round up to whole ticks: 10 on the x axis of 0..10, 20 on y.
  EXPECT_THAT(svg, HasSubstr(">10</text>"));
  EXPECT_THAT(svg, HasSubstr(">20</text>"));
  std::smatch m;
  const std::regex circle("cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
  ASSERT_TRUE(std::regex_search(svg, m, circle));
  EXPECT_GE(std::stod(m[1]), 0);
  EXPECT_LE(std::stod(m[1]), chart.width);
  EXPECT_GE(std::stod(m[2]), 0);
  EXPECT_LE(std::stod(m[2]), chart.height);
}

TEST(HtmlEscape, ReplacesEveryCharacterThatCanEndTextOrAnAttribute) {
  EXPECT_EQ(HtmlEscape("<a href='x'>\"&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;");
}

}  // namespace
}  // namespace autoaccel
