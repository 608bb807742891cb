// `autoaccel export`: a strategy as a training framework's configuration
// (export/exporter.h), with its fidelity report. Either a job's best
// strategy (--job, one GetJob RPC) or a strategy given as canonical text
// (--strategy, no server). Exit codes: 0 written/printed; 1 the RPC failed;
// 2 bad input (strategy text, sizes, format, an --out file that exists) or
// a combination the framework rejects (the table says which rows);
// 3 (kExitNothingRecorded) the job has no best strategy yet.
#ifndef AUTOACCEL_CLIENT_EXPORT_COMMAND_H_
#define AUTOACCEL_CLIENT_EXPORT_COMMAND_H_

#include <string>

#include "client/commands.h"
#include "client/model_flags.h"

namespace CLI {
class App;
}

namespace autoaccel {

struct ExportFlags {
  std::string job_id;
  std::string strategy;  // canonical text (spec/strategy.h)
  int world_size = 0;
  int global_batch_size = 0;
  int seq_len = 0;
  ModelFlags model;          // optional with --strategy
  int devices_per_node = 0;  // 0: min(world size, 8)
  std::string format;
  std::string out_dir;  // "" : print the files
};

// Adds the `export` subcommand and its flags to `app`, filling `flags`.
CLI::App* AddExportCommand(CLI::App* app, ExportFlags* flags);

// Runs it. `c.stub` is used only with --job.
int ExportCommand(const ClientContext& c, const ExportFlags& flags);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_EXPORT_COMMAND_H_
