#include "client/export_command.h"

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/flag_file.h"
#include "client/render.h"
#include "common/status_macros.h"
#include "export/export_json.h"
#include "export/exporter.h"
#include "export/format_registry.h"
#include "offline/export_request.h"

namespace autoaccel {
namespace {

// One line on stderr (and, with --json, the error document); returns `code`.
int Fail(const ClientContext& c, const std::string& what, int code) {
  if (c.json) WriteJson(*c.out, ErrorJson(what, code));
  *c.err << "autoaccel: " << what << "\n";
  return code;
}

// A table of rows with a name, a value, a status and a note, each column as
// wide as its widest cell.
template <typename Row>
void PrintRows(std::ostream& out, absl::string_view title, absl::string_view name_header,
               const std::vector<Row>& rows, std::string Row::*name) {
  size_t width = name_header.size(), value = 5, status = 6;
  for (const Row& row : rows) {
    width = std::max(width, (row.*name).size());
    value = std::max(value, row.value.size());
    status = std::max(status, FidelityStatusName(row.status).size());
  }
  auto pad = [](absl::string_view s, size_t n) {
    return absl::StrCat(s, std::string(n + 2 - std::min(n, s.size()), ' '));
  };
  out << title << ":\n"
      << "  " << pad(name_header, width) << pad("value", value) << pad("status", status)
      << "note\n";
  for (const Row& row : rows) {
    out << "  " << pad(row.*name, width) << pad(row.value, value)
        << pad(FidelityStatusName(row.status), status) << row.note << "\n";
  }
}

// The strategy's fidelity table, then the architecture section when the
// format has one.
void PrintFidelity(std::ostream& out, const ExportResult& r) {
  PrintRows(out, absl::StrCat("fidelity (", r.format, ")"), "dimension", r.fidelity,
            &FidelityRow::dimension);
  if (!r.architecture.empty()) {
    PrintRows(out, absl::StrCat("architecture (", r.format, ")"), "feature", r.architecture,
              &ArchitectureRow::feature);
  }
}

// Writes the files under `dir` (created), refusing to replace any file.
absl::Status WriteFiles(const std::string& dir, const ExportResult& r, std::ostream& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("--out: cannot create ", dir, ": ", ec.message()));
  for (const auto& [name, content] : r.files) {
    if (fs::exists(fs::path(dir) / name)) {
      return absl::AlreadyExistsError(
          absl::StrCat("--out: ", (fs::path(dir) / name).string(),
                       " exists; remove it or choose another directory (export never replaces "
                       "a file)"));
    }
  }
  for (const auto& [name, content] : r.files) {
    const fs::path path = fs::path(dir) / name;
    std::ofstream f(path, std::ios::binary);
    f << content;
    if (!f.good()) return absl::InternalError(absl::StrCat("--out: cannot write ", path.string()));
    out << "wrote " << path.string() << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

CLI::App* AddExportCommand(CLI::App* app, ExportFlags* f) {
  CLI::App* cmd = app->add_subcommand(
      "export",
      "write a strategy (a job's best, or --strategy) as a training framework's configuration, "
      "with a fidelity report (docs/CLI.md, \"export\")");
  auto* job =
      cmd->add_option("--job", f->job_id, "export this job's best strategy (asks the server)");
  auto* strategy = cmd->add_option(
      "--strategy", f->strategy,
      "a strategy's canonical text, e.g. dp=2,tp=2,pp=1,sharding=zero1,mbs=4,ga=2,... (no "
      "server)");
  job->excludes(strategy);
  cmd->add_option("--world-size", f->world_size, "with --strategy: ranks (dp*cp*tp*pp)");
  cmd->add_option("--global-batch-size", f->global_batch_size,
                  "with --strategy: samples per optimizer step (mbs*ga*dp)");
  cmd->add_option("--seq-len", f->seq_len, "with --strategy: sequence length");
  ModelFlags::Use use;
  use.when = "with --strategy, optional: ";
  use.family_note = ", for model flags (Megatron) and layer counts";
  f->model.Add(cmd, use);
  cmd->add_option("--devices-per-node", f->devices_per_node,
                  "GPUs per node of the cluster (default: min(world size, 8))");
  std::string formats;
  for (const ExportFormat& format : ExportFormats()) {
    absl::StrAppend(&formats, "\n  ", format.name, ": ", format.description);
  }
  cmd->add_option("--format", f->format,
                  absl::StrCat("the framework (default with --job of a launcher job: the "
                               "launcher's format):",
                               formats));
  cmd->add_option("--out", f->out_dir,
                  "write the files into this directory (created; an existing file is never "
                  "replaced) instead of printing them");
  return cmd;
}

int ExportCommand(const ClientContext& c, const ExportFlags& f) {
  v1::ExportRequest request;
  request.set_job_id(f.job_id);
  request.set_strategy(f.strategy);
  request.set_world_size(f.world_size);
  request.set_global_batch_size(f.global_batch_size);
  request.set_seq_len(f.seq_len);
  request.set_format(f.format);
  request.set_devices_per_node(f.devices_per_node);
  if (absl::Status s = f.model.Fill(request.mutable_model(), /*optional=*/true); !s.ok()) {
    return Fail(c, std::string(s.message()), kExitBadInput);
  }
  if (f.model.family.empty()) request.clear_model();
  std::optional<v1::Job> job;
  if (!f.job_id.empty()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(c.rpc_timeout));
    v1::GetJobRequest req;
    req.set_job_id(f.job_id);
    job.emplace();
    grpc::Status s = c.stub->GetJob(&ctx, req, &*job);
    if (!s.ok()) {
      return Fail(c,
                  s.error_code() == grpc::StatusCode::NOT_FOUND
                      ? absl::StrCat("not found: ", s.error_message())
                      : absl::StrCat("cannot get job ", f.job_id, " from ", c.server, ": ",
                                     s.error_message()),
                  1);
    }
  }
  absl::StatusOr<ExportInput> input = ExportInputOf(request, job ? &*job : nullptr);
  if (absl::IsFailedPrecondition(input.status())) {  // no best yet
    const std::string what(input.status().message());
    if (c.json) WriteJson(*c.out, NoStrategyJson(what));
    *c.err << "autoaccel: " << what << "\n";
    return kExitNothingRecorded;
  }
  if (!input.ok()) {
    return Fail(c, std::string(input.status().message()),
                absl::IsInvalidArgument(input.status()) ? kExitBadInput : 1);
  }
  const ExportInput& in = *input;
  absl::StatusOr<ExportResult> r = Export(in);
  if (!r.ok()) {
    return Fail(c, std::string(r.status().message()),
                r.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : 1);
  }
  std::ostream& human = c.json ? *c.err : *c.out;
  if (r->rejected()) {
    if (c.json) *c.out << ExportResultToJson(*r).dump(2) << "\n";
    PrintFidelity(human, *r);
    *c.err << "autoaccel: " << in.format
           << " rejects this strategy (rows marked rejected); nothing written\n";
    return kExitBadInput;
  }
  if (!f.out_dir.empty()) {
    if (absl::Status s = WriteFiles(f.out_dir, *r, human); !s.ok()) {
      return Fail(c, std::string(s.message()), kExitBadInput);
    }
  } else if (!c.json) {
    for (const auto& [name, content] : r->files) {
      *c.out << "==> " << name << " <==\n" << content;
      if (!content.empty() && content.back() != '\n') *c.out << "\n";
      *c.out << "\n";
    }
  }
  if (c.json) {
    *c.out << ExportResultToJson(*r).dump(2) << "\n";
  }
  human << "command: " << r->command << "\n";
  PrintFidelity(human, *r);
  return 0;
}

}  // namespace autoaccel
