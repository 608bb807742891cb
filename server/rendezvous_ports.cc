#include "server/rendezvous_ports.h"

#include <algorithm>

namespace autoaccel {

int RendezvousPorts::Free(const std::string& host, int min, int max, absl::Time now) const {
  auto it = hosts_.find(host);
  for (int port = std::max(min, 1); port <= max && port <= 65535; ++port) {
    if (it == hosts_.end()) return port;
    if (it->second.held.count(port) > 0) continue;
    auto q = it->second.quarantined.find(port);
    if (q != it->second.quarantined.end() && now < q->second) continue;
    return port;
  }
  return 0;
}

void RendezvousPorts::Acquire(const std::string& host, int port, const std::string& holder) {
  Host& h = hosts_[host];
  h.held[port] = holder;
  h.quarantined.erase(port);
}

bool RendezvousPorts::HoldInUse(const std::string& host, int port, const std::string& holder) {
  Host& h = hosts_[host];
  auto [it, inserted] = h.held.emplace(port, holder);
  return inserted || it->second == holder;
}

void RendezvousPorts::Release(const std::string& host, int port, const std::string& holder) {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return;
  auto held = it->second.held.find(port);
  if (held != it->second.held.end() && held->second == holder) it->second.held.erase(held);
}

void RendezvousPorts::Quarantine(const std::string& host, int port, absl::Time until) {
  absl::Time& t = hosts_[host].quarantined[port];
  t = std::max(t, until);
}

int RendezvousPorts::HeldOn(const std::string& host) const {
  auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : static_cast<int>(it->second.held.size());
}

}  // namespace autoaccel
