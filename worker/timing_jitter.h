// How much the same small piece of work varies in time on this machine, run
// to run: the noise every measurement on this worker carries (other
// processes, frequency scaling, a busy neighbour on a shared host). The
// worker measures it at start and again every few minutes while no rank of
// its runs, and reports it to the coordinator (RegisterRequest and
// HeartbeatRequest timing_jitter), which shows it in `workers` and warns a
// job whose tolerance is tighter than its pool's jitter.
//
// The kernel is a fixed arithmetic loop on the CPU (a cache-resident
// 48x48 matrix product), so on a GPU worker it measures the host, not the
// GPU. Any thread; blocks for about runs x each.
#ifndef AUTOACCEL_WORKER_TIMING_JITTER_H_
#define AUTOACCEL_WORKER_TIMING_JITTER_H_

#include "absl/time/time.h"

namespace autoaccel {

struct TimingJitterOptions {
  int runs = 21;                                // timings per batch (>= 3)
  int batches = 3;                              // the quietest batch counts
  absl::Duration each = absl::Milliseconds(2);  // the kernel is sized to about this
};

// (p90 - p10) / median of `runs` timings of the kernel (the step-time
// spread of spec/step_statistics.h, so the two compare), the smallest of
// `batches` such batches: a burst (another worker's start-up probe) passes,
// noise that lasts shows in every batch. 0.05 means runs of one piece of
// work differ by about 5%.
double MeasureTimingJitter(const TimingJitterOptions& options = {});

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_TIMING_JITTER_H_
