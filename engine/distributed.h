// The process groups of one multi-rank trial and the collectives the
// parallel strategies issue over them.
//
// Every rank of a trial creates a c10d TCPStore client (rank 0 also serves
// it, on master_port) and from it one c10d backend per group it belongs to:
// ProcessGroupGloo on CPU, ProcessGroupNCCL on CUDA (when this build has the
// NCCL path, see HaveNccl()). Gloo listens on the interfaces
// GLOO_SOCKET_IFNAME names (comma-separated) when it is set, on 127.0.0.1
// when the gang meets on loopback, and otherwise on this host's address
// toward master_addr (common/local_address.h), never on what the host name
// resolves to (often an address other hosts cannot reach).
//
// The layout of strategy.h numbers ranks tensor-parallel fastest, then
// context-parallel, then data-parallel, then pipeline stage:
//   rank = ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank
// so a rank's data-parallel group is the ranks that differ from it in
// dp_rank only, its context-parallel group those that differ in cp_rank
// only, and so on; its data-and-context group (the ranks that hold the same
// weights and reduce their gradients together) those that differ in dp_rank
// or cp_rank. Expert parallelism adds no ranks: its groups are blocks of
// ep consecutive data-and-context ranks (see Groups::expert()).
//
// Collectives are timed: Groups::comm_seconds() is the wall time this rank
// spent inside collectives and waits for asynchronous ones, which the trial
// reports per step.
//
// Methods throw c10::Error (a peer that died or timed out included) like any
// LibTorch code; the trial runner (trainer.h) is where they are caught.
#ifndef AUTOACCEL_ENGINE_DISTRIBUTED_H_
#define AUTOACCEL_ENGINE_DISTRIBUTED_H_

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {

// True when this build can create NCCL process groups (CUDA trials with
// more than one rank).
bool HaveNccl();

// One group of ranks: its backend (null when the group has one rank: every
// collective is then the identity), this rank's index in it and its size.
class Group {
 public:
  Group() = default;
  Group(c10::intrusive_ptr<c10d::Backend> backend, int rank, int size, double* comm_seconds)
      : backend_(std::move(backend)), rank_(rank), size_(size), comm_seconds_(comm_seconds) {}

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Sum (or max) over the group, in place, blocking.
  void AllReduce(torch::Tensor& t, c10d::ReduceOp op = c10d::ReduceOp::SUM);
  // Starts an in-place sum; Wait() the result before reading `t`.
  c10::intrusive_ptr<c10d::Work> AllReduceAsync(torch::Tensor& t);
  // output [size * n] <- every rank's input [n], in rank order. `input` may
  // be this rank's slice of `output`.
  void AllGather(torch::Tensor& output, torch::Tensor& input);
  c10::intrusive_ptr<c10d::Work> AllGatherAsync(torch::Tensor& output, torch::Tensor& input);
  // output [n] <- the sum over ranks of their input's slice `rank` of
  // [size * n].
  c10::intrusive_ptr<c10d::Work> ReduceScatterAsync(torch::Tensor& output, torch::Tensor& input);
  // output <- every rank's slice for this rank, in rank order: `input`
  // [sum(input_splits), ...] holds input_splits[r] rows for rank r along
  // dim 0, `output` [sum(output_splits), ...] receives output_splits[r]
  // rows from rank r. Both split lists have size() entries; every pair of
  // ranks must agree on what they send each other. Blocking.
  void AllToAll(torch::Tensor& output, torch::Tensor& input,
                const std::vector<int64_t>& output_splits,
                const std::vector<int64_t>& input_splits);
  void Broadcast(torch::Tensor& t, int root);
  void Send(torch::Tensor& t, int dst_rank, int tag);
  // Starts a send; `t` must stay alive until the work is waited for.
  c10::intrusive_ptr<c10d::Work> SendAsync(torch::Tensor& t, int dst_rank, int tag);
  void Recv(torch::Tensor& t, int src_rank, int tag);
  // Starts a receive into `t`; Wait() before reading it.
  c10::intrusive_ptr<c10d::Work> RecvAsync(torch::Tensor& t, int src_rank, int tag);

  // Blocks until `work` is done; the wait counts as communication time.
  void Wait(const c10::intrusive_ptr<c10d::Work>& work);

 private:
  c10::intrusive_ptr<c10d::Backend> backend_;
  int rank_ = 0;
  int size_ = 1;
  double* comm_seconds_ = nullptr;
};

// Creates a one-rank process group on `device` (gloo for cpu, NCCL for
// cuda) over a TCPStore on a free loopback port and checks the collectives
// the strategies use: all-reduce (sum and max), all-gather and
// reduce-scatter into and from flat tensors, broadcast. Returns the backend's
// name ("gloo" or "nccl") or the first failure (FAILED_PRECONDITION without
// an NCCL build for cuda; INTERNAL for a wrong result).
absl::StatusOr<std::string> CheckCollectives(const torch::Device& device);

// Where this rank sits in the strategy's layout.
struct RankLayout {
  int rank = 0, world = 1;
  int dp_rank = 0, dp = 1;
  int cp_rank = 0, cp = 1;
  int tp_rank = 0, tp = 1;
  int pp_rank = 0, pp = 1;
  // Expert parallelism: this rank's place among ep consecutive
  // data-and-context ranks, (dp_rank * cp + cp_rank) % ep.
  int ep_rank = 0, ep = 1;
};
RankLayout LayoutOf(int rank, const Strategy& strategy);

class Groups {
 public:
  // Connects this rank to the trial's other ranks (spec.rank of
  // spec.world_size, rendezvous spec.master_addr:master_port) and creates
  // its world, data-, context-, data-and-context-, tensor- and
  // pipeline-parallel groups. Every rank must
  // call it; it returns once all have. `timeout` bounds the rendezvous and
  // every later collective. FAILED_PRECONDITION when the device type has no
  // backend in this build; UNAVAILABLE when the peers do not all show up.
  static absl::StatusOr<std::unique_ptr<Groups>> Connect(const TrialSpec& spec,
                                                         const torch::Device& device,
                                                         std::chrono::milliseconds timeout);
  // A single rank: every group has one member, no backend at all.
  static std::unique_ptr<Groups> Single();

  const RankLayout& layout() const { return layout_; }
  Group& world() { return world_; }
  Group& data() { return data_; }
  Group& context() { return context_; }
  // The data- and context-parallel ranks together (rank dp_rank * cp +
  // cp_rank): they hold the same weights, and their gradients are reduced
  // (and ZeRO/FSDP state sharded) over this group.
  Group& data_context() { return data_context_; }
  // Expert parallelism: the ep consecutive data-and-context ranks whose
  // experts together make the model's (tokens are exchanged among them),
  // and the ranks that hold the same experts as this one (every ep-th
  // data-and-context rank), over which the experts' gradients are reduced.
  // Without expert parallelism: one member, and data_context().
  Group& expert() { return expert_; }
  Group& expert_data() { return expert_data_; }
  Group& tensor() { return tensor_; }
  Group& pipeline() { return pipeline_; }
  // With pipeline stages: the first and the last stage of this rank's
  // pipeline (same dp and tp rank), which both hold a tied embedding; one
  // member elsewhere.
  Group& embedding() { return embedding_; }

  // Seconds spent in collectives since the last ResetCommSeconds().
  double comm_seconds() const { return comm_seconds_; }
  void ResetCommSeconds() { comm_seconds_ = 0; }

 private:
  Groups() = default;

  RankLayout layout_;
  c10::intrusive_ptr<c10d::Store> store_;
  double comm_seconds_ = 0;
  Group world_, data_, context_, data_context_, expert_, expert_data_, tensor_, pipeline_,
      embedding_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_DISTRIBUTED_H_
