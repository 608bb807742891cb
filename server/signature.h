#ifndef AUTOACCEL_SERVER_SIGNATURE_H_
#define AUTOACCEL_SERVER_SIGNATURE_H_

#include <string>

#include "proto/autoaccel.pb.h"
#include "spec/model_spec.h"

namespace autoaccel {

// The key of the strategies table: what must be equal for a stored answer to
// apply to a new request. Readable prefix plus a stable 64-bit FNV-1a hash of
// the normalized model config, e.g. "gpt2-3f9a0c1d2b4e5f60-s128-b8-cpu-w1".
// A launcher job's (`launcher` not null) is another key: its trials measure
// the user's script, not the engine: "launcher-NAME-<hash of the model
// config, the launcher's format and dimensions>-s128-b8-cpu-w2".
std::string ComputeSignature(const ModelSpec& model, int seq_len, int global_batch_size,
                             int world_size, const std::string& device_type,
                             const v1::Launcher* launcher = nullptr);

// "cpu x1", "cuda x8": the hardware a signature stands for.
std::string HardwareName(const std::string& device_type, int world_size);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_SIGNATURE_H_
