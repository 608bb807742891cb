// `autoaccel report JOB --html FILE [--tokens N [--price-per-gpu-hour P]]`:
// fetches the job, its trials and the workers' devices, and writes the HTML
// report (report/report_html.h); with --tokens its answer says the days
// (and with a price the cost) to train N tokens at the job's world size.
#ifndef AUTOACCEL_CLIENT_REPORT_COMMAND_H_
#define AUTOACCEL_CLIENT_REPORT_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>

#include "client/commands.h"

namespace autoaccel {

struct ReportFlags {
  std::string job_id;
  std::string html;               // the file to write
  std::string tokens;             // "1T"; empty: no time or cost to train
  double price_per_gpu_hour = 0;  // 0: days only
};

// Adds the `report` subcommand, its flags bound to `*flags`.
CLI::App* AddReportCommand(CLI::App* app, ReportFlags* flags);

// Writes the report of the job to the HTML file (replaced whole: written to
// a temporary file beside it, then renamed). Prints where it went (with
// --json, {"job_id", "html", "bytes", "trials"}). Exit code 0, 2 for a bad
// --tokens or --price-per-gpu-hour (before any RPC), or 1 when an RPC fails
// or the file cannot be written (one line on c.err). A failed ListWorkers
// only costs the device-memory line (the report says why).
int ReportCommand(const ClientContext& c, const ReportFlags& flags);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_REPORT_COMMAND_H_
