// The accelerator types a worker may advertise (--devices TYPE:...) and the
// environment variable that selects each type's devices for a process, as
// the vendor's runtime reads it. The engine itself runs on cpu and cuda;
// launcher trials (worker/launcher_trial.h) run users' scripts on any type
// of this table. Constant; any thread.
#ifndef AUTOACCEL_WORKER_ACCELERATORS_H_
#define AUTOACCEL_WORKER_ACCELERATORS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace autoaccel {

struct AcceleratorType {
  absl::string_view type;             // v1::Device.type: "cuda", "musa", ...
  absl::string_view visible_devices;  // "CUDA_VISIBLE_DEVICES", ...
  absl::string_view vendor;           // for messages
};

// cuda, hip, musa, xpu, npu, mlu.
absl::Span<const AcceleratorType> AcceleratorTypes();

// The row of `type`, or nullptr (cpu has none).
const AcceleratorType* FindAcceleratorType(absl::string_view type);

// "cuda, hip, musa, xpu, npu, mlu" for messages.
std::string AcceleratorTypeList();

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_ACCELERATORS_H_
