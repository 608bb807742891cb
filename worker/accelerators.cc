#include "worker/accelerators.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace autoaccel {
namespace {

constexpr AcceleratorType kAccelerators[] = {
    {"cuda", "CUDA_VISIBLE_DEVICES", "NVIDIA"},
    {"hip", "HIP_VISIBLE_DEVICES", "AMD"},
    {"musa", "MUSA_VISIBLE_DEVICES", "Moore Threads"},
    {"xpu", "ZE_AFFINITY_MASK", "Intel"},
    {"npu", "ASCEND_RT_VISIBLE_DEVICES", "Huawei Ascend"},
    {"mlu", "MLU_VISIBLE_DEVICES", "Cambricon"},
};

}  // namespace

absl::Span<const AcceleratorType> AcceleratorTypes() { return kAccelerators; }

const AcceleratorType* FindAcceleratorType(absl::string_view type) {
  for (const AcceleratorType& a : kAccelerators) {
    if (a.type == type) return &a;
  }
  return nullptr;
}

std::string AcceleratorTypeList() {
  return absl::StrJoin(kAccelerators, ", ", [](std::string* out, const AcceleratorType& a) {
    out->append(a.type.data(), a.type.size());
  });
}

std::string RunnerDevice(const v1::Device& device) {
  if (device.type() == "cpu") return "cpu";
  return absl::StrCat(device.type(), ":", device.ordinal());
}

std::string VisibleDevicesValue(const std::vector<int>& ordinals, const char* inherited) {
  std::vector<std::string> entries;
  if (inherited != nullptr) {
    for (absl::string_view e : absl::StrSplit(inherited, ',', absl::SkipWhitespace())) {
      entries.emplace_back(absl::StripAsciiWhitespace(e));
    }
  }
  std::vector<std::string> out;
  for (int ordinal : ordinals) {
    out.push_back(ordinal >= 0 && ordinal < static_cast<int>(entries.size())
                      ? entries[ordinal]
                      : absl::StrCat(ordinal));
  }
  return absl::StrJoin(out, ",");
}

}  // namespace autoaccel
