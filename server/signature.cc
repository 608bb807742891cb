#include "server/signature.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace autoaccel {

std::string ComputeSignature(const ModelSpec& model, int seq_len, int global_batch_size,
                             int world_size, const std::string& device_type) {
  // nlohmann::json objects keep keys sorted, so dump() is a normal form.
  const std::string config = model.ToConfigJson().dump();
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : config) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return absl::StrFormat("%s-%016x-s%d-b%d-%s-w%d", model.family, hash, seq_len, global_batch_size,
                         device_type, world_size);
}

std::string HardwareName(const std::string& device_type, int world_size) {
  return absl::StrCat(device_type, " x", world_size);
}

}  // namespace autoaccel
