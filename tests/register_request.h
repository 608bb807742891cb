// Worker registrations for the coordinator's tests.
#ifndef AUTOACCEL_TESTS_REGISTER_REQUEST_H_
#define AUTOACCEL_TESTS_REGISTER_REQUEST_H_

#include <cstdint>
#include <string>

#include "proto/autoaccel.pb.h"

namespace autoaccel {

// A worker `id` at `address` with `devices` cpu devices of `memory_bytes`
// each and the rendezvous port range [port_min, port_max] (0, 0: the
// default range).
inline v1::RegisterRequest RegisterRequestFor(const std::string& id, const std::string& address,
                                              int devices, int port_min = 0, int port_max = 0,
                                              int64_t memory_bytes = int64_t{1} << 30) {
  v1::RegisterRequest r;
  r.set_worker_id(id);
  r.set_address(address);
  r.set_rendezvous_port_min(port_min);
  r.set_rendezvous_port_max(port_max);
  for (int i = 0; i < devices; ++i) {
    v1::Device* d = r.add_devices();
    d->set_type("cpu");
    d->set_index(i);
    d->set_memory_bytes(memory_bytes);
  }
  return r;
}

}  // namespace autoaccel

#endif  // AUTOACCEL_TESTS_REGISTER_REQUEST_H_
