#include "server/signature.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace autoaccel {

std::string ComputeSignature(const ModelSpec& model, int seq_len, int global_batch_size,
                             int world_size, const std::string& device_type,
                             const v1::Launcher* launcher) {
  // nlohmann::json objects keep keys sorted, so dump() is a normal form.
  uint64_t hash = Fnv1a64(model.ToConfigJson().dump());
  std::string prefix = model.family;
  if (launcher != nullptr) {
    hash = Fnv1a64(absl::StrCat("|launcher|", launcher->format(), "|",
                                absl::StrJoin(launcher->dimensions(), ",")),
                   hash);
    prefix = absl::StrCat("launcher-", launcher->name());
  }
  return absl::StrFormat("%s-%016x-s%d-b%d-%s-w%d", prefix, hash, seq_len, global_batch_size,
                         device_type, world_size);
}

std::string HardwareName(const std::string& device_type, int world_size) {
  return absl::StrCat(device_type, " x", world_size);
}

}  // namespace autoaccel
