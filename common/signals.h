#ifndef AUTOACCEL_COMMON_SIGNALS_H_
#define AUTOACCEL_COMMON_SIGNALS_H_

namespace autoaccel {

// Blocks SIGINT and SIGTERM in the calling thread and every thread it creates
// afterwards. Call first thing in main(), before any thread starts.
void BlockTerminationSignals();

// Waits until SIGINT or SIGTERM arrives; returns the signal number.
// REQUIRES: BlockTerminationSignals() was called.
int WaitForTerminationSignal();

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_SIGNALS_H_
