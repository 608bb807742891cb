#include "common/signals.h"

#include <pthread.h>

#include <csignal>

namespace autoaccel {
namespace {

sigset_t TerminationSet(bool reload) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (reload) sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockTerminationSignals(bool reload) {
  sigset_t set = TerminationSet(reload);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal(bool reload) {
  sigset_t set = TerminationSet(reload);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace autoaccel
