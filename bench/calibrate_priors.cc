// Calibrates the cost model's cuda step-time priors against published
// training runs (bench/tables/gpu_published.csv; bench/calibration.h) and
// prints, for the reference priors ("before": those before this calibration)
// and the fitted ones ("after"):
// every row's measured and predicted step time, the median relative error on
// the held-out rows and on all rows, and the Spearman rank correlation within
// each group. Then the fitted scales and the cuda constants they give, to put
// into search/step_time.cc.
//
//   build/bin/calibrate_priors [--table PATH] [--rows]
//
// Exit codes: 0 done, 2 the table does not parse (the message names the line
// and column).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/calibration.h"

namespace autoaccel::bench {
namespace {

struct GroupFigures {
  std::vector<int> all, held_out;
};

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
  if (print_rows) {
    std::printf("\n%3s %-42s %-5s %9s %9s %9s\n", "id", "group", "split", "measured", "before",
                "after");
    for (size_t i = 0; i < runs.size(); ++i) {
      std::printf("%3d %-42s %-5s %9.3f %9.3f %9.3f\n", runs[i].id, runs[i].group.c_str(),
                  held[i] ? "held" : "train", runs[i].step_time_s, PredictRun(runs[i], reference),
                  PredictRun(runs[i], fitted));
    }
  }

  std::printf("\nmedian |predicted - measured| / measured step time\n");
  std::printf("  %-10s %8s %8s\n", "rows", "before", "after");
  std::printf("  %-10s %7.1f%% %7.1f%%\n", "held out",
              100 * MedianRelativeError(runs, split.held_out, reference),
              100 * MedianRelativeError(runs, split.held_out, fitted));
  std::printf("  %-10s %7.1f%% %7.1f%%\n", "train",
              100 * MedianRelativeError(runs, split.train, reference),
              100 * MedianRelativeError(runs, split.train, fitted));
  std::printf("  %-10s %7.1f%% %7.1f%%\n", "all", 100 * MedianRelativeError(runs, all, reference),
              100 * MedianRelativeError(runs, all, fitted));

  std::map<std::string, GroupFigures> groups;
  std::vector<std::string> order;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!groups.count(runs[i].group)) order.push_back(runs[i].group);
    GroupFigures& g = groups[runs[i].group];
    g.all.push_back(static_cast<int>(i));
    if (held[i]) g.held_out.push_back(static_cast<int>(i));
  }
  std::printf(
      "\nSpearman of predicted vs measured step time within each group (held-out rows where a "
      "group has >= 3 of them, else all its rows: 'all'; groups of < 3 rows: no figure)\n");
  std::printf("  %-42s %4s %5s %17s %17s %19s\n", "", "", "", "step time", "tokens/s/GPU",
              "median error");
  std::printf("  %-42s %4s %5s %8s %8s %8s %8s %9s %9s\n", "group", "rows", "over", "before",
              "after", "before", "after", "before", "after");
  for (const std::string& name : order) {
    const GroupFigures& g = groups[name];
    const bool use_held = g.held_out.size() >= 3;
    const std::vector<int>& rows = use_held ? g.held_out : g.all;
    // Step times, and throughput per GPU (tokens / s / GPU: what a search
    // ranks strategies by; batch sizes that differ within a group make
    // step-time ranks easy).
    std::vector<double> measured, before, after, measured_tput, before_tput, after_tput;
    for (int i : rows) {
      const double per_gpu = runs[i].global_batch_tokens / runs[i].gpus;
      measured.push_back(runs[i].step_time_s);
      before.push_back(PredictRun(runs[i], reference));
      after.push_back(PredictRun(runs[i], fitted));
      measured_tput.push_back(per_gpu / measured.back());
      before_tput.push_back(per_gpu / before.back());
      after_tput.push_back(per_gpu / after.back());
    }
    const std::vector<int>& error_rows = g.held_out.empty() ? g.all : g.held_out;
    if (rows.size() >= 3) {
      std::printf("  %-42s %4zu %5s %8.2f %8.2f %8.2f %8.2f %8.1f%% %8.1f%%\n", name.c_str(),
                  g.all.size(), use_held ? "held" : "all", Spearman(before, measured),
                  Spearman(after, measured), Spearman(before_tput, measured_tput),
                  Spearman(after_tput, measured_tput),
                  100 * MedianRelativeError(runs, error_rows, reference),
                  100 * MedianRelativeError(runs, error_rows, fitted));
    } else {
      std::printf("  %-42s %4zu %5s %8s %8s %8s %8s %8.1f%% %8.1f%%\n", name.c_str(), g.all.size(),
                  "-", "-", "-", "-", "-", 100 * MedianRelativeError(runs, error_rows, reference),
                  100 * MedianRelativeError(runs, error_rows, fitted));
    }
  }

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
  std::printf("  layer pass (us)          %9.2f    %9.2f\n", b[kLayerPasses] * 1e6,
              a[kLayerPasses] * 1e6);
  std::printf("  model-parallel GB/s      %9.2f    %9.2f\n", 1e-9 / b[kModelParallelBytes],
              1e-9 / a[kModelParallelBytes]);
  std::printf(
      "  data-parallel exposure   %9.4f    %9.4f   (data- / model-parallel seconds per byte)\n",
      b[kDataParallelBytes] / b[kModelParallelBytes],
      a[kDataParallelBytes] / a[kModelParallelBytes]);
  std::printf("  per call (us)            %9.2f    %9.2f\n", b[kCollectives] * 1e6,
              a[kCollectives] * 1e6);
  std::printf("  per step (ms)            %9.3f    %9.3f\n", b[kStep] * 1e3, a[kStep] * 1e3);
  return 0;
}

}  // namespace
}  // namespace autoaccel::bench

int main(int argc, char** argv) { return autoaccel::bench::Run(argc, argv); }
