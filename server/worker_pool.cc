#include "server/worker_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/secret_token.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "search/device_catalog.h"
#include "server/request_limits.h"

namespace autoaccel {
namespace {

// A timing jitter a worker may report: finite, 0 to 100 (x the median).
bool PlausibleJitter(double jitter) {
  return std::isfinite(jitter) && jitter >= 0 && jitter <= 100;
}

// Who holds a rendezvous port: one attempt of one trial.
std::string PortHolder(const std::string& trial_id, int attempt) {
  return absl::StrCat(trial_id, "/a", attempt);
}

}  // namespace

std::string HostOfAddress(const std::string& address) {
  absl::string_view a = address;
  if (absl::ConsumePrefix(&a, "[")) {  // "[v6]:port"
    return std::string(a.substr(0, a.find(']')));
  }
  const size_t colon = a.rfind(':');
  // No port, or a bare IPv6 address (more than one colon): nothing to strip.
  if (colon == absl::string_view::npos || a.find(':') != colon) return address;
  return std::string(a.substr(0, colon));
}

absl::StatusOr<std::string> WorkerPool::Register(const v1::RegisterRequest& req) {
  if (absl::Status s = CheckRegisterRequestLimits(req); !s.ok()) return s;  // sizes, counts
  if (req.worker_id().empty()) return absl::InvalidArgumentError("worker_id: missing");
  if (req.address().empty()) return absl::InvalidArgumentError("address: missing");
  if (req.devices().empty()) return absl::InvalidArgumentError("devices: at least one needed");
  int port_min = req.rendezvous_port_min(), port_max = req.rendezvous_port_max();
  if (port_min == 0 && port_max == 0) {  // a worker that does not say
    port_min = kDefaultRendezvousPortMin;
    port_max = kDefaultRendezvousPortMax;
  }
  if (port_min < 1 || port_max > 65535 || port_min > port_max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous_port_min, rendezvous_port_max: expected 1 <= min <= max <= 65535, got ",
        port_min, "-", port_max));
  }
  for (int i = 0; i < req.launchers_size(); ++i) {
    const std::string& name = req.launchers(i).name();
    if (name.empty())
      return absl::InvalidArgumentError(absl::StrCat("launchers[", i, "]: no name"));
    for (int j = 0; j < i; ++j) {
      if (req.launchers(j).name() == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("launchers[", i, "]: '", name, "' given twice"));
      }
    }
  }
  absl::MutexLock lock(&mu_);
  if (auto bound = identities_.find(req.worker_id()); bound != identities_.end()) {
    if (!SecretTokensEqual(req.identity_key(), bound->second)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "worker_id: '", req.worker_id(),
          "' belongs to another worker (its identity key, kept in that worker's --work-dir as "
          "identity-*.key, is not this one's): choose another --id, or run the worker with its "
          "own work dir"));
    }
  } else if (!req.identity_key().empty()) {
    if (identities_.size() >= kMaxWorkerIdentities) {
      return absl::ResourceExhaustedError(
          absl::StrCat("worker_id: ", kMaxWorkerIdentities,
                       " worker ids are bound already; restart the coordinator to forget them"));
    }
    identities_[req.worker_id()] = req.identity_key();
  }
  WorkerState& w = workers_[req.worker_id()];
  const bool known = !w.info.worker_id().empty();
  const bool same_session = known && SecretTokensEqual(req.session_token(), w.session_token);
  if (known && !same_session) {
    if (w.healthy) {
      return absl::AlreadyExistsError(absl::StrCat(
          "worker_id: '", req.worker_id(), "' is registered by a live worker at ", w.info.address(),
          " (heard from ",
          absl::FormatDuration(absl::Trunc(clock_->Now() - w.last_seen, absl::Seconds(1))),
          " ago); a worker restarted under that id is accepted once the old one is declared "
          "lost"));
    }
    spdlog::info("worker {} registers anew (its previous registration was lost)", req.worker_id());
  }
  if (!same_session) w.session_token = NewSecretToken();
  w.info.mutable_launchers()->CopyFrom(req.launchers());
  w.info.set_tls(req.tls());
  w.info.set_insecure(req.insecure());
  w.info.set_worker_id(req.worker_id());
  w.info.set_address(req.address());
  w.info.mutable_devices()->CopyFrom(req.devices());
  // Ports held by trials still in flight stay held (their rank 0 answers and
  // frees them), even if they fall outside a new range.
  w.info.set_rendezvous_port_min(port_min);
  w.info.set_rendezvous_port_max(port_max);
  w.info.set_host_cpu_cores(std::max(0, req.host_cpu_cores()));
  w.info.set_host_memory_bytes(std::max<int64_t>(0, req.host_memory_bytes()));
  w.info.set_timing_jitter(PlausibleJitter(req.timing_jitter()) ? req.timing_jitter() : 0);
  if (!known) w.info.set_registered_at(UnixSecondsOrZero(clock_->Now()));
  // Keep holds of ranks still in flight; their RPCs will come back and free them.
  w.held_by.resize(req.devices_size());
  w.last_seen = clock_->Now();
  w.healthy = true;
  w.left = false;
  spdlog::info("worker {} registered at {} with {} device(s)", req.worker_id(), req.address(),
               req.devices_size());
  if (!req.insecure().empty()) {
    spdlog::warn("worker {} runs unprotected: {}", req.worker_id(), req.insecure());
  }
  for (const std::string& warning : HostWarningsLocked(w)) spdlog::warn("{}", warning);
  return w.session_token;
}

absl::StatusOr<WorkerPool::WorkerState*> WorkerPool::SessionLocked(
    const std::string& worker_id, const std::string& session_token) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.left) {
    return absl::NotFoundError(
        absl::StrCat("worker_id: worker '", absl::CHexEscape(worker_id), "' is not registered"));
  }
  if (!SecretTokensEqual(session_token, it->second.session_token)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", worker_id, ": the session token is not its current registration's"));
  }
  return &it->second;
}

absl::StatusOr<WorkerEndpoint> WorkerPool::Endpoint(const std::string& worker_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.left) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id,
                                            " is not in the pool any more (it left, or went "
                                            "silent and was forgotten)"));
  }
  return WorkerEndpoint{it->second.info.address(), it->second.session_token, it->second.info.tls()};
}

bool WorkerPool::HoldsAny(const WorkerState& w) {
  return std::any_of(w.held_by.begin(), w.held_by.end(),
                     [](const std::string& t) { return !t.empty(); });
}

absl::StatusOr<bool> WorkerPool::Heartbeat(const std::string& worker_id,
                                           const std::string& session_token, double timing_jitter) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(WorkerState* const w, SessionLocked(worker_id, session_token));
  w->last_seen = clock_->Now();
  if (timing_jitter > 0 && PlausibleJitter(timing_jitter)) w->info.set_timing_jitter(timing_jitter);
  if (w->healthy) return false;
  spdlog::info("worker {} is back", worker_id);
  w->healthy = true;
  return true;
}

absl::Status WorkerPool::Leave(const std::string& worker_id, const std::string& session_token) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(WorkerState* const w, SessionLocked(worker_id, session_token));
  const bool holds = HoldsAny(*w);
  spdlog::info("worker {} left{}", worker_id, holds ? " (once its ranks in flight answer)" : "");
  if (!holds) {
    workers_.erase(worker_id);
  } else {
    w->healthy = false;
    w->left = true;
  }
  return absl::OkStatus();
}

v1::Worker WorkerPool::InfoLocked(const WorkerState& w) const {
  v1::Worker info = w.info;
  for (const std::string& warning : HostWarningsLocked(w)) info.add_warnings(warning);
  if (w.quarantined_until > clock_->Now()) {
    info.add_warnings(absl::StrCat(
        "quarantined for ",
        absl::FormatDuration(absl::Trunc(w.quarantined_until - clock_->Now(), absl::Seconds(1))),
        ": ", w.quarantine_reason));
  }
  info.set_healthy(w.healthy);
  info.set_last_seen(UnixSecondsOrZero(w.last_seen));
  for (int i = 0; i < info.devices_size() && i < static_cast<int>(w.held_by.size()); ++i) {
    info.mutable_devices(i)->set_held_by_trial(w.held_by[i]);
  }
  return info;
}

std::vector<v1::Worker> WorkerPool::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<v1::Worker> out;
  for (const auto& [id, w] : workers_) {
    if (!w.left) out.push_back(InfoLocked(w));
  }
  return out;
}

WorkerPool::Page WorkerPool::List(const std::string& after, int limit, size_t max_bytes) const {
  absl::ReaderMutexLock lock(&mu_);
  Page page;
  size_t bytes = 0;
  for (auto it = workers_.upper_bound(after); it != workers_.end(); ++it) {
    if (it->second.left) continue;
    v1::Worker info = InfoLocked(it->second);
    const size_t size = info.ByteSizeLong() + 8;  // the field's tag and length
    if (!page.workers.empty() &&
        (static_cast<int>(page.workers.size()) >= limit || bytes + size > max_bytes)) {
      page.next = page.workers.back().worker_id();
      break;
    }
    bytes += size;
    page.workers.push_back(std::move(info));
  }
  return page;
}

PoolCensus WorkerPool::Census() const {
  absl::ReaderMutexLock lock(&mu_);
  PoolCensus census;
  for (const auto& [id, w] : workers_) {
    const bool usable = UsableLocked(w);
    if (w.left) {
      // Neither healthy nor lost; its devices in flight still count as held.
    } else if (!w.healthy) {
      ++census.workers_lost;
    } else if (!usable) {
      ++census.workers_quarantined;
    } else {
      ++census.workers_healthy;
    }
    for (int i = 0; i < w.info.devices_size(); ++i) {
      PoolCensus::Devices& d = census.devices[w.info.devices(i).type()];
      if (i < static_cast<int>(w.held_by.size()) && !w.held_by[i].empty()) {
        ++d.held;
      } else if (usable) {
        ++d.free;
      } else {
        ++d.unavailable;
      }
    }
  }
  return census;
}

std::vector<LostWorker> WorkerPool::ExpireSilent(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::vector<LostWorker> lost;
  for (auto& [id, w] : workers_) {
    if (!w.healthy || now - w.last_seen <= timeout) continue;
    w.healthy = false;
    spdlog::warn("worker {} lost: no heartbeat for {}", id,
                 absl::FormatDuration(now - w.last_seen));
    lost.push_back(LostWorker{id, now - w.last_seen});
  }
  return lost;
}

std::vector<std::string> WorkerPool::ForgetSilent(absl::Duration after) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::vector<std::string> forgotten;
  for (auto it = workers_.begin(); it != workers_.end();) {
    const WorkerState& w = it->second;
    const bool holds = HoldsAny(w);
    if (w.healthy || holds || now - w.last_seen <= after) {
      ++it;
      continue;
    }
    spdlog::info("worker {} forgotten: silent for {}", it->first,
                 absl::FormatDuration(absl::Trunc(now - w.last_seen, absl::Seconds(1))));
    forgotten.push_back(it->first);
    it = workers_.erase(it);
  }
  return forgotten;
}

void WorkerPool::RecordRankAnswer(const std::string& worker_id, bool infrastructure,
                                  const std::string& reason, int limit, absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  WorkerState& w = it->second;
  if (!infrastructure) {
    w.infrastructure_failures = 0;
    return;
  }
  if (++w.infrastructure_failures < limit) return;
  w.infrastructure_failures = 0;
  w.quarantined_until = clock_->Now() + duration;
  w.quarantine_reason =
      absl::StrCat(limit, " ranks in a row failed outside their strategy (last: ", reason, ")");
  spdlog::warn("worker {} quarantined for {}: {}", worker_id, absl::FormatDuration(duration),
               w.quarantine_reason);
}

void WorkerPool::Distrust(const std::string& worker_id, const std::string& reason,
                          absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  WorkerState& w = it->second;
  w.quarantined_until = std::max(w.quarantined_until, clock_->Now() + duration);
  w.quarantine_reason = absl::StrCat("its figures cannot be true: ", reason);
  spdlog::warn("worker {} quarantined for {}: {}", worker_id, absl::FormatDuration(duration),
               w.quarantine_reason);
}

bool WorkerPool::MarkUnreachable(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto w = workers_.find(worker_id);
  if (w == workers_.end() || !w->second.healthy) return false;
  w->second.healthy = false;
  return true;
}

namespace {

// Whether the worker may run a trial of `launcher` ("": the engine's trials,
// which every worker runs).
bool Offers(const v1::Worker& worker, const std::string& launcher) {
  if (launcher.empty()) return true;
  return std::any_of(worker.launchers().begin(), worker.launchers().end(),
                     [&](const v1::Launcher& l) { return l.name() == launcher; });
}

bool SameLauncher(const v1::Launcher& a, const v1::Launcher& b) {
  return a.name() == b.name() && a.format() == b.format() &&
         std::equal(a.dimensions().begin(), a.dimensions().end(), b.dimensions().begin(),
                    b.dimensions().end());
}

}  // namespace

absl::StatusOr<v1::Launcher> WorkerPool::FindLauncher(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  std::optional<v1::Launcher> found;
  std::string found_on;
  std::vector<std::string> offered;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy) continue;
    for (const v1::Launcher& l : w.info.launchers()) {
      if (l.name() != name) {
        if (std::find(offered.begin(), offered.end(), l.name()) == offered.end()) {
          offered.push_back(l.name());
        }
        continue;
      }
      if (!found) {
        found = l;
        found_on = id;
      } else if (!SameLauncher(*found, l)) {
        return absl::FailedPreconditionError(
            absl::StrCat("launcher: workers ", found_on, " and ", id, " define '", name,
                         "' differently (format '", found->format(), "' vs '", l.format(),
                         "', or its dimensions); make their --launchers files agree"));
      }
    }
  }
  if (found) return *found;
  std::sort(offered.begin(), offered.end());
  return absl::FailedPreconditionError(absl::StrCat(
      "launcher: no healthy worker offers '", name, "' (",
      offered.empty() ? std::string("none offers a launcher; start workers with --launchers FILE")
                      : absl::StrCat("offered: ", absl::StrJoin(offered, ", ")),
      ")"));
}

int WorkerPool::CountWorkers(const std::string& type, const std::string& launcher) const {
  absl::ReaderMutexLock lock(&mu_);
  int count = 0;
  for (const auto& [id, w] : workers_) {
    if (!UsableLocked(w) || !Offers(w.info, launcher)) continue;
    count += std::any_of(w.info.devices().begin(), w.info.devices().end(),
                         [&type](const v1::Device& d) { return d.type() == type; });
  }
  return count;
}

int WorkerPool::CountDevices(const std::string& type, const std::string& launcher) const {
  absl::ReaderMutexLock lock(&mu_);
  return CountDevicesLocked(type, launcher, {});
}

int WorkerPool::CountDevicesLocked(const std::string& type, const std::string& launcher,
                                   const std::set<std::string>& except) const {
  int count = 0;
  const absl::Time now = clock_->Now();
  for (const auto& [id, w] : workers_) {
    if (except.count(id) > 0 || !UsableAt(w, now) || !Offers(w.info, launcher)) continue;
    for (const v1::Device& d : w.info.devices()) count += d.type() == type ? 1 : 0;
  }
  return count;
}

std::pair<double, std::string> WorkerPool::TimingJitter(const std::string& type,
                                                        const std::string& launcher) const {
  absl::ReaderMutexLock lock(&mu_);
  std::pair<double, std::string> most{0, ""};
  for (const auto& [id, w] : workers_) {
    if (!UsableLocked(w) || !Offers(w.info, launcher)) continue;
    const bool has_type = std::any_of(w.info.devices().begin(), w.info.devices().end(),
                                      [&type](const v1::Device& d) { return d.type() == type; });
    if (has_type && w.info.timing_jitter() > most.first) most = {w.info.timing_jitter(), id};
  }
  return most;
}

WorkerPool::HostShare WorkerPool::HostShareLocked(const std::string& host) const {
  HostShare share;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy || HostOfAddress(w.info.address()) != host) continue;
    share.cores = std::max(share.cores, static_cast<int>(w.info.host_cpu_cores()));
    share.memory_bytes = std::max(share.memory_bytes, w.info.host_memory_bytes());
    for (const v1::Device& d : w.info.devices()) {
      if (d.type() != "cpu") continue;
      ++share.cpu_slots;
      share.cpu_memory_bytes += d.memory_bytes();
    }
  }
  return share;
}

int64_t WorkerPool::EffectiveMemoryLocked(const WorkerState& w, const v1::Device& d) const {
  if (d.type() != "cpu") return d.memory_bytes();
  const HostShare share = HostShareLocked(HostOfAddress(w.info.address()));
  if (share.memory_bytes <= 0 || share.cpu_memory_bytes <= share.memory_bytes) {
    return d.memory_bytes();
  }
  // Workers on one host claim more than it has: each slot gets its share.
  return static_cast<int64_t>(double(d.memory_bytes()) * double(share.memory_bytes) /
                              double(share.cpu_memory_bytes));
}

std::vector<std::string> WorkerPool::HostWarningsLocked(const WorkerState& w) const {
  std::vector<std::string> warnings;
  const std::string host = HostOfAddress(w.info.address());
  const HostShare share = HostShareLocked(host);
  if (share.cores > 0 && share.cpu_slots > share.cores) {
    warnings.push_back(absl::StrFormat(
        "the workers on %s offer %d cpu slots on %d cores: trials share cores, so their "
        "measurements are noisy and their ranking unreliable",
        host, share.cpu_slots, share.cores));
  }
  if (share.memory_bytes > 0 && share.cpu_memory_bytes > share.memory_bytes) {
    warnings.push_back(absl::StrFormat(
        "the workers on %s claim %.1f GiB of cpu device memory on a host with %.1f GiB: each "
        "slot counts with its share (give --device-memory to each worker)",
        host, share.cpu_memory_bytes / double(1 << 30), share.memory_bytes / double(1 << 30)));
  }
  return warnings;
}

namespace {

// The catalog's figures of the GPU named `gpu_name` (when it is one), with
// devices per node = `worker`'s CUDA devices.
// The built-in catalog's entry for a GPU a worker registered, or null.
const CatalogDevice* CatalogGpu(const std::string& gpu_name) {
  static const absl::StatusOr<DeviceCatalog>* const catalog =
      new absl::StatusOr<DeviceCatalog>(DeviceCatalog::BuiltIn());
  return catalog->ok() ? (*catalog)->FindGpu(gpu_name) : nullptr;
}

void AddCatalogFigures(const std::string& gpu_name, const v1::Worker& worker, DeviceSpec* device) {
  const CatalogDevice* known = CatalogGpu(gpu_name);
  if (known == nullptr) return;
  device->memory_bandwidth_bytes_per_s = known->spec.memory_bandwidth_bytes_per_s;
  device->intra_node = known->spec.intra_node;
  device->inter_node = known->spec.inter_node;
  device->devices_per_node =
      static_cast<int>(std::count_if(worker.devices().begin(), worker.devices().end(),
                                     [](const v1::Device& d) { return d.type() == "cuda"; }));
}

}  // namespace

WorkerPool::DeviceCeiling WorkerPool::CeilingOf(const std::string& worker_id,
                                                int device_index) const {
  absl::ReaderMutexLock lock(&mu_);
  DeviceCeiling out;
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || device_index < 0 || device_index >= it->second.info.devices_size()) {
    return out;
  }
  const v1::Worker& w = it->second.info;
  const v1::Device& d = w.devices(device_index);
  PeakTflops peak = FromProto(d.peak_tflops());
  if (d.type() == "cuda") {
    if (const CatalogDevice* known = CatalogGpu(d.name()); known != nullptr) {
      peak = known->spec.peak;
      out.peak_from_catalog = true;
    }
  }
  out.peak_flops = std::max({peak.fp32, peak.bf16, peak.fp16}) * 1e12;
  out.memory_bytes = d.type() == "cpu" ? std::max<int64_t>(d.memory_bytes(), w.host_memory_bytes())
                                       : d.memory_bytes();
  return out;
}

DeviceSpec WorkerPool::DeviceSpecFor(const std::string& type) const {
  absl::ReaderMutexLock lock(&mu_);
  DeviceSpec device;
  device.type = type;
  bool first = true;
  bool some_lack_fp8 = false;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy) continue;
    for (const v1::Device& d : w.info.devices()) {
      if (d.type() != type) continue;
      const PeakTflops peak = FromProto(d.peak_tflops());
      some_lack_fp8 |= peak.fp8 == 0 && !(peak == PeakTflops{});
      const int64_t memory = EffectiveMemoryLocked(w, d);
      if (first) {
        device.peak = peak;
        device.memory_bytes = memory;
        first = false;
        if (type == "cuda") AddCatalogFigures(d.name(), w.info, &device);
      } else if (memory > 0 && (device.memory_bytes == 0 || memory < device.memory_bytes)) {
        device.memory_bytes = memory;
      }
    }
  }
  // A trial may land on any of them: fp8 only where every one has it.
  if (some_lack_fp8) device.peak.fp8 = 0;
  return device;
}

int WorkerPool::FreePortLocked(const WorkerState& w) const {
  return ports_.Free(HostOfAddress(w.info.address()), w.info.rendezvous_port_min(),
                     w.info.rendezvous_port_max(), clock_->Now());
}

std::optional<Gang> WorkerPool::Place(const std::string& type, int count,
                                      const std::string& trial_id, int attempt,
                                      const std::string& launcher,
                                      const std::set<std::string>& avoid) {
  absl::MutexLock lock(&mu_);
  // Elsewhere than `avoid` only when elsewhere can ever hold the gang.
  const bool avoiding = !avoid.empty() && CountDevicesLocked(type, launcher, avoid) >= count;
  // One pass over the pool counting free devices (called for every trial
  // placed: no allocation per worker, the clock read once).
  struct Candidate {
    const std::string* id;
    WorkerState* w;
    int free;  // devices of `type` free
  };
  std::vector<Candidate> order;
  int total = 0;
  const absl::Time now = clock_->Now();
  for (auto& [id, w] : workers_) {
    if (!UsableAt(w, now) || !Offers(w.info, launcher)) continue;
    if (avoiding && avoid.count(id) > 0) continue;
    int free = 0;
    for (int i = 0; i < w.info.devices_size() && i < static_cast<int>(w.held_by.size()); ++i) {
      free += w.held_by[i].empty() && w.info.devices(i).type() == type;
    }
    total += free;
    if (free > 0) order.push_back(Candidate{&id, &w, free});
  }
  if (count <= 0 || total < count) return std::nullopt;  // all or nothing
  // Packing order: if one worker can hold the whole trial, the one with the
  // fewest free devices that does (bigger holes stay for bigger gangs);
  // otherwise the workers with the most free devices first. Ties by id.
  const auto packs_before = [count](const Candidate& a, const Candidate& b) {
    const bool a_fits = a.free >= count, b_fits = b.free >= count;
    if (a_fits != b_fits) return a_fits;
    return a_fits ? a.free < b.free : a.free > b.free;
  };
  if (count == 1) {
    // Every candidate fits: the first with the fewest free devices.
    std::iter_swap(order.begin(), std::min_element(order.begin(), order.end(), packs_before));
    order.resize(1);
  } else {
    std::stable_sort(order.begin(), order.end(), packs_before);
  }
  Gang gang;
  if (count > 1) {
    // Rank 0 serves the rendezvous store: its worker is the first in packing
    // order with a free port. Moving it ahead never spreads the trial wider.
    auto first = std::find_if(order.begin(), order.end(), [this](const Candidate& c) {
      mu_.AssertReaderHeld();
      return FreePortLocked(*c.w) > 0;
    });
    if (first == order.end()) return std::nullopt;
    gang.master_port = FreePortLocked(*first->w);
    std::rotate(order.begin(), first, first + 1);
  }
  for (const Candidate& c : order) {
    int local = 0;
    for (int i = 0; i < c.w->info.devices_size() && i < static_cast<int>(c.w->held_by.size()) &&
                    static_cast<int>(gang.ranks.size()) < count;
         ++i) {
      if (!c.w->held_by[i].empty() || c.w->info.devices(i).type() != type) continue;
      PlacedRank r;
      r.worker_id = *c.id;
      r.address = c.w->info.address();
      r.session_token = c.w->session_token;
      r.tls = c.w->info.tls();
      r.device_index = i;
      r.local_rank = local++;
      gang.ranks.push_back(r);
    }
  }
  gang.master_host = HostOfAddress(gang.ranks[0].address);
  if (gang.master_port > 0) {
    ports_.Acquire(gang.master_host, gang.master_port, PortHolder(trial_id, attempt));
  }
  for (size_t i = 0; i < gang.ranks.size(); ++i) {
    const PlacedRank& rank = gang.ranks[i];
    workers_[rank.worker_id].held_by[rank.device_index] = trial_id;
    holds_[{trial_id, attempt, static_cast<int>(i)}] = RankHold{
        rank.worker_id, rank.device_index, i == 0 ? gang.master_port : 0, gang.master_host};
  }
  return gang;
}

std::optional<PlacedRank> WorkerPool::Hold(const std::string& worker_id, int device_index,
                                           const std::string& trial_id, int attempt, int rank,
                                           int rendezvous_port) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  WorkerState& w = it->second;
  if (device_index < 0 || device_index >= static_cast<int>(w.held_by.size())) return std::nullopt;
  if (holds_.count({trial_id, attempt, rank})) return std::nullopt;
  if (!w.held_by[device_index].empty()) return std::nullopt;
  w.held_by[device_index] = trial_id;
  RankHold hold{worker_id, device_index, 0, ""};
  if (rank == 0 && rendezvous_port > 0) {
    const std::string host = HostOfAddress(w.info.address());
    if (ports_.HoldInUse(host, rendezvous_port, PortHolder(trial_id, attempt))) {
      hold.port = rendezvous_port;
      hold.host = host;
    } else {
      spdlog::warn(
          "trial {} attempt {}: its rendezvous port {} of {} went to another trial while "
          "no coordinator ran",
          trial_id, attempt, rendezvous_port, host);
    }
  }
  holds_[{trial_id, attempt, rank}] = std::move(hold);
  PlacedRank placed;
  placed.worker_id = worker_id;
  placed.address = w.info.address();
  placed.session_token = w.session_token;
  placed.tls = w.info.tls();
  placed.device_index = device_index;
  return placed;
}

void WorkerPool::Release(const std::string& trial_id, int attempt, int rank) {
  absl::MutexLock lock(&mu_);
  auto hold = holds_.find({trial_id, attempt, rank});
  if (hold == holds_.end()) return;
  auto it = workers_.find(hold->second.worker_id);
  if (it != workers_.end()) {
    auto& held = it->second.held_by;
    const int device = hold->second.device_index;
    if (device >= 0 && device < static_cast<int>(held.size()) && held[device] == trial_id) {
      held[device].clear();
    }
    if (it->second.left && !HoldsAny(it->second)) {
      spdlog::info("worker {} left: its last rank answered", it->first);
      workers_.erase(it);
    }
  }
  // The store lives in rank 0's process: its port is free once it answered.
  if (hold->second.port > 0) {
    ports_.Release(hold->second.host, hold->second.port, PortHolder(trial_id, attempt));
  }
  holds_.erase(hold);
}

void WorkerPool::QuarantinePort(const std::string& host, int port, absl::Time until) {
  absl::MutexLock lock(&mu_);
  ports_.Quarantine(host, port, until);
}

}  // namespace autoaccel
