// Which of this machine's addresses faces a given peer.
//
// A multi-rank trial's process groups need an address of this host that the
// other ranks can dial. The ranks all reach the rendezvous host, so the
// address this host's routing table sends packets to that host from is the
// one to offer. The host name is no guide: on a machine whose name resolves
// to 127.0.0.1 (common in containers and network namespaces) it names an
// address no peer can reach.
#ifndef AUTOACCEL_COMMON_LOCAL_ADDRESS_H_
#define AUTOACCEL_COMMON_LOCAL_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

// The local IP address (numeric, IPv6 without brackets) that packets from
// this host to `host` leave from: `host` is resolved (a name, an IPv4
// address, or an IPv6 address with or without brackets) and the kernel is
// asked for the route to its first address; nothing is sent. A local
// address gives itself back (routed over loopback).
// Errors: INVALID_ARGUMENT for an empty host; NOT_FOUND when `host` does not
// resolve; UNAVAILABLE when no route leads to it (the message names the
// host and the system's reason). Thread-safe.
absl::StatusOr<std::string> LocalAddressToward(const std::string& host);

// True for "localhost" (any case), 127.0.0.0/8 and ::1 in any spelling
// (bracketed or not); names are not resolved. common/listen_policy.h's
// IsLoopbackListen asks it of an address's host.
bool IsLoopbackHost(const std::string& host);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_LOCAL_ADDRESS_H_
