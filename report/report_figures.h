// The report's three figures as HTML sections, each an inline SVG chart
// (report/svg_chart.h) with a caption, shared by the HTML job report
// (report/report_html.h) and the coordinator's dashboard:
//   ThroughputMemorySection   <section id="throughput-memory">: tokens/s
//                             against peak memory per trial, the Pareto
//                             front, the answer and the device-memory line
//   BestOverTimeSection       <section id="best-over-time">: the best
//                             tokens/s found by each moment of the job
//   PredictedMeasuredSection  <section id="predicted-measured">: the cost
//                             model's predictions against the measurements
//                             (or a line saying there were none)
// Every string from the job is HTML-escaped; no script, no style attribute.
// Pure; any thread.
#ifndef AUTOACCEL_REPORT_REPORT_FIGURES_H_
#define AUTOACCEL_REPORT_REPORT_FIGURES_H_

#include <string>
#include <vector>

#include "proto/autoaccel.pb.h"
#include "report/report_data.h"

namespace autoaccel {

struct FigureInput {
  const v1::Job& job;
  const std::vector<v1::Trial>& trials;  // in proposal order; PRUNED ones are ignored
  const DeviceMemory& device_memory;     // bytes 0: no device-memory line, the note says why
};

std::string ThroughputMemorySection(const FigureInput& in);
std::string BestOverTimeSection(const FigureInput& in);
std::string PredictedMeasuredSection(const FigureInput& in);

}  // namespace autoaccel

#endif  // AUTOACCEL_REPORT_REPORT_FIGURES_H_
