#include "engine/data_parallel.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace autoaccel {
namespace {

// FSDP's way of freeing a gathered parameter without touching the tensors
// that view it (the parameters, and what autograd saved for backward): the
// storage gives its memory back and later gets new memory of the same size,
// so every view sees the re-gathered values.
void FreeStorage(const torch::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

void AllocateStorage(const torch::Tensor& t, size_t nbytes) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  TORCH_CHECK(s->allocator() != nullptr, "a flat parameter buffer has no allocator");
  s->set_data_ptr_noswap(s->allocator()->allocate(nbytes));
  s->set_nbytes(nbytes);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

struct DataParallel::Flat {
  Group* group = nullptr;  // the ranks that hold these parameters
  std::vector<torch::Tensor> params;
  std::vector<int64_t> offsets;
  int64_t padded = 0;        // numel rounded up to a multiple of the group size
  int64_t shard_numel = 0;   // padded / group size
  torch::Tensor flat;        // [padded]; the parameters view it
  torch::Tensor grad;        // none, zero1: [padded]; the gradients view it
  torch::Tensor shard;       // zero1, zero2: view of flat; fsdp: a tensor of its own
  torch::Tensor shard_grad;  // zero1: view of grad; zero2, fsdp: a tensor of its own
  size_t ready = 0;          // parameters whose gradient this micro-batch has accumulated
  bool started = false;      // this micro-batch's reduction has been started
  bool gathered = true;      // fsdp: flat holds the full parameters
  c10::intrusive_ptr<c10d::Work> work;
  torch::Tensor send, recv;  // zero2, fsdp: the reduce-scatter's buffers

  size_t nbytes() const { return static_cast<size_t>(padded) * flat.element_size(); }
};

DataParallel::DataParallel(Group* group, std::vector<torch::Tensor> params,
                           const std::vector<std::vector<torch::Tensor>>& layers,
                           DataParallelOptions options)
    : group_(group), options_(options), params_(std::move(params)) {
  TORCH_CHECK(!params_.empty(), "data parallel: the model has no parameters");
  torch::NoGradGuard no_grad;
  const Sharding sharding = options_.sharding;
  std::unordered_set<const void*> experts;
  if (options_.expert_group != nullptr) {
    for (const torch::Tensor& p : options_.expert_params) experts.insert(p.unsafeGetTensorImpl());
  }
  // 0: the group's parameters, 1: the experts (the expert group's).
  const auto kind = [&](const torch::Tensor& p) {
    return experts.count(p.unsafeGetTensorImpl()) ? 1 : 0;
  };
  Group* const groups[2] = {group_, options_.expert_group};

  // Which parameters go together: fsdp units (each layer's parameters, its
  // experts apart, then the rest), or gradient buckets filled in reverse
  // order, the order backward produces gradients in (experts in buckets of
  // their own). Each part with its kind.
  std::vector<std::pair<int, std::vector<torch::Tensor>>> parts;
  const auto add_by_kind = [&](const std::vector<torch::Tensor>& params, std::vector<int>* units) {
    for (int k : {0, 1}) {
      std::vector<torch::Tensor> part;
      for (const torch::Tensor& p : params) {
        if (kind(p) == k) part.push_back(p);
      }
      if (part.empty()) continue;
      parts.emplace_back(k, std::move(part));
      units->push_back(static_cast<int>(parts.size()) - 1);
    }
  };
  if (sharding == Sharding::kFsdp) {
    std::unordered_set<const void*> in_layers;
    for (const auto& layer : layers) {
      layer_units_.emplace_back();
      add_by_kind(layer, &layer_units_.back());
      for (const torch::Tensor& p : layer) in_layers.insert(p.unsafeGetTensorImpl());
    }
    std::vector<torch::Tensor> rest;
    for (const torch::Tensor& p : params_) {
      if (!in_layers.count(p.unsafeGetTensorImpl())) rest.push_back(p);
    }
    add_by_kind(rest, &root_units_);
  } else {
    int64_t bytes[2] = {0, 0};
    int open[2] = {-1, -1};  // the bucket each kind is filling
    for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
      const int k = kind(*it);
      if (open[k] < 0 || bytes[k] >= options_.bucket_bytes) {
        parts.emplace_back(k, std::vector<torch::Tensor>());
        open[k] = static_cast<int>(parts.size()) - 1;
        bytes[k] = 0;
      }
      parts[open[k]].second.push_back(*it);
      bytes[k] += it->numel() * it->element_size();
    }
  }

  for (auto& [part_kind, part] : parts) {
    auto f = std::make_unique<Flat>();
    f->group = groups[part_kind];
    const int64_t dp = f->group->size();
    const int64_t rank = f->group->rank();
    f->params = std::move(part);
    int64_t numel = 0;
    for (const torch::Tensor& p : f->params) {
      TORCH_CHECK(p.dtype() == params_[0].dtype() && p.device() == params_[0].device(),
                  "data parallel: parameters of mixed dtype or device");
      f->offsets.push_back(numel);
      numel += p.numel();
    }
    f->padded = CeilDiv(numel, dp) * dp;
    f->shard_numel = f->padded / dp;
    f->flat = torch::zeros({f->padded}, params_[0].options());
    for (size_t i = 0; i < f->params.size(); ++i) {
      torch::Tensor& p = f->params[i];
      torch::Tensor view = f->flat.narrow(0, f->offsets[i], p.numel()).view(p.sizes());
      view.copy_(p);
      p.set_data(view);
    }
    if (sharding == Sharding::kNone || sharding == Sharding::kZero1) {
      f->grad = torch::zeros({f->padded}, params_[0].options());
      for (size_t i = 0; i < f->params.size(); ++i) {
        torch::Tensor& p = f->params[i];
        p.mutable_grad() = f->grad.narrow(0, f->offsets[i], p.numel()).view(p.sizes());
      }
    }
    if (sharding != Sharding::kNone) {
      const int64_t first = rank * f->shard_numel;
      if (sharding == Sharding::kFsdp) {
        f->shard = f->flat.narrow(0, first, f->shard_numel).clone();
        FreeStorage(f->flat);
        f->gathered = false;
      } else {
        f->shard = f->flat.narrow(0, first, f->shard_numel);
      }
      f->shard_grad = sharding == Sharding::kZero1
                          ? f->grad.narrow(0, first, f->shard_numel)
                          : torch::zeros({f->shard_numel}, params_[0].options());
      f->shard.mutable_grad() = f->shard_grad;
      optimized_.push_back(f->shard);
    }
    flats_.push_back(std::move(f));
  }
  if (sharding == Sharding::kNone) optimized_ = params_;

  // One hook per parameter on its gradient accumulation: when the last
  // parameter of a bucket or unit has its gradient, the reduction starts.
  for (size_t fi = 0; fi < flats_.size(); ++fi) {
    for (const torch::Tensor& p : flats_[fi]->params) {
      std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(p);
      TORCH_CHECK(acc, "data parallel: a parameter is not a leaf that requires grad");
      acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, fi](const torch::autograd::variable_list& outputs,
                     const torch::autograd::variable_list&) {
            OnGradReady(fi);
            return outputs;
          }));
      accumulators_.push_back(std::move(acc));
    }
  }
  optimizer_ = std::make_unique<TrainingOptimizer>(optimized_, options_.optimizer,
                                                   options_.master_copies, options_.master_device);
}

DataParallel::~DataParallel() {
  // Reductions still in flight (a step that threw) must not write into freed
  // buffers.
  for (auto& f : flats_) {
    if (f->work) {
      try {
        f->work->wait();
      } catch (...) {
      }
    }
  }
}

void DataParallel::ZeroGrad() {
  torch::NoGradGuard no_grad;
  for (auto& f : flats_) {
    if (f->grad.defined()) f->grad.zero_();
    if (f->shard_grad.defined() && !f->grad.defined()) f->shard_grad.zero_();
  }
}

void DataParallel::BeginForward() {
  // fsdp: the unit outside the layers (embeddings, head) is needed from the
  // first op of the forward pass to the last of backward.
  for (int unit : root_units_) Gather(*flats_[unit]);
}

void DataParallel::BeginBackward(bool last) {
  reduce_this_micro_batch_ =
      last || options_.sharding == Sharding::kZero2 || options_.sharding == Sharding::kFsdp;
  for (auto& f : flats_) {
    f->ready = 0;
    f->started = false;
  }
}

void DataParallel::EndBackward() {
  if (reduce_this_micro_batch_) {
    for (auto& f : flats_) {
      if (!f->started) StartReduction(*f);  // parameters without a gradient
    }
  }
  for (auto& f : flats_) {
    if (f->started) FinishReduction(*f);
  }
}

void DataParallel::OnGradReady(size_t flat_index) {
  Flat& f = *flats_[flat_index];
  if (++f.ready < f.params.size() || !reduce_this_micro_batch_ || f.started) return;
  StartReduction(f);
}

void DataParallel::StartReduction(Flat& f) {
  torch::NoGradGuard no_grad;
  f.started = true;
  // Averaged over the group (for experts too: see DataParallelOptions).
  const double inv = 1.0 / static_cast<double>(group_->size());
  if (f.grad.defined()) {  // none, zero1: all-reduce the gradients in place
    f.grad.mul_(inv);
    f.work = f.group->AllReduceAsync(f.grad);
    return;
  }
  // zero2, fsdp: pack this micro-batch's gradients, reduce-scatter them and
  // free them.
  f.send = torch::empty({f.padded}, f.flat.options());
  int64_t end = 0;
  for (size_t i = 0; i < f.params.size(); ++i) {
    torch::Tensor& p = f.params[i];
    torch::Tensor slice = f.send.narrow(0, f.offsets[i], p.numel());
    if (p.grad().defined()) {
      slice.copy_(p.grad().reshape(-1));
    } else {
      slice.zero_();  // no gradient this micro-batch
    }
    p.mutable_grad().reset();
    end = f.offsets[i] + p.numel();
  }
  f.send.narrow(0, end, f.padded - end).zero_();  // padding
  f.send.mul_(inv);
  f.recv = torch::empty({f.shard_numel}, f.flat.options());
  f.work = f.group->ReduceScatterAsync(f.recv, f.send);
  if (options_.sharding == Sharding::kFsdp) Release(f);  // backward is done with the unit
}

void DataParallel::FinishReduction(Flat& f) {
  torch::NoGradGuard no_grad;
  f.group->Wait(f.work);
  f.work.reset();
  if (f.recv.defined()) {
    f.shard_grad.add_(f.recv);
    f.send = torch::Tensor();
    f.recv = torch::Tensor();
  }
  f.started = false;
}

void DataParallel::CombineFoundInf(torch::Tensor& found_inf) {
  if (options_.sharding != Sharding::kNone) group_->AllReduce(found_inf);
}

void DataParallel::Step() {
  optimizer_->Step();
  if (options_.sharding == Sharding::kZero1 || options_.sharding == Sharding::kZero2) {
    torch::NoGradGuard no_grad;
    // Every bucket's gather in flight at once, then wait for them all.
    for (auto& f : flats_) f->work = f->group->AllGatherAsync(f->flat, f->shard);
    for (auto& f : flats_) {
      f->group->Wait(f->work);
      f->work.reset();
    }
  }
}

void DataParallel::Gather(Flat& f) {
  if (f.gathered) return;
  torch::NoGradGuard no_grad;
  AllocateStorage(f.flat, f.nbytes());
  f.group->AllGather(f.flat, f.shard);
  f.gathered = true;
}

void DataParallel::Release(Flat& f) {
  if (!f.gathered) return;
  FreeStorage(f.flat);
  f.gathered = false;
}

void DataParallel::BeforeForward(int layer) {
  if (layer >= static_cast<int>(layer_units_.size())) return;
  for (int unit : layer_units_[layer]) Gather(*flats_[unit]);
}

void DataParallel::AfterForward(int layer, torch::Tensor& output) {
  if (layer >= static_cast<int>(layer_units_.size()) || layer_units_[layer].empty()) return;
  const std::vector<int> units = layer_units_[layer];
  // Backward reaches the layer through its output's gradient: gather the
  // parameters again just before.
  if (output.requires_grad()) {
    output.register_hook([this, units](const torch::Tensor&) {
      for (int unit : units) Gather(*flats_[unit]);
    });
  }
  for (int unit : units) Release(*flats_[unit]);
}

std::vector<torch::Tensor> DataParallel::FullParameters() {
  torch::NoGradGuard no_grad;
  std::unordered_map<const void*, torch::Tensor> copies;
  for (auto& f : flats_) {
    const bool was_gathered = f->gathered;
    Gather(*f);
    for (const torch::Tensor& p : f->params) copies[p.unsafeGetTensorImpl()] = p.detach().clone();
    if (!was_gathered) Release(*f);
  }
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : params_) out.push_back(copies.at(p.unsafeGetTensorImpl()));
  return out;
}

}  // namespace autoaccel
