// Calibrates the cost model's cuda step-time priors against published
// training runs (bench/tables/gpu_published.csv; bench/calibration.h) and
// prints, for the shipped priors ("shipped": search/step_time.cc as built)
// and their refit on the table's training rows ("refit"):
// every row's measured and predicted step time and memory, the median and
// 90th-percentile relative step-time error on the held-out, training and all
// rows, on the held-out rows of each source and each device, the Spearman
// rank correlation within each group with a real spread, the peak-memory
// error over the rows that state a measured peak, and the rows the cost model
// predicts not to fit (strictly, and beyond the tuner's pruning margin). Then the fitted scales and
// the cuda constants they give, to put into search/step_time.cc.
//
//   build/bin/calibrate_priors [--table PATH] [--rows]
//
// Exit codes: 0 done, 2 the table does not parse (the message names the line
// and column).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/calibration.h"

namespace autoaccel::bench {
namespace {

int Run(int argc, char** argv) {
  std::string path = std::string(AUTOACCEL_SOURCE_DIR) + "/bench/tables/gpu_published.csv";
  bool print_rows = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--table" && i + 1 < argc) {
      path = argv[++i];
    } else if (arg == "--rows") {
      print_rows = true;
    } else {
      std::fprintf(stderr, "usage: calibrate_priors [--table PATH] [--rows]\n");
      return 2;
    }
  }
  absl::StatusOr<std::vector<PublishedRun>> loaded = LoadPublishedRuns(path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "calibrate_priors: %s\n", std::string(loaded.status().message()).c_str());
    return 2;
  }
  const std::vector<PublishedRun>& runs = *loaded;
  const Split split = SplitRuns(runs);
  const PriorScales fitted = FitScales(runs, split.train);
  const PriorScales reference = ReferenceScales();
  std::vector<int> all(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) all[i] = static_cast<int>(i);

  std::printf("table %s: %zu rows, %zu train, %zu held out (alternate rows within each group)\n",
              path.c_str(), runs.size(), split.train.size(), split.held_out.size());
  std::vector<bool> held(runs.size(), false);
  for (int i : split.held_out) held[i] = true;
  std::vector<MemoryVerdict> memory;
  for (const PublishedRun& run : runs) memory.push_back(PredictMemory(run));
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (print_rows) {
    std::printf("\n%3s %-42s %-5s %9s %9s %9s %8s %8s %8s %s\n", "id", "group", "split", "measured",
                "shipped", "refit", "mem GiB", "pred GiB", "dev GiB", "fit");
    for (size_t i = 0; i < runs.size(); ++i) {
      const MemoryVerdict& m = memory[i];
      std::printf("%3d %-42s %-5s %9.3f %9.3f %9.3f %8s %8.1f %8.1f %s\n", runs[i].id,
                  runs[i].group.c_str(), held[i] ? "held" : "train", runs[i].step_time_s,
                  PredictRun(runs[i], kUnitScales), PredictRun(runs[i], fitted),
                  runs[i].measured_peak_memory_gib > 0
                      ? absl::StrFormat("%.1f", runs[i].measured_peak_memory_gib).c_str()
                      : "-",
                  m.predicted_bytes / kGiB, m.device_bytes / kGiB,
                  m.fits ? "yes" : (m.kept_by_tuner ? "no (within margin)" : "no (pruned)"));
      if (!m.fits || runs[i].measured_peak_memory_gib > 0) {
        const MemoryEstimate& e = m.estimate;
        std::printf(
            "    GiB: parameters %.1f, gradients %.1f, optimizer %.1f, gathered %.1f, "
            "activations %.1f, logits %.1f, fp8 weights %.1f, overhead %.1f\n",
            e.parameters / kGiB, e.gradients / kGiB, e.optimizer / kGiB, e.gathered / kGiB,
            e.activations / kGiB, e.logits / kGiB, e.fp8_weights / kGiB, e.overhead / kGiB);
      }
    }
  }

  const auto summary_line = [&](const std::string& name, const std::vector<int>& rows) {
    const ErrorSummary b = StepTimeErrors(runs, rows, kUnitScales);
    const ErrorSummary a = StepTimeErrors(runs, rows, fitted);
    std::printf("  %-42s %4d %7.1f%% %7.1f%% %7.1f%% %7.1f%%\n", name.c_str(), a.rows,
                100 * b.median, 100 * b.p90, 100 * a.median, 100 * a.p90);
  };
  const auto summary_header = [](const char* title) {
    std::printf("\n%s\n  %-42s %4s %8s %8s %8s %8s\n", title, "", "rows", "shipped", "shipped",
                "refit", "refit");
    std::printf("  %-42s %4s %8s %8s %8s %8s\n", "", "", "median", "p90", "median", "p90");
  };
  summary_header("|predicted - measured| / measured step time");
  summary_line("held out", split.held_out);
  summary_line("train", split.train);
  summary_line("all", all);

  // Held-out rows by source and by device (a key with no held-out row: its
  // rows are all training rows, shown as such).
  const auto by_key = [&](const char* title, auto key) {
    std::map<std::string, std::vector<int>> held_rows, all_rows;
    for (size_t i = 0; i < runs.size(); ++i) {
      all_rows[key(runs[i])].push_back(static_cast<int>(i));
      if (held[i]) held_rows[key(runs[i])].push_back(static_cast<int>(i));
    }
    summary_header(title);
    for (const auto& [name, rows] : all_rows) {
      if (held_rows.count(name)) {
        summary_line(name + " (held out)", held_rows[name]);
      } else {
        summary_line(name + " (train only)", rows);
      }
    }
  };
  by_key("held-out step-time error by source", [](const PublishedRun& r) { return r.source; });
  by_key("held-out step-time error by device", [](const PublishedRun& r) { return r.device; });

  const std::vector<GroupRanking> shipped_ranks = RankGroups(runs, split, kUnitScales);
  const std::vector<GroupRanking> refit_ranks = RankGroups(runs, split, fitted);
  std::printf(
      "\nSpearman of predicted vs measured within each group (held-out rows where a group has "
      ">= 3 of them, else all its rows: 'all'; no figure for groups of < 3 rows ('-') or without "
      "a real spread ('flat'): measured tokens/s/GPU within %.0f%% of each other)\n",
      100 * kRealSpread);
  std::printf("  %-42s %4s %5s %17s %17s %19s\n", "", "", "", "step time", "tokens/s/GPU",
              "median error");
  std::printf("  %-42s %4s %5s %8s %8s %8s %8s %9s %9s\n", "group", "rows", "over", "shipped",
              "refit", "shipped", "refit", "shipped", "refit");
  int ranked = 0, ranked_below = 0;
  for (size_t g = 0; g < shipped_ranks.size(); ++g) {
    const GroupRanking &s = shipped_ranks[g], &f = refit_ranks[g];
    std::vector<int> error_rows;  // the held-out rows, or all where none is
    for (int i : s.rows) {
      if (held[i]) error_rows.push_back(i);
    }
    if (error_rows.empty()) error_rows = s.rows;
    const double b = MedianRelativeError(runs, error_rows, kUnitScales);
    const double a = MedianRelativeError(runs, error_rows, fitted);
    if (s.ranks) {
      ++ranked;
      if (s.throughput_spearman < 0.8) ++ranked_below;
      std::printf("  %-42s %4zu %5s %8.2f %8.2f %8.2f %8.2f %8.1f%% %8.1f%%\n", s.group.c_str(),
                  s.rows.size(), s.over_held_out ? "held" : "all", s.step_time_spearman,
                  f.step_time_spearman, s.throughput_spearman, f.throughput_spearman, 100 * b,
                  100 * a);
    } else {
      std::printf("  %-42s %4zu %5s %8s %8s %8s %8s %8.1f%% %8.1f%%\n", s.group.c_str(),
                  s.rows.size(), s.ranked_over.size() >= 3 ? "flat" : "-", "-", "-", "-", "-",
                  100 * b, 100 * a);
    }
  }
  std::printf("groups ranked: %d, with tokens/s/GPU Spearman (shipped) below 0.8: %d\n", ranked,
              ranked_below);

  // Memory: the cost model's prediction against what the sources state.
  std::vector<double> memory_errors;
  std::vector<int> not_fit, pruned;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].measured_peak_memory_gib > 0) {
      const double measured_bytes = runs[i].measured_peak_memory_gib * kGiB;
      memory_errors.push_back(std::abs(memory[i].predicted_bytes - measured_bytes) /
                              measured_bytes);
    }
    if (!memory[i].fits) not_fit.push_back(runs[i].id);
    if (!memory[i].kept_by_tuner) pruned.push_back(runs[i].id);
  }
  std::printf(
      "\npeak memory |predicted - measured| / measured over the %zu rows that state it: "
      "median %.1f%%, p90 %.1f%%\n",
      memory_errors.size(), 100 * Quantile(memory_errors, 0.5), 100 * Quantile(memory_errors, 0.9));
  std::printf(
      "published runs predicted not to fit: %zu (rows %s); beyond the tuner's %.0f%% "
      "margin (pruned by tune): %zu (rows %s)\n",
      not_fit.size(), absl::StrJoin(not_fit, " ").c_str(), 100 * TunerMemoryMargin(), pruned.size(),
      absl::StrJoin(pruned, " ").c_str());

  std::printf("\nfitted scales on the shipped cuda priors (1 = the fit is what ships)\n");
  for (int g = 0; g < kNumPriorScales; ++g) {
    std::printf("  %-20s %.4f\n", PriorScaleName(g), fitted[g]);
  }
  std::printf("shipped priors' held-out median error: %.1f%%\n",
              100 * MedianRelativeError(runs, split.held_out, kUnitScales));
  // The constants they give, on an H100 SXM (what search/step_time.cc holds).
  const DeviceSpec h100 = *PublishedDevice("h100-sxm");
  const TimeCoefficients before = ScaledPriors(h100, reference);
  const TimeCoefficients after = ScaledPriors(h100, fitted);
  const auto& b = before.seconds_per_unit;
  const auto& a = after.seconds_per_unit;
  std::printf(
      "\ncuda priors on h100-sxm      before        after   (before: the reference priors)\n");
  std::printf("  achieved bf16 fraction   %9.4f    %9.4f\n",
              1 / (b[kFlopsBf16] * h100.peak.bf16 * 1e12),
              1 / (a[kFlopsBf16] * h100.peak.bf16 * 1e12));
  std::printf("  achieved fp8 fraction    %9.4f    %9.4f\n",
              1 / (b[kFlopsFp8] * h100.peak.fp8 * 1e12), 1 / (a[kFlopsFp8] * h100.peak.fp8 * 1e12));
  // And on an A100 (no fp8 tensor cores: kCudaAchievedPeakFraction).
  const DeviceSpec a100 = *PublishedDevice("a100-80gb");
  std::printf(
      "  a100 bf16 fraction       %9.4f    %9.4f\n",
      1 / (ScaledPriors(a100, reference).seconds_per_unit[kFlopsBf16] * a100.peak.bf16 * 1e12),
      1 / (ScaledPriors(a100, fitted).seconds_per_unit[kFlopsBf16] * a100.peak.bf16 * 1e12));
  std::printf("  layer pass (us)          %9.2f    %9.2f\n", b[kLayerPasses] * 1e6,
              a[kLayerPasses] * 1e6);
  const double link = 0.75 * h100.intra_node.bandwidth_bytes_per_s;  // the prior's link rate
  std::printf("  data-parallel exposure   %9.4f    %9.4f   (of the link's time)\n",
              b[kDataParallelBytes] * link, a[kDataParallelBytes] * link);
  std::printf("  model-parallel exposure  %9.4f    %9.4f\n", b[kModelParallelBytes] * link,
              a[kModelParallelBytes] * link);
  std::printf("  fused-attention fraction %9.4f    %9.4f   (its extra time: 1 / (this x peak))\n",
              1 / (b[kFusedAttentionFlops] * h100.peak.bf16 * 1e12),
              1 / (a[kFusedAttentionFlops] * h100.peak.bf16 * 1e12));
  std::printf("  activation bytes/element %9.2f    %9.2f\n",
              b[kActivationElements] * h100.memory_bandwidth_bytes_per_s,
              a[kActivationElements] * h100.memory_bandwidth_bytes_per_s);
  std::printf("  per call (us)            %9.2f    %9.2f\n", b[kCollectives] * 1e6,
              a[kCollectives] * 1e6);
  std::printf("  per step (ms)            %9.3f    %9.3f\n", b[kStep] * 1e3, a[kStep] * 1e3);
  return 0;
}

}  // namespace
}  // namespace autoaccel::bench

int main(int argc, char** argv) { return autoaccel::bench::Run(argc, argv); }
