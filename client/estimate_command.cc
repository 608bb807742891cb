#include "client/estimate_command.h"

#include <algorithm>
#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/flag_file.h"
#include "common/status_macros.h"
#include "offline/estimate_report.h"

namespace autoaccel {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr int64_t kMaxInputBytes = int64_t{64} << 20;

absl::StatusOr<std::string> ReadInput(absl::string_view flag, const std::string& path) {
  return ReadFlagFile(flag, path, kMaxInputBytes);
}

// The request the flags make: the files they name read in.
absl::StatusOr<v1::EstimateRequest> RequestOf(const EstimateFlags& f) {
  v1::EstimateRequest r;
  if (!f.catalog_file.empty()) {
    ASSIGN_OR_RETURN(*r.mutable_device_catalog_json(),
                     ReadInput("--device-catalog", f.catalog_file));
    r.set_device_catalog_name(f.catalog_file);
  }
  r.set_list_devices(f.list_devices);
  // --list-devices needs no model.
  RETURN_IF_ERROR(f.model.Fill(r.mutable_model(), /*optional=*/f.list_devices));
  r.set_seq_len(f.seq_len);
  r.set_global_batch_size(f.global_batch_size);
  // One value of each: the single-cluster request; more: a sweep.
  if (f.world_sizes.size() == 1) {
    r.set_world_size(f.world_sizes[0]);
  } else {
    for (int w : f.world_sizes) r.add_world_sizes(w);
  }
  if (f.devices.size() == 1) {
    r.set_device(f.devices[0]);
  } else {
    for (const std::string& d : f.devices) r.add_devices(d);
  }
  r.set_devices_per_node(f.devices_per_node);
  r.set_strategy(f.strategy);
  r.set_top(f.top);
  for (const std::string& p : f.precisions) r.add_precisions(p);
  if (!f.tokens.empty()) {
    ASSIGN_OR_RETURN(const int64_t tokens, ParseTokenCount("--tokens", f.tokens));
    r.set_tokens(tokens);
  }
  if (f.price_per_gpu_hour < 0 || !std::isfinite(f.price_per_gpu_hour)) {
    return absl::InvalidArgumentError("--price-per-gpu-hour: must be a number > 0");
  }
  r.set_price_per_gpu_hour(f.price_per_gpu_hour);
  if (!f.deadline.empty()) {
    ASSIGN_OR_RETURN(const double seconds, ParseDeadlineSeconds("--deadline", f.deadline));
    r.set_deadline_seconds(seconds);
  }
  r.set_budget(f.budget);
  r.set_safe_margin(f.safe_margin);
  return r;
}

std::string GiB(int64_t bytes) { return absl::StrFormat("%.1f", bytes / kGiB); }

void PrintDevices(const DeviceCatalog& catalog, std::ostream& out) {
  out << absl::StrFormat("%-11s %7s %9s %9s %9s %9s %10s %10s %6s  %s\n", "DEVICE", "GiB",
                         "BF16 TF", "FP8 TF", "FP32 TF", "MEM TB/s", "NODE GB/s", "NET GB/s",
                         "/NODE", "ALIASES");
  for (const CatalogDevice& d : catalog.devices()) {
    out << absl::StrFormat("%-11s %7s %9.1f %9.1f %9.1f %9.2f %10.0f %10.1f %6d  %s\n", d.name,
                           GiB(d.spec.memory_bytes), d.spec.peak.bf16, d.spec.peak.fp8,
                           d.spec.peak.fp32, d.spec.memory_bandwidth_bytes_per_s / 1e12,
                           d.spec.intra_node.bandwidth_bytes_per_s / 1e9,
                           d.spec.inter_node.bandwidth_bytes_per_s / 1e9, d.spec.devices_per_node,
                           absl::StrJoin(d.aliases, ","));
  }
  out << "Bandwidths per device and direction; peaks dense. Sources: --json, or "
         "search/device_catalog.json.\n";
}

// "12.3 days (9.8-14.8), $1,234 ($987-$1,481)": days and cost to train
// with their band; the cost only with a price.
std::string CostText(const TrainingCost& c) {
  std::string text = absl::StrFormat("%.1f days (%.1f-%.1f)", c.days, c.days_fast, c.days_slow);
  if (c.priced) {
    absl::StrAppend(&text, ", ", FormatMoney(c.cost), " (", FormatMoney(c.cost_low), "-",
                    FormatMoney(c.cost_high), ")");
  } else {
    absl::StrAppend(&text, ", no price (--price-per-gpu-hour)");
  }
  return text;
}

std::string BandNote(int64_t tokens) {
  return absl::StrFormat(
      "Time and cost to train %.4g tokens: days = tokens / tokens/s; cost = days x 24 x price "
      "per GPU-hour x GPUs. In brackets: +-%.1f%%, %s.\n",
      double(tokens), kStepTimeBand * 100, kStepTimeBandSource);
}

void PrintEstimates(const std::vector<StrategyEstimate>& estimates,
                    const std::vector<TrainingCost>& costs, std::ostream& out) {
  out << absl::StrFormat("%-3s %-4s %8s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %9s %11s %6s  %s\n",
                         "#", "FITS", "MARGIN", "PARAMS", "GRADS", "OPTIM", "ACTIV", "LOGITS",
                         "GATHER", "FP8 W", "TOTAL", "DP GB", "MP GB", "STEP ms", "TOKENS/s", "MFU",
                         "STRATEGY");
  int i = 0;
  for (const StrategyEstimate& e : estimates) {
    const MemoryEstimate& m = e.memory;
    out << absl::StrFormat(
        "%-3d %-4s %8s %7s %7s %7s %7s %7s %7s %7s %7s %7.1f %7.1f %9.1f %11.0f %5.1f%%  %s\n", ++i,
        e.fits ? "yes" : "NO", GiB(e.margin_bytes), GiB(m.parameters), GiB(m.gradients),
        GiB(m.optimizer), GiB(m.activations), GiB(m.logits), GiB(m.gathered), GiB(m.fp8_weights),
        GiB(m.total()), e.data_parallel_bytes / 1e9, e.model_parallel_bytes / 1e9,
        e.step_time_s * 1e3, e.tokens_per_second, e.mfu * 100, StrategyToText(e.strategy));
    if (!e.fits) out << "    does not fit: " << e.why_not << "\n";
    if (static_cast<size_t>(i) <= costs.size()) {
      out << "    to train: " << CostText(costs[i - 1]) << "\n";
    }
    const ModelParallelBytes& mp = e.model_parallel;
    if (mp.total() > 0) {
      out << absl::StrFormat(
          "    MP GB by dimension: tensor %.1f, context %.1f, expert %.1f, pipeline %.1f\n",
          mp.tensor / 1e9, mp.context / 1e9, mp.expert / 1e9, mp.pipeline / 1e9);
    }
  }
  out << "Memory in GiB per device (worst rank); margin = device memory - total; FP8 W: fp8's "
         "weight copies kept for backward. DP/MP GB: "
         "bytes a device sends per step in data-parallel (gradients, shards) and model-parallel "
         "(tensor, context, expert, pipeline) communication.\n";
}

// One row per cluster: its fastest option, then (when it is another
// strategy) its safe pick, or why it has none; the choice for a deadline or
// budget last.
void PrintSweep(const EstimateReport& report, std::ostream& out) {
  struct Row {
    std::string number;  // the cluster's, on its first row
    const ClusterEstimate* cluster;
    const StrategyEstimate* estimate;  // null: `note` instead
    std::string to_train;
    bool safe = false;
    std::string note;
  };
  std::vector<Row> rows;
  size_t width = std::string("TO TRAIN").size();
  int i = 0;
  for (const ClusterEstimate& c : report.clusters) {
    const std::string number = absl::StrCat(++i);
    const auto add = [&](const StrategyEstimate& e, const std::optional<TrainingCost>& cost,
                         bool safe) {
      Row r{safe ? "" : number, &c, &e, cost ? CostText(*cost) : "-", safe, ""};
      width = std::max(width, r.to_train.size());
      rows.push_back(std::move(r));
    };
    if (!c.top) {
      rows.push_back({number, &c, nullptr, "", false, absl::StrCat("no strategy: ", c.error)});
    } else if (c.top->best.empty()) {
      rows.push_back({number, &c, nullptr, "", false,
                      absl::StrFormat("nothing fits (%d candidates)", c.top->candidates)});
    } else {
      add(c.top->best[0], c.fastest_cost, false);
      if (!c.top->safe) {
        rows.push_back({"", &c, nullptr, "", true,
                        absl::StrFormat("no strategy keeps %.0f%% of the device's memory free",
                                        report.request.safe_margin * 100)});
      } else if (c.top->safe->strategy != c.top->best[0].strategy) {
        add(*c.top->safe, c.safe_cost, true);
      }
    }
  }
  const int w = static_cast<int>(width);
  out << absl::StrFormat("%-3s %-10s %5s %9s %11s %7s %8s  %-*s  %s\n", "#", "DEVICE", "GPUS",
                         "STEP ms", "TOKENS/s", "MFU", "MARGIN", w, "TO TRAIN", "STRATEGY");
  for (const Row& r : rows) {
    const ClusterEstimate& c = *r.cluster;
    if (r.estimate == nullptr) {
      out << absl::StrFormat("%-3s %-10s %5d  %s\n", r.number, c.device.name, c.world_size, r.note);
      continue;
    }
    const StrategyEstimate& e = *r.estimate;
    out << absl::StrFormat("%-3s %-10s %5d %9.1f %11.0f %6.1f%% %8s  %-*s  %s%s\n", r.number,
                           c.device.name, c.world_size, e.step_time_s * 1e3, e.tokens_per_second,
                           e.mfu * 100, GiB(e.margin_bytes), w, r.to_train, r.safe ? "safe: " : "",
                           StrategyToText(e.strategy));
  }
  out << absl::StrFormat(
      "Each cluster: its fastest strategy, and its safe pick (the fastest keeping >= %.0f%% of "
      "the device's memory free, --safe-margin) where that is another. Margin in GiB.\n",
      report.request.safe_margin * 100);
  if (report.tokens > 0) out << BandNote(report.tokens);
  if (report.choice) {
    const ClusterPick& p = *report.choice;
    const bool deadline = p.rule == ClusterPick::Rule::kDeadline;
    const std::string rule =
        deadline ? absl::StrFormat("the cheapest whose slow end meets the deadline of %.1f days",
                                   p.limit)
                 : absl::StrCat("the fastest whose high end stays within the budget of ",
                                FormatMoney(p.limit));
    if (p.pick) {
      const ClusterEstimate& c = report.clusters[*p.pick];
      out << absl::StrFormat(
          "Pick (%s, training with each cluster's safe pick): #%d, %d x %s, %s: %s\n", rule,
          *p.pick + 1, c.world_size, c.device.name, CostText(*c.safe_cost),
          StrategyToText(c.top->safe->strategy));
    } else {
      out << "Pick: no cluster meets it (" << rule
          << ", training with each cluster's safe pick).\n";
    }
  }
}

int Fail(const absl::Status& s, std::ostream& err) {
  err << "autoaccel estimate: " << s.message() << "\n";
  return kExitBadInput;
}

}  // namespace

CLI::App* AddEstimateCommand(CLI::App* app, EstimateFlags* f) {
  CLI::App* cmd = app->add_subcommand(
      "estimate",
      "predict memory, step time, tokens/s and MFU of a strategy (or the best K) on a cluster "
      "from the device catalog, offline (runs nothing, needs no server)");
  f->model.Add(cmd, ModelFlags::Use());
  cmd->add_option("--seq-len", f->seq_len, "sequence length");
  cmd->add_option("--global-batch-size", f->global_batch_size, "samples per optimizer step");
  cmd->add_option("--world-size", f->world_sizes,
                  "devices of the cluster (default 1); several, comma-separated, sweep them")
      ->delimiter(',');
  cmd->add_option("--device", f->devices,
                  "device type from the catalog (--list-devices); several, comma-separated, "
                  "sweep them")
      ->delimiter(',');
  cmd->add_option("--devices-per-node", f->devices_per_node,
                  "devices per node (default: the catalog's, 8 for every built-in device)");
  cmd->add_option("--strategy", f->strategy,
                  "one strategy in canonical text, e.g. "
                  "dp=8,tp=1,pp=1,sharding=zero1,mbs=1,precision=bf16 (ga= defaults to what "
                  "makes up the global batch)");
  cmd->add_option("--top", f->top,
                  "rank the whole space: the K fastest genuinely different options that fit "
                  "(one per layout - dp/tp/pp/cp/ep degrees, virtual stages, sharding - and "
                  "recompute choice, each shown by its fastest strategy), and the safe pick");
  cmd->add_option("--precisions", f->precisions,
                  "with --top, the precisions to rank, e.g. bf16,pure_bf16,fp8 (default: bf16 "
                  "and pure_bf16 on a GPU whose bf16 peak is its highest, else every precision "
                  "the device runs; fp8 only when listed)")
      ->delimiter(',');
  cmd->add_option("--device-catalog", f->catalog_file,
                  "JSON catalog adding devices or replacing built-in ones (docs/CLI.md)");
  cmd->add_flag("--list-devices", f->list_devices, "print the device catalog");
  cmd->add_option("--tokens", f->tokens,
                  "tokens to train on (K, M, B, T suffixes, decimal: 1T = 1e12): adds the days "
                  "and cost to train");
  cmd->add_option("--price-per-gpu-hour", f->price_per_gpu_hour,
                  "price of one device for an hour (default: the catalog entry's "
                  "price_per_gpu_hour; the built-in catalog has none)");
  cmd->add_option(
      "--deadline", f->deadline,
      "with --tokens: pick the cheapest cluster whose slow end meets it, e.g. 30d, 12h");
  cmd->add_option("--budget", f->budget,
                  "with --tokens: pick the fastest cluster whose high end stays within this sum");
  cmd->add_option("--safe-margin", f->safe_margin,
                  "the safe pick keeps at least this fraction of device memory free (default 0.1)");
  return cmd;
}

int EstimateCommand(const EstimateFlags& f, bool json_out, std::ostream& out, std::ostream& err) {
  absl::StatusOr<v1::EstimateRequest> request = RequestOf(f);
  if (!request.ok()) return Fail(request.status(), err);
  absl::StatusOr<EstimateReport> report = Estimate(*request);
  if (!report.ok()) return Fail(report.status(), err);
  if (json_out) {
    out << EstimateReportJson(*report).dump(2) << "\n";
  } else if (report->list_devices) {
    PrintDevices(report->catalog, out);
  } else if (report->sweep) {
    const EstimateRequest& r = report->request;
    out << absl::StrFormat("%s, %.2fB parameters, seq %d, global batch %d: %d clusters\n",
                           r.model.family, r.model.ParameterCount() / 1e9, r.seq_len,
                           r.global_batch_size, report->clusters.size());
    PrintSweep(*report, out);
    out << "Predicted by the cost model's priors, not measured (docs/CLI.md, estimate).\n";
  } else {
    const EstimateRequest& r = report->request;
    out << absl::StrFormat(
        "%s, %.2fB parameters, seq %d, global batch %d on %d x %s (%s GiB, %d a node): %s\n",
        r.model.family, r.model.ParameterCount() / 1e9, r.seq_len, r.global_batch_size,
        r.world_size, r.device.name, GiB(r.device.spec.memory_bytes), report->devices_per_node,
        report->top ? absl::StrCat("the ", report->estimates.size(), " fastest options that fit")
                    : "the strategy given");
    if (!report->estimates.empty()) {
      PrintEstimates(report->estimates, report->estimate_costs, out);
    }
    if (report->top) {
      if (report->top->safe) {
        out << absl::StrFormat(
            "Safe pick (the fastest keeping >= %.0f%% of memory free, %s GiB): %s\n",
            r.safe_margin * 100, GiB(report->top->safe->margin_bytes),
            StrategyToText(report->top->safe->strategy));
        if (report->safe_cost) out << "    to train: " << CostText(*report->safe_cost) << "\n";
      } else {
        out << absl::StrFormat(
            "No strategy keeps %.0f%% of the device's memory free (--safe-margin).\n",
            r.safe_margin * 100);
      }
      out << absl::StrFormat("%d candidates, %d fit, in %d options (layout and recompute).",
                             report->top->candidates, report->top->fitting, report->top->groups);
      for (const RuledOut& o : report->top->ruled_out) {
        out << absl::StrFormat(" Ruled out: %d %s (e.g. %s: %s).", o.count, o.kind,
                               StrategyToText(o.example), o.example_reason);
      }
      out << "\n";
    }
    if (report->tokens > 0) out << BandNote(report->tokens);
    out << "Predicted by the cost model's priors, not measured (docs/CLI.md, estimate).\n";
  }
  if (!report->list_devices && report->top && report->estimates.empty()) {
    return kExitNothingRecorded;
  }
  if (report->choice && !report->choice->pick) return kExitNothingRecorded;
  if (report->sweep &&
      std::none_of(report->clusters.begin(), report->clusters.end(),
                   [](const ClusterEstimate& c) { return c.top && !c.top->best.empty(); })) {
    return kExitNothingRecorded;
  }
  return 0;
}

}  // namespace autoaccel
