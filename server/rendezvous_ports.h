// Rendezvous ports of multi-rank trials, allocated per host.
//
// Rank 0 of a multi-rank trial serves its c10d store on a port of its host.
// Workers that share a host (several daemons on one machine, each owning some
// of its devices) share that host's ports, so the ports are held per host, not
// per worker: two trials never get the same host:port however their workers
// are laid out. A port a trial could not use for a reason outside its strategy
// (another process bound it, a rendezvous that never completed) is kept out
// of use for a while, so the retried trial gets a different one.
//
// Thread-compatible: the caller serialises every call (the job manager's
// mutex).
#ifndef AUTOACCEL_SERVER_RENDEZVOUS_PORTS_H_
#define AUTOACCEL_SERVER_RENDEZVOUS_PORTS_H_

#include <map>
#include <string>

#include "absl/time/time.h"

namespace autoaccel {

class RendezvousPorts {
 public:
  // The lowest port of [min, max] that no trial holds on `host` and that is
  // not quarantined at `now`; 0 when there is none. Holds nothing.
  int Free(const std::string& host, int min, int max, absl::Time now) const;
  // Holds `port` of `host` for `holder` (a trial attempt).
  // REQUIRES: Free() returned it and nothing was acquired since.
  void Acquire(const std::string& host, int port, const std::string& holder);
  // Holds `port` of `host` for `holder`, whose rank 0 already serves on it
  // (a trial taken up after a coordinator restart), quarantined or not.
  // False, holding nothing, when another holder has it.
  bool HoldInUse(const std::string& host, int port, const std::string& holder);
  // Frees `port` of `host` if `holder` holds it; otherwise does nothing.
  void Release(const std::string& host, int port, const std::string& holder);
  // Keeps `port` of `host` out of Free()'s answers until `until`.
  void Quarantine(const std::string& host, int port, absl::Time until);
  // Ports held on `host` now.
  int HeldOn(const std::string& host) const;

 private:
  struct Host {
    std::map<int, std::string> held;        // port -> holder
    std::map<int, absl::Time> quarantined;  // port -> until
  };
  std::map<std::string, Host> hosts_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_RENDEZVOUS_PORTS_H_
