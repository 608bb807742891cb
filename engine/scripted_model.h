// A user's own architecture, trained as TorchScript: the file is
// `torch.jit.save(torch.jit.script(module))` of a module whose forward takes
// the inputs described by an InputSpec (spec/input_spec.h), in order, and
// returns the loss.
//
// Load() returns a Status for everything a user can get wrong before the
// first step (unreadable file, nothing to train, forward's arity). Every
// other method throws c10::Error like any LibTorch code (the trial runner is
// where that is caught). One thread at a time per ScriptedModel.
#ifndef AUTOACCEL_ENGINE_SCRIPTED_MODEL_H_
#define AUTOACCEL_ENGINE_SCRIPTED_MODEL_H_

#include <torch/script.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "spec/input_spec.h"

namespace autoaccel {

class ScriptedModel {
 public:
  // Loads `path` onto the CPU in training mode. INVALID_ARGUMENT, starting
  // with "model_file: ", when the file cannot be loaded (missing, not
  // TorchScript; LibTorch's reason included), has no forward method, has no
  // parameter that requires grad, or when forward cannot take spec's inputs:
  // it must have at least as many arguments (after self) as forward's
  // arguments without defaults and at most as many as all of them; the
  // message names both counts and forward's argument names. Each argument
  // the spec fills must accept a Tensor.
  static absl::StatusOr<std::unique_ptr<ScriptedModel>> Load(const std::string& path,
                                                             const InputSpec& spec);

  ScriptedModel(const ScriptedModel&) = delete;
  ScriptedModel& operator=(const ScriptedModel&) = delete;

  const InputSpec& spec() const { return spec_; }

  // The parameters that require grad, in the module's order (what an
  // optimizer steps). The tensors stay the same objects across To(): their
  // data is replaced in place, so an optimizer built before To() still
  // refers to them (but its state, if any, is not moved).
  std::vector<torch::Tensor> Parameters() const;
  // Elements in Parameters().
  int64_t ParameterCount() const;

  // Moves every parameter and buffer to `device`; with `dtype`, floating-point
  // ones are cast to it too (e.g. kBFloat16 for pure-bf16 training), integer
  // and bool ones keep their dtype. Like Python's Module.to(): plain tensor
  // attributes that are neither parameters nor buffers are not touched.
  void To(torch::Device device, std::optional<c10::ScalarType> dtype = std::nullopt);

  // Training (dropout on, batch-norm statistics updated) or eval mode.
  void Train(bool on = true);

  // Forward's arguments for one micro-batch of `batch` samples of `seq_len`
  // tokens, drawn from a CPU generator seeded with `seed` alone (the global
  // RNG is not used or advanced), so one seed gives the same values on any
  // device. Inputs are made in spec order; an alias is the very tensor it
  // names. Integer inputs are uniform in [0, high), bool ones 0 or 1, float
  // ones standard normal, drawn in float32 and then cast to `float_dtype` when
  // given, else to the spec's dtype. The tensors are moved to `device`.
  std::vector<torch::IValue> MakeInputs(int64_t batch, int64_t seq_len, uint64_t seed,
                                        torch::Device device,
                                        std::optional<c10::ScalarType> float_dtype) const;

  // Runs forward on `inputs` and returns the loss as a float32 scalar still
  // attached to the autograd graph. Forward may return a scalar floating-point
  // tensor, a tuple or list whose first element is one, or a dict with the
  // key "loss" holding one; anything else throws c10::Error saying what
  // forward returned and what is expected.
  torch::Tensor Loss(const std::vector<torch::IValue>& inputs);

  // The loaded module, e.g. for saving or inspecting its graph.
  torch::jit::Module& module() { return module_; }

 private:
  ScriptedModel(torch::jit::Module module, InputSpec spec)
      : module_(std::move(module)), spec_(std::move(spec)) {}

  torch::jit::Module module_;
  InputSpec spec_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_SCRIPTED_MODEL_H_
