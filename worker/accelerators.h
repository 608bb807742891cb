// The accelerator types a worker may advertise (--devices TYPE:...) and the
// environment variable that selects each type's devices for a process, as
// the vendor's runtime reads it. The engine itself runs on cpu and cuda;
// launcher trials (worker/launcher_trial.h) run users' scripts on any type
// of this table. Constant; any thread.
#ifndef AUTOACCEL_WORKER_ACCELERATORS_H_
#define AUTOACCEL_WORKER_ACCELERATORS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/autoaccel.pb.h"

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

// The value of a type's visible-devices variable that shows a child the
// devices of the given ordinals, in that order ("4,6"). The ordinals count
// the devices this worker sees: when the worker itself was started with the
// variable set (`inherited`, nullptr when unset), ordinal i is its i-th
// entry (so CUDA_VISIBLE_DEVICES=2,3 and ordinal 1 give "3"; UUIDs pass
// through); an ordinal past its entries stays a number. Pure.
std::string VisibleDevicesValue(const std::vector<int>& ordinals, const char* inherited);

// What a rank's spec is told to run on (TrialSpec::device): "cpu" for a cpu
// device, else "TYPE:ORDINAL" ("cuda:3"). Pure.
std::string RunnerDevice(const v1::Device& device);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_ACCELERATORS_H_
