// The coordinator's worker pool: which workers registered, whether they are
// healthy, what their devices are and which trial attempt holds each device,
// and the rendezvous ports of multi-rank trials on their hosts.
//
// A worker registers (again after a restart), heartbeats, and is declared
// lost after a silence; its devices stay in the pool's list but are never
// placed while it is unhealthy. A trial attempt's ranks are placed as one
// gang (all devices or none) and each rank is released when its RunTrial
// answers, whatever became of its trial: a device is never given to two
// ranks at once.
//
// Thread-safe: every method may be called from any thread. The job manager
// calls it with its own mutex held (lock order: job manager, then pool);
// the pool never calls out.
#ifndef AUTOACCEL_SERVER_WORKER_POOL_H_
#define AUTOACCEL_SERVER_WORKER_POOL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/autoaccel.pb.h"
#include "search/cost_model.h"
#include "server/coordinator_metrics.h"
#include "server/rendezvous_ports.h"
#include "server/trial_executor.h"

namespace autoaccel {

// Rendezvous ports of a worker that registers without a range.
inline constexpr int kDefaultRendezvousPortMin = 29500;
inline constexpr int kDefaultRendezvousPortMax = 29999;

// The host part of a worker address: "host:port" -> "host", "[::1]:port" ->
// "::1"; an address without a port is returned as it is.
std::string HostOfAddress(const std::string& address);

// One rank of a placed gang.
struct PlacedRank {
  std::string worker_id;
  std::string address;
  std::string session_token;  // the worker's, when the gang was placed
  bool tls = false;           // the worker serves TLS
  WorkerEndpoint endpoint() const { return WorkerEndpoint{address, session_token, tls}; }
  int device_index = 0;  // position in the worker's device list
  int local_rank = 0;    // index among the gang's ranks on this worker
};

// A gang placed for one attempt of one trial: its ranks (a worker's ranks
// adjacent) and, for more than one rank, the rendezvous port held on rank
// 0's host.
struct Gang {
  std::vector<PlacedRank> ranks;
  std::string master_host;  // HostOfAddress(ranks[0].address)
  int master_port = 0;      // 0 for a single rank
};

// A worker declared lost by ExpireSilent().
struct LostWorker {
  std::string worker_id;
  absl::Duration silent;
};

// Worker ids bound to identity keys at most (a pool of 1,000 workers
// restarting under new ids for years stays below it).
inline constexpr size_t kMaxWorkerIdentities = 100000;

class WorkerPool {
 public:
  // `clock` must outlive the pool.
  explicit WorkerPool(const Clock* clock) : clock_(clock) {}

  // Adds the worker, or updates a known one (address, devices, port range;
  // devices held by ranks still in flight stay held), and returns the
  // registration's session token: a new random one for a new registration,
  // the current one when the request presents it (the same worker
  // registering again). INVALID_ARGUMENT naming the field for a request
  // without id, address or devices, or with a bad port range;
  // ALREADY_EXISTS for the id of a healthy worker without its session token
  // (no takeover; once that worker is lost, its id may register anew);
  // PERMISSION_DENIED for an id bound to another identity key: the first
  // registration of an id that presents a key (RegisterRequest.identity_key)
  // binds the id to it for the pool's life, through losses, leaves and
  // forgetting, so only that worker registers it again; RESOURCE_EXHAUSTED
  // once kMaxWorkerIdentities ids are bound. Logs a warning for each way the
  // worker's host is oversubscribed.
  absl::StatusOr<std::string> Register(const v1::RegisterRequest& request);
  // NOT_FOUND for a worker that never registered, was forgotten (it should
  // register again) or left; PERMISSION_DENIED when `session_token` is not
  // its registration's. `timing_jitter` > 0: a new measurement of the
  // worker's (HeartbeatRequest.timing_jitter; kept when finite and at most
  // 100). Returns true when the worker had been unhealthy and is back.
  absl::StatusOr<bool> Heartbeat(const std::string& worker_id, const std::string& session_token,
                                 double timing_jitter = 0);
  // The worker stops (it said so: WorkerRegistry.Leave): never placed
  // again, and forgotten once it holds no device (at once, or when its last
  // rank is released). NOT_FOUND and PERMISSION_DENIED as Heartbeat. A
  // registration under its id later is a new one.
  absl::Status Leave(const std::string& worker_id, const std::string& session_token);
  // Every worker with its health, warnings and each device's holder; a
  // worker that left is not among them.
  std::vector<v1::Worker> List() const;
  // A page of List(): the workers after id `after` ("" from the first), at
  // most `limit` of them and fewer once their encoded size would pass
  // `max_bytes` (at least one); `next` is the last one's id when more
  // follow, "" otherwise.
  struct Page {
    std::vector<v1::Worker> workers;
    std::string next;
  };
  Page List(const std::string& after, int limit, size_t max_bytes) const;
  // The address, TLS and session token of worker `worker_id`, healthy or
  // not; NOT_FOUND when it never registered, was forgotten or left.
  absl::StatusOr<WorkerEndpoint> Endpoint(const std::string& worker_id) const;
  // How many workers are healthy, quarantined and lost, and their devices
  // by type: free, held, or unavailable (free on a worker that is not
  // usable), for the metrics.
  PoolCensus Census() const;

  // Declares lost every healthy worker silent for longer than `timeout`.
  std::vector<LostWorker> ExpireSilent(absl::Duration timeout);
  // Removes workers silent for longer than `after` that hold no device, so
  // the pool does not grow with every worker that ever registered; returns
  // their ids. A forgotten worker's heartbeat answers NOT_FOUND and it
  // registers again.
  std::vector<std::string> ForgetSilent(absl::Duration after);
  // Keeps new trials off a worker that could not be reached until it
  // heartbeats again. Returns true if it was healthy until now.
  bool MarkUnreachable(const std::string& worker_id);
  // A rank's answer from the worker: `infrastructure` when it failed for a
  // reason outside its strategy (`reason`), else it ran. After `limit` such
  // failures in a row the worker is quarantined for `duration`: healthy, but
  // neither counted nor placed (its List warnings say until when and why);
  // an answer that ran resets the count.
  void RecordRankAnswer(const std::string& worker_id, bool infrastructure,
                        const std::string& reason, int limit, absl::Duration duration);

  // The worker's figures could not be true (server/measurement_check.h):
  // quarantined for `duration` from now, whatever it did before, with
  // `reason` in its List warnings. NOT_FOUND-free: an unknown id is ignored.
  void Distrust(const std::string& worker_id, const std::string& reason, absl::Duration duration);
  // What device `device_index` of worker `worker_id` can do at most, as the
  // coordinator knows it: the fastest precision's peak (FLOP/s; a CUDA
  // device the device catalog names: the catalog's, else the registered
  // one) and the memory a rank may use (a cpu device: its host's, when the
  // worker reported it). Zeros for what is unknown, or an unknown device.
  struct DeviceCeiling {
    double peak_flops = 0;
    bool peak_from_catalog = false;
    int64_t memory_bytes = 0;
  };
  DeviceCeiling CeilingOf(const std::string& worker_id, int device_index) const;
  // Usable workers with devices of `type` (offering `launcher`, when given).
  int CountWorkers(const std::string& type, const std::string& launcher = "") const;

  // Devices of `type` on healthy workers, free or not; with `launcher`,
  // only on the workers that offer it.
  int CountDevices(const std::string& type, const std::string& launcher = "") const;
  // The largest timing jitter among the usable workers with devices of
  // `type` (and `launcher`, when given), with that worker's id; {0, ""}
  // when none reported one.
  std::pair<double, std::string> TimingJitter(const std::string& type,
                                              const std::string& launcher = "") const;
  // The launcher named `name` as the healthy workers that offer it define
  // it (v1::Launcher: format and dimensions). FAILED_PRECONDITION when none
  // offers it (listing the launchers offered) or when two define it
  // differently.
  absl::StatusOr<v1::Launcher> FindLauncher(const std::string& name) const;
  // What the pool knows of its devices of `type` for the cost model: the
  // smallest memory (a cpu device's share of an oversubscribed host) and
  // the first peak among the healthy workers' devices, its fp8 0 when any
  // of them is known to have no fp8 (a peak known, fp8's 0: a trial may
  // land there). A CUDA device whose
  // name is a GPU of the device catalog (search/device_catalog.h) adds the
  // catalog's memory bandwidth and links, and devices per node = that
  // worker's devices of the type (a worker owns one node's GPUs), so the
  // collective terms know which groups cross nodes.
  DeviceSpec DeviceSpecFor(const std::string& type) const;

  // Places `count` free devices of `type` on healthy workers for attempt
  // `attempt` of `trial_id` and holds them: packed onto as few workers as
  // possible, all or nothing; count > 1 also holds a free rendezvous port of
  // rank 0's host. With `launcher`, only on workers that offer it (""
  // places on any). With `avoid` (a measurement to be repeated elsewhere:
  // the workers that measured it), not on those workers as long as the
  // other usable workers have `count` devices of `type` (free or not); when
  // they have not, anywhere. nullopt when the pool cannot place the gang
  // now.
  std::optional<Gang> Place(const std::string& type, int count, const std::string& trial_id,
                            int attempt, const std::string& launcher = "",
                            const std::set<std::string>& avoid = {});
  // Holds device `device_index` of worker `worker_id` for rank `rank` of
  // the attempt, which already runs there (a coordinator taking up its
  // trials after a restart; RegisterRequest.running_ranks), and for rank 0
  // with a `rendezvous_port` > 0 that port of the worker's host too (not
  // when another trial was given it meanwhile: then only the device).
  // nullopt when the worker or device is unknown or the device is held by
  // another rank.
  std::optional<PlacedRank> Hold(const std::string& worker_id, int device_index,
                                 const std::string& trial_id, int attempt, int rank,
                                 int rendezvous_port = 0);
  // Frees the device (and rank 0's rendezvous port) that rank `rank` of the
  // attempt holds. Idempotent.
  void Release(const std::string& trial_id, int attempt, int rank);
  // Keeps `port` of `host` out of use until `until` (a trial failed on it).
  void QuarantinePort(const std::string& host, int port, absl::Time until);

 private:
  struct WorkerState {
    v1::Worker info;
    std::string session_token;         // this registration's (RegisterResponse)
    std::vector<std::string> held_by;  // trial id per device, "" when free
    absl::Time last_seen;
    bool healthy = true;
    bool left = false;                // Leave: forgotten once it holds nothing
    int infrastructure_failures = 0;  // in a row
    absl::Time quarantined_until = absl::InfinitePast();
    std::string quarantine_reason;
  };
  // The worker `worker_id` registered with `session_token` and not left;
  // NOT_FOUND / PERMISSION_DENIED as Heartbeat says.
  absl::StatusOr<WorkerState*> SessionLocked(const std::string& worker_id,
                                             const std::string& session_token)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Devices of `type` on usable workers offering `launcher` ("" any), free
  // or not, those of the workers in `except` aside.
  int CountDevicesLocked(const std::string& type, const std::string& launcher,
                         const std::set<std::string>& except) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Some device of `w` is held by a rank in flight.
  static bool HoldsAny(const WorkerState& w);
  // Healthy and not quarantined: may get new trials.
  bool UsableLocked(const WorkerState& w) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return UsableAt(w, clock_->Now());
  }
  static bool UsableAt(const WorkerState& w, absl::Time now) {
    return w.healthy && now >= w.quarantined_until;
  }
  // What a placed rank holds until it is released.
  struct RankHold {
    std::string worker_id;
    int device_index = 0;
    int port = 0;      // rank 0 of a multi-rank gang: its rendezvous port
    std::string host;  // ... on this host
  };
  using RankKey = std::tuple<std::string, int, int>;  // (trial id, attempt, rank)
  // What the healthy workers on one host offer together, against what the
  // host has (as the workers reported it; 0 = unknown).
  struct HostShare {
    int cores = 0;
    int64_t memory_bytes = 0;
    int cpu_slots = 0;
    int64_t cpu_memory_bytes = 0;
  };

  HostShare HostShareLocked(const std::string& host) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A device's memory as the search counts it: a cpu device whose host's
  // workers claim more memory than the host has gets its share.
  int64_t EffectiveMemoryLocked(const WorkerState& w, const v1::Device& d) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Why the workers on `w`'s host oversubscribe it (empty: they do not).
  std::vector<std::string> HostWarningsLocked(const WorkerState& w) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // `w` as List shows it: health, warnings, each device's holder.
  v1::Worker InfoLocked(const WorkerState& w) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Lowest free, unquarantined port of the worker's range on its host; 0
  // when none is free.
  int FreePortLocked(const WorkerState& w) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, WorkerState> workers_ ABSL_GUARDED_BY(mu_);  // by worker id
  std::map<RankKey, RankHold> holds_ ABSL_GUARDED_BY(mu_);
  // Worker id -> the identity key it registered with first (Register).
  std::map<std::string, std::string> identities_ ABSL_GUARDED_BY(mu_);
  RendezvousPorts ports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_WORKER_POOL_H_
