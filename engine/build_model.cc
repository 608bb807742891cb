#include "engine/build_model.h"

#include "common/status_macros.h"
#include "engine/bert.h"
#include "engine/gpt.h"
#include "engine/llama.h"

namespace autoaccel {

absl::StatusOr<std::shared_ptr<TrainableModel>> BuildModel(const ModelSpec& spec, uint64_t seed) {
  RETURN_IF_ERROR(spec.Validate());
  ASSIGN_OR_RETURN(const ModelFamilyInfo* family, spec.Family());
  switch (family->network) {
    case Network::kGpt2:
      return std::shared_ptr<TrainableModel>(std::make_shared<GptImpl>(spec, seed));
    case Network::kDecoder:
      return std::shared_ptr<TrainableModel>(std::make_shared<DecoderImpl>(spec, seed));
    case Network::kBert:
      return std::shared_ptr<TrainableModel>(std::make_shared<BertImpl>(spec, seed));
    case Network::kTorchScript:
      return absl::InvalidArgumentError(
          "model: a torchscript model is loaded from its file (ScriptedModel), not built");
  }
  return absl::InvalidArgumentError("model: unknown family");
}

}  // namespace autoaccel
