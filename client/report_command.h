// `autoaccel report JOB --html FILE`: fetches the job, its trials and the
// workers' devices, and writes the HTML report (report/report_html.h).
#ifndef AUTOACCEL_CLIENT_REPORT_COMMAND_H_
#define AUTOACCEL_CLIENT_REPORT_COMMAND_H_

#include <string>

#include "client/commands.h"

namespace autoaccel {

// Writes the report of `job_id` to `html_path` (replaced whole: written to a
// temporary file beside it, then renamed). Prints where it went (with --json,
// {"job_id", "html", "bytes", "trials"}). Exit code 0, or 1 when an RPC
// fails or the file cannot be written (one line on c.err). A failed
// ListWorkers only costs the device-memory line (the report says why).
int ReportCommand(const ClientContext& c, const std::string& job_id, const std::string& html_path);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_REPORT_COMMAND_H_
