// A canned job for the HTML report's tests: twelve trials over precision,
// checkpointing and micro-batch size with synthetic figures (OOM and FAILED
// trials among them), and hostile text in every string a job can carry, so
// a test can show that it stays inert. Not a measurement of anything.
#ifndef AUTOACCEL_TESTS_REPORT_REPORT_FIXTURE_H_
#define AUTOACCEL_TESTS_REPORT_REPORT_FIXTURE_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/convert.h"
#include "report/report_html.h"
#include "spec/strategy.h"

namespace autoaccel::testing {

// Markup that would run script or load an image if it were not escaped.
inline constexpr char kHostile[] =
    "</script><img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'"
    "</script>";

struct FixtureOptions {
  bool predictions = true;    // trials carry the cost model's figures
  bool device_memory = true;  // the devices' memory is known
};

inline ReportInput FixtureReport(const FixtureOptions& options = {}) {
  ReportInput in;
  v1::Job& job = in.job;
  job.set_job_id("job-20260101-000000-fixture");
  job.set_state("SUCCEEDED");
  job.set_status_message(absl::StrCat("finished; ", kHostile));
  job.set_algorithm(absl::StrCat("auto: exhaustive ", kHostile));
  job.set_signature("gpt2/fixture");
  job.set_created_at(1767225600);
  job.set_started_at(1767225601);
  job.set_finished_at(1767225700);
  job.set_elapsed_seconds(100);
  v1::TuneRequest& r = *job.mutable_request();
  r.mutable_model()->set_family("gpt2");
  r.mutable_model()->set_config_json(
      absl::StrCat("{\"model_type\": \"gpt2\", \"note\": \"", kHostile, "\"}"));
  r.mutable_model()->add_overrides(absl::StrCat("n_layer=2", kHostile));
  r.set_seq_len(128);
  r.set_global_batch_size(8);
  r.set_world_size(1);
  r.set_device_type("cpu");
  r.set_time_limit_seconds(120);
  for (const char* p : {"bf16", "fp32", "pure_bf16"}) r.add_precisions(p);
  job.set_trials_total(12);
  job.set_trials_done(13);
  job.set_trials_pruned(1);
  v1::PrunedSummary* pruned = job.add_pruned_summary();
  pruned->set_kind("predicted not to fit");
  pruned->set_count(1);
  pruned->mutable_example()->set_reason(kHostile);

  const Precision precisions[] = {Precision::kBf16, Precision::kFp32, Precision::kPureBf16};
  const Checkpointing checkpoints[] = {Checkpointing::kNone, Checkpointing::kFull};
  int index = 0;
  for (int mbs : {2, 8}) {
    for (Precision p : precisions) {
      for (Checkpointing c : checkpoints) {
        Strategy s;
        s.micro_batch_size = mbs;
        s.grad_accum_steps = 8 / mbs;
        s.precision = p;
        s.checkpointing = c;
        s.attention = Attention::kSdpa;
        v1::Trial& t = in.trials.emplace_back();
        t.set_trial_id(absl::StrCat(job.job_id(), "-t", index));
        t.set_job_id(job.job_id());
        t.set_index(index);
        *t.mutable_strategy() = ToProto(s);
        t.add_worker_ids("worker-1");
        t.set_started_at(job.started_at() + 8 * index);
        t.set_finished_at(job.started_at() + 8 * index + 7);
        // Synthetic figures: bf16 fastest, checkpointing slower but lighter,
        // a bigger micro-batch faster but heavier.
        const double speed = (p == Precision::kFp32   ? 6000
                              : p == Precision::kBf16 ? 9000
                                                      : 10000) *
                             (c == Checkpointing::kFull ? 0.75 : 1.0) * (mbs == 8 ? 1.3 : 1.0);
        const double mib = (p == Precision::kFp32 ? 300 : 220) *
                           (c == Checkpointing::kFull ? 0.6 : 1.0) * (mbs == 8 ? 2.0 : 1.0);
        if (mbs == 8 && p == Precision::kFp32 && c == Checkpointing::kNone) {
          t.set_status("OOM");
          t.set_reason("out of memory: tried to allocate 64 MiB");
        } else if (index == 5) {
          t.set_status("FAILED");
          t.set_reason(absl::StrCat("runner exited: ", kHostile));
        } else {
          t.set_status("SUCCEEDED");
          v1::TrialMetrics& m = *t.mutable_metrics();
          m.set_tokens_per_second(speed);
          m.set_step_time_median_s(10240 / speed);
          m.set_peak_memory_bytes(static_cast<int64_t>(mib * 1024 * 1024));
          m.set_mfu(speed / 20000);
          m.set_final_loss(7.5);
        }
        if (options.predictions) {
          v1::Prediction& pr = *t.mutable_predicted();
          pr.set_step_time_s(1.2 * 10240 / speed);
          pr.set_peak_memory_bytes(static_cast<int64_t>(0.9 * mib * 1024 * 1024));
          pr.set_tokens_per_second(speed / 1.2);
        }
        ++index;
      }
    }
  }
  // The best, measured again as a confirmation.
  v1::Trial repeat = in.trials[10];
  repeat.set_trial_id(absl::StrCat(job.job_id(), "-t", index));
  repeat.set_index(index);
  repeat.set_confirms(in.trials[10].trial_id());
  repeat.set_started_at(job.started_at() + 8 * index);
  repeat.set_finished_at(job.started_at() + 8 * index + 7);
  in.trials.push_back(repeat);
  *job.mutable_best() = repeat;
  job.set_best_confirmed(true);
  job.set_best_measurements(2);
  job.set_best_spread(0.02);
  job.set_best_certainty("tie");
  job.set_best_figure(13000);
  job.set_best_interval_low(12800);
  job.set_best_interval_high(13200);
  job.add_best_tied_with(
      "mbs=8,ga=1,precision=bf16,checkpoint=none,attention=sdpa,"
      "optimizer=adamw,offload=none");
  // The standings as the coordinator sends them: each measured strategy
  // once (the answer with its repeat), fastest figure first.
  std::vector<const v1::Trial*> measured;
  for (const v1::Trial& t : in.trials) {
    if (t.status() == "SUCCEEDED" && t.confirms().empty()) measured.push_back(&t);
  }
  std::stable_sort(measured.begin(), measured.end(), [](const v1::Trial* a, const v1::Trial* b) {
    return a->metrics().tokens_per_second() > b->metrics().tokens_per_second();
  });
  for (const v1::Trial* t : measured) {
    v1::StrategyStanding& st = *job.add_standings();
    st.set_strategy_text(t->strategy().text());
    st.set_figure(t->metrics().tokens_per_second());
    st.set_peak_memory_bytes(t->metrics().peak_memory_bytes());
    st.add_trial_indices(t->index());
    st.set_measurements(1);
    if (t->index() == 10) {
      st.add_trial_indices(repeat.index());
      st.set_measurements(2);
      st.set_agrees(true);
      st.set_spread(0.02);
      st.set_interval_low(12800);
      st.set_interval_high(13200);
      st.set_answer(true);
    } else {
      st.set_interval_low(0.95 * st.figure());
      st.set_interval_high(1.05 * st.figure());
    }
  }
  if (options.device_memory) {
    in.device_memory = {int64_t{1} << 30, "the smallest memory of the cpu devices that ran it"};
  } else {
    in.device_memory = {0, "no worker that ran this job is registered now"};
  }
  in.generated_at = 1767225800;
  return in;
}

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_REPORT_REPORT_FIXTURE_H_
