// Builds a network from a model spec: the one place that knows every network
// (gpt.h, llama.h, bert.h), so that they depend on model.h and not the
// reverse.
#ifndef AUTOACCEL_ENGINE_BUILD_MODEL_H_
#define AUTOACCEL_ENGINE_BUILD_MODEL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/model.h"
#include "spec/model_spec.h"

namespace autoaccel {

// Builds the network of `spec`'s family on CPU with transformers'
// initialisation for it, from a generator seeded with `seed` (the global RNG
// plays no part): the same spec and seed give bit-identical weights. Move it
// with ->to(device). INVALID_ARGUMENT when spec.Validate() fails or the
// family is not built (torchscript: loaded from its file, scripted_model.h).
// Any thread.
absl::StatusOr<std::shared_ptr<TrainableModel>> BuildModel(const ModelSpec& spec, uint64_t seed);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_BUILD_MODEL_H_
