#include "engine/distributed.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/local_address.h"
#include "engine/distributed_nccl.h"

namespace autoaccel {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the time from construction to destruction to *seconds (when set).
class CommTimer {
 public:
  explicit CommTimer(double* seconds) : seconds_(seconds), start_(Clock::now()) {}
  ~CommTimer() {
    if (seconds_) *seconds_ += std::chrono::duration<double>(Clock::now() - start_).count();
  }

 private:
  double* seconds_;
  Clock::time_point start_;
};

// An exception's message for a trial's reason: LibTorch's errors without
// the C++ backtrace they carry (a dozen "frame #N" lines nobody can act on).
std::string MessageOf(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

// Where this rank's gloo pairs listen: the interfaces GLOO_SOCKET_IFNAME
// names (comma-separated, as torch.distributed reads it), else one address.
struct GlooPlace {
  std::vector<std::string> interfaces;
  std::string address;
};

// REQUIRES: the rendezvous store at `master_host` was reached.
absl::StatusOr<GlooPlace> GlooPlaceFor(const std::string& master_host) {
  GlooPlace place;
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr && *names != 0) {
    for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
      place.interfaces.emplace_back(absl::StripAsciiWhitespace(name));
    }
    if (!place.interfaces.empty()) return place;
  }
  // Ranks that meet on the loopback interface talk over it; otherwise over
  // the interface that leads to the rendezvous host, which every rank
  // reached (the host name may resolve to an address no peer can dial).
  if (IsLoopbackHost(master_host)) {
    place.address = "127.0.0.1";
    return place;
  }
  absl::StatusOr<std::string> local = LocalAddressToward(master_host);
  if (!local.ok()) {
    return absl::UnavailableError(
        absl::StrCat("no address of this host for the gang's process "
                     "groups (set GLOO_SOCKET_IFNAME to choose one): ",
                     local.status().message()));
  }
  place.address = *std::move(local);
  return place;
}

// The rendezvous store of `world` ranks: rank 0 serves it on `port` (0: the
// kernel's choice) and waits until every rank has connected.
c10::intrusive_ptr<c10d::Store> MakeStore(const std::string& host, int port, int rank, int world,
                                          std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = rank == 0;
  options.numWorkers = world;
  options.waitWorkers = true;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

c10::intrusive_ptr<c10d::Backend> MakeBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                              const torch::Device& device, const GlooPlace& gloo,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout) {
  if (device.is_cuda()) return CreateNcclBackend(store, rank, size, timeout);
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  for (const std::string& name : gloo.interfaces) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
  }
  if (gloo.interfaces.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(gloo.address));
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace

RankLayout LayoutOf(int rank, const Strategy& strategy) {
  RankLayout l;
  l.rank = rank;
  l.dp = strategy.data_parallel;
  l.cp = strategy.context_parallel;
  l.tp = strategy.tensor_parallel;
  l.pp = strategy.pipeline_parallel;
  l.world = strategy.world_size();
  l.tp_rank = rank % l.tp;
  l.cp_rank = (rank / l.tp) % l.cp;
  l.dp_rank = (rank / (l.tp * l.cp)) % l.dp;
  l.pp_rank = rank / (l.tp * l.cp * l.dp);
  l.ep = strategy.expert_parallel;
  l.ep_rank = (l.dp_rank * l.cp + l.cp_rank) % l.ep;
  return l;
}

void Group::AllReduce(torch::Tensor& t, c10d::ReduceOp op) {
  if (!backend_) return;
  CommTimer timer(comm_seconds_);
  std::vector<torch::Tensor> ts{t};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  backend_->allreduce(ts, options)->wait();
}

c10::intrusive_ptr<c10d::Work> Group::AllReduceAsync(torch::Tensor& t) {
  if (!backend_) return {};
  CommTimer timer(comm_seconds_);
  std::vector<torch::Tensor> ts{t};
  return backend_->allreduce(ts);
}

void Group::AllGather(torch::Tensor& output, torch::Tensor& input) {
  Wait(AllGatherAsync(output, input));
}

c10::intrusive_ptr<c10d::Work> Group::AllGatherAsync(torch::Tensor& output, torch::Tensor& input) {
  if (!backend_) {
    if (!output.is_same(input)) output.copy_(input.view_as(output));
    return {};
  }
  CommTimer timer(comm_seconds_);
  return backend_->_allgather_base(output, input);
}

c10::intrusive_ptr<c10d::Work> Group::ReduceScatterAsync(torch::Tensor& output,
                                                         torch::Tensor& input) {
  if (!backend_) {
    output.copy_(input.view_as(output));
    return {};
  }
  CommTimer timer(comm_seconds_);
  return backend_->_reduce_scatter_base(output, input);
}

void Group::AllToAll(torch::Tensor& output, torch::Tensor& input,
                     const std::vector<int64_t>& output_splits,
                     const std::vector<int64_t>& input_splits) {
  if (!backend_) {
    output.copy_(input.view_as(output));
    return;
  }
  CommTimer timer(comm_seconds_);
  std::vector<int64_t> out_splits = output_splits, in_splits = input_splits;
  backend_->alltoall_base(output, input, out_splits, in_splits)->wait();
}

void Group::Broadcast(torch::Tensor& t, int root) {
  if (!backend_) return;
  CommTimer timer(comm_seconds_);
  std::vector<torch::Tensor> ts{t};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  backend_->broadcast(ts, options)->wait();
}

void Group::Send(torch::Tensor& t, int dst_rank, int tag) {
  TORCH_CHECK(backend_, "send within a group of one rank");
  CommTimer timer(comm_seconds_);
  std::vector<torch::Tensor> ts{t};
  backend_->send(ts, dst_rank, tag)->wait();
}

c10::intrusive_ptr<c10d::Work> Group::SendAsync(torch::Tensor& t, int dst_rank, int tag) {
  TORCH_CHECK(backend_, "send within a group of one rank");
  CommTimer timer(comm_seconds_);
  std::vector<torch::Tensor> ts{t};
  return backend_->send(ts, dst_rank, tag);
}

void Group::Recv(torch::Tensor& t, int src_rank, int tag) {
  TORCH_CHECK(backend_, "recv within a group of one rank");
  CommTimer timer(comm_seconds_);
  std::vector<torch::Tensor> ts{t};
  backend_->recv(ts, src_rank, tag)->wait();
}

c10::intrusive_ptr<c10d::Work> Group::RecvAsync(torch::Tensor& t, int src_rank, int tag) {
  TORCH_CHECK(backend_, "recv within a group of one rank");
  CommTimer timer(comm_seconds_);
  std::vector<torch::Tensor> ts{t};
  return backend_->recv(ts, src_rank, tag);
}

void Group::Wait(const c10::intrusive_ptr<c10d::Work>& work) {
  if (!work) return;
  CommTimer timer(comm_seconds_);
  work->wait();
}

absl::StatusOr<std::string> CheckCollectives(const torch::Device& device) {
  if (device.is_cuda() && !HaveNccl()) {
    return absl::FailedPreconditionError("this trial runner was built without NCCL");
  }
  try {
    auto store =
        MakeStore("127.0.0.1", /*port=*/0, /*rank=*/0, /*world=*/1, std::chrono::minutes(1));
    double seconds = 0;
    GlooPlace loopback;
    loopback.address = "127.0.0.1";
    Group group(MakeBackend(store, device, loopback, 0, 1, std::chrono::minutes(1)), 0, 1,
                &seconds);
    const auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
    torch::Tensor t = torch::arange(4, opts);
    group.AllReduce(t);
    group.AllReduce(t, c10d::ReduceOp::MAX);
    torch::Tensor shard = torch::full({3}, 2.0, opts);
    torch::Tensor gathered = torch::empty({3}, opts);
    group.AllGather(gathered, shard);
    torch::Tensor reduced = torch::empty({3}, opts);
    group.Wait(group.ReduceScatterAsync(reduced, gathered));
    group.Broadcast(reduced, 0);
    const bool ok = t.cpu().equal(torch::arange(4, torch::kFloat)) &&
                    reduced.cpu().equal(torch::full({3}, 2.0));
    if (!ok) return absl::InternalError("a collective returned a wrong result");
    return std::string(device.is_cuda() ? "nccl" : "gloo");
  } catch (const std::exception& e) {
    return absl::InternalError(MessageOf(e));
  }
}

std::unique_ptr<Groups> Groups::Single() {
  std::unique_ptr<Groups> g(new Groups());
  g->world_ = Group(nullptr, 0, 1, &g->comm_seconds_);
  g->data_ = g->context_ = g->data_context_ = g->expert_ = g->expert_data_ = g->tensor_ =
      g->pipeline_ = g->embedding_ = g->world_;
  return g;
}

absl::StatusOr<std::unique_ptr<Groups>> Groups::Connect(const TrialSpec& spec,
                                                        const torch::Device& device,
                                                        std::chrono::milliseconds timeout) {
  const Strategy& s = spec.strategy;
  std::unique_ptr<Groups> g = Single();
  g->layout_ = LayoutOf(spec.rank, s);
  if (spec.world_size == 1) return g;
  if (device.is_cuda() && !HaveNccl()) {
    return absl::FailedPreconditionError(
        "world_size: multi-rank CUDA trials need NCCL, which this trial runner was built without");
  }
  if (spec.master_port <= 0 || spec.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "master_port: a multi-rank trial needs a rendezvous port, got ", spec.master_port));
  }
  const RankLayout& l = g->layout_;
  try {
    g->store_ = MakeStore(spec.master_addr, spec.master_port, spec.rank, spec.world_size, timeout);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rendezvous at ", spec.master_addr, ":",
                                               spec.master_port, " failed: ", MessageOf(e)));
  }
  GlooPlace gloo;
  if (!device.is_cuda()) {
    absl::StatusOr<GlooPlace> place = GlooPlaceFor(spec.master_addr);
    if (!place.ok()) return place.status();
    gloo = *std::move(place);
  }
  // Each group lives under its own key prefix, named by the ranks its
  // members share; every rank creates its groups in the same order (world,
  // data, context, data-and-context, expert, expert-data, tensor,
  // pipeline), so no two ranks wait
  // on each other in different groups.
  auto make = [&](const std::string& name, int rank, int size) {
    if (size == 1) return Group(nullptr, 0, 1, &g->comm_seconds_);
    auto store = c10::make_intrusive<c10d::PrefixStore>(name, g->store_);
    return Group(MakeBackend(store, device, gloo, rank, size, timeout), rank, size,
                 &g->comm_seconds_);
  };
  try {
    g->world_ = make("world", l.rank, l.world);
    g->data_ =
        make(absl::StrCat("dp/pp", l.pp_rank, "/cp", l.cp_rank, "/tp", l.tp_rank), l.dp_rank, l.dp);
    g->context_ =
        make(absl::StrCat("cp/pp", l.pp_rank, "/dp", l.dp_rank, "/tp", l.tp_rank), l.cp_rank, l.cp);
    g->data_context_ = l.cp == 1   ? g->data_
                       : l.dp == 1 ? g->context_
                                   : make(absl::StrCat("dpcp/pp", l.pp_rank, "/tp", l.tp_rank),
                                          l.dp_rank * l.cp + l.cp_rank, l.dp * l.cp);
    // Expert parallelism: blocks of ep consecutive data-and-context ranks.
    const int replica = l.dp_rank * l.cp + l.cp_rank;
    if (l.ep == 1) {
      g->expert_data_ = g->data_context_;
    } else {
      g->expert_ =
          make(absl::StrCat("ep/pp", l.pp_rank, "/tp", l.tp_rank, "/block", replica / l.ep),
               l.ep_rank, l.ep);
      g->expert_data_ =
          l.ep == l.dp * l.cp
              ? Group(nullptr, 0, 1, &g->comm_seconds_)
              : make(absl::StrCat("edp/pp", l.pp_rank, "/tp", l.tp_rank, "/ep", l.ep_rank),
                     replica / l.ep, l.dp * l.cp / l.ep);
    }
    g->tensor_ =
        make(absl::StrCat("tp/pp", l.pp_rank, "/dp", l.dp_rank, "/cp", l.cp_rank), l.tp_rank, l.tp);
    g->pipeline_ =
        make(absl::StrCat("pp/dp", l.dp_rank, "/cp", l.cp_rank, "/tp", l.tp_rank), l.pp_rank, l.pp);
    if (l.pp > 1 && (l.pp_rank == 0 || l.pp_rank == l.pp - 1)) {
      g->embedding_ = make(absl::StrCat("emb/dp", l.dp_rank, "/cp", l.cp_rank, "/tp", l.tp_rank),
                           l.pp_rank == 0 ? 0 : 1, 2);
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("creating the process groups failed: ", MessageOf(e)));
  }
  return g;
}

}  // namespace autoaccel
