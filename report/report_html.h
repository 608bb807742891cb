// `autoaccel report JOB --html FILE`: one self-contained HTML page about a
// tuning job that opens in any browser with no network access (inline CSS,
// inline SVG charts, one small inline script that sorts the trial table; a
// Content-Security-Policy forbids loading anything else). Sections, each an
// element with its id:
//   answer              the best strategy and its figures; with `tokens`,
//                       the days (and with a price the cost) to train them
//                       at the job's world size at the answer's measured
//                       tokens/s, the ends from its 95% interval
//   settings            the job's request, search and timing
//   throughput-memory   tokens/s against peak memory per trial, the Pareto
//                       front and the device-memory line
//   best-over-time      the best tokens/s found by each moment of the job
//   predicted-measured  the cost model's predictions against the
//                       measurements (or a line saying there were none)
//   dimensions          per strategy dimension, tokens/s by value
//   trials              every trial that ran
// Every string that comes from the job (model, reasons, messages) is
// HTML-escaped; none reaches the script. Pure; any thread.
#ifndef AUTOACCEL_REPORT_REPORT_HTML_H_
#define AUTOACCEL_REPORT_REPORT_HTML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/autoaccel.pb.h"
#include "report/report_data.h"

namespace autoaccel {

struct ReportInput {
  v1::Job job;
  std::vector<v1::Trial> trials;  // in proposal order; PRUNED ones are ignored
  DeviceMemory device_memory;     // bytes 0: the line is left out and the note says why
  double generated_at = 0;        // unix seconds, printed in the footer
  // `report --tokens N --price-per-gpu-hour P`: time and cost to train N
  // tokens (0: not asked); a price of 0 gives the days only.
  int64_t tokens = 0;
  double price_per_gpu_hour = 0;
};

std::string ReportHtml(const ReportInput& input);

// The page's style sheet (what its <style> holds), for other pages that
// show the same sections (the coordinator's dashboard serves it as a file).
absl::string_view ReportStyle();

}  // namespace autoaccel

#endif  // AUTOACCEL_REPORT_REPORT_HTML_H_
