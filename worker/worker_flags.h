// The worker's command-line values that need more than CLI11's type check:
// each parser turns a flag's text into what the daemon uses, or an
// INVALID_ARGUMENT that names the flag, the allowed form and the text given
// (worker/main.cc prints it and exits 2). Pure apart from ParseDevices,
// which reads the machine's memory size; thread-safe.
#ifndef AUTOACCEL_WORKER_WORKER_FLAGS_H_
#define AUTOACCEL_WORKER_WORKER_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/autoaccel.pb.h"
#include "spec/trial.h"

namespace autoaccel {

// --devices: "cpu:N" (N CPU slots sharing this node's memory, 1 <= N <=
// 1024) or "TYPE:0,1,.." / "TYPE:0-7" (ordinals, each at most once; named
// "TYPE:N", indexed in the order given) for TYPE an accelerator type of
// worker/accelerators.h (cuda, musa, xpu, ...; the types other than cuda
// run launcher trials only). `memory_bytes` (--device-memory) per device:
// for cpu, 0 means physical memory / N; for cuda, 0 stays unknown until
// DescribeDevices (worker/device_discovery.h) asks nvidia-smi; for the
// other types, 0 stays unknown.
absl::StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text, int64_t memory_bytes);

// --rendezvous-ports: "A-B", the ports (1 <= A <= B <= 65535) on which rank
// 0 of a multi-rank trial may serve its rendezvous store.
absl::StatusOr<std::pair<int, int>> ParseRendezvousPorts(const std::string& text);

// --peak-tflops: "fp32=X,bf16=Y,fp16=Z" (TFLOP/s, finite and non-negative;
// any of the three, each at most once, the others 0 = unknown).
absl::StatusOr<PeakTflops> ParsePeakTflops(const std::string& text);

// The address the worker registers (from --listen and --advertise-host):
// the coordinator sends trials to it and the other ranks of a gang whose
// rank 0 runs here meet at its host. It is `advertise_host` when given, else
// the host of `listen` ("HOST:PORT"), except that a wildcard listen host
// ("0.0.0.0", "::", "[::]" or empty), which no other machine can dial, is
// replaced by `hostname`. The port is the one the server bound (`port`).
// IPv6 hosts come back in brackets. Never fails.
std::string AdvertisedAddress(const std::string& listen, int port,
                              const std::string& advertise_host, const std::string& hostname);

// Why ranks on other hosts could not meet a gang whose rank 0 runs on a
// worker registered at `address` ("HOST:PORT", as AdvertisedAddress gives
// it), or "" when this host sees nothing wrong. Wrong: HOST does not resolve
// here, or this host reaches it over loopback (a host name that /etc/hosts
// maps to 127.0.1.1, say), so the gang's process groups would listen where
// no other host can dial. Only meaningful for workers whose coordinator is
// on another host; resolves HOST (may block on DNS).
std::string AdvertisedAddressProblem(const std::string& address);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_WORKER_FLAGS_H_
