#include "client/estimate_command.h"

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
  r.set_world_size(f.world_size);
  r.set_device(f.device);
  r.set_devices_per_node(f.devices_per_node);
  r.set_strategy(f.strategy);
  r.set_top(f.top);
  for (const std::string& p : f.precisions) r.add_precisions(p);
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

void PrintEstimates(const std::vector<StrategyEstimate>& estimates, std::ostream& out) {
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
  cmd->add_option("--world-size", f->world_size, "devices of the cluster (default 1)");
  cmd->add_option("--device", f->device, "device type from the catalog (--list-devices)");
  cmd->add_option("--devices-per-node", f->devices_per_node,
                  "devices per node (default: the catalog's, 8 for every built-in device)");
  cmd->add_option("--strategy", f->strategy,
                  "one strategy in canonical text, e.g. "
                  "dp=8,tp=1,pp=1,sharding=zero1,mbs=1,precision=bf16 (ga= defaults to what "
                  "makes up the global batch)");
  cmd->add_option("--top", f->top, "rank the whole space: the K fastest strategies that fit");
  cmd->add_option("--precisions", f->precisions,
                  "with --top, the precisions to rank, e.g. bf16,pure_bf16,fp8 (default: bf16 "
                  "and pure_bf16 on a GPU whose bf16 peak is its highest, else every precision "
                  "the device runs; fp8 only when listed)")
      ->delimiter(',');
  cmd->add_option("--device-catalog", f->catalog_file,
                  "JSON catalog adding devices or replacing built-in ones (docs/CLI.md)");
  cmd->add_flag("--list-devices", f->list_devices, "print the device catalog");
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
  } else {
    const EstimateRequest& r = report->request;
    out << absl::StrFormat(
        "%s, %.2fB parameters, seq %d, global batch %d on %d x %s (%s GiB, %d a node): %s\n",
        r.model.family, r.model.ParameterCount() / 1e9, r.seq_len, r.global_batch_size,
        r.world_size, r.device.name, GiB(r.device.spec.memory_bytes), report->devices_per_node,
        report->top ? absl::StrCat("the ", report->estimates.size(), " fastest that fit")
                    : "the strategy given");
    if (!report->estimates.empty()) PrintEstimates(report->estimates, out);
    if (report->top) {
      out << absl::StrFormat("%d candidates, %d fit.", report->top->candidates,
                             report->top->fitting);
      for (const RuledOut& o : report->top->ruled_out) {
        out << absl::StrFormat(" Ruled out: %d %s (e.g. %s: %s).", o.count, o.kind,
                               StrategyToText(o.example), o.example_reason);
      }
      out << "\n";
    }
    out << "Predicted by the cost model's priors, not measured (docs/CLI.md, estimate).\n";
  }
  if (!report->list_devices && report->top && report->estimates.empty()) {
    return kExitNothingRecorded;
  }
  return 0;
}

}  // namespace autoaccel
