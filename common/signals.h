#ifndef AUTOACCEL_COMMON_SIGNALS_H_
#define AUTOACCEL_COMMON_SIGNALS_H_

namespace autoaccel {

// Blocks SIGINT and SIGTERM (and SIGHUP when `reload`: a daemon that reloads
// its files on it) in the calling thread and every thread it creates
// afterwards. Call first thing in main(), before any thread starts.
void BlockTerminationSignals(bool reload = false);

// Waits until SIGINT or SIGTERM (or SIGHUP when `reload`) arrives; returns
// the signal number. REQUIRES: BlockTerminationSignals(reload) was called.
int WaitForTerminationSignal(bool reload = false);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_SIGNALS_H_
