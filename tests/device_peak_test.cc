// The GPU peak table: names as nvidia-smi prints them, dense datasheet peaks.
#include "worker/device_peak.h"

#include <ostream>

#include "gtest/gtest.h"
#include "search/device_catalog.h"

namespace autoaccel {

namespace {

// fp8 0: no fp8 tensor cores (before compute capability 8.9).
PeakTflops Peak(double fp32, double bf16, double fp16, double fp8 = 0) {
  return PeakTflops{fp32, bf16, fp16, fp8};
}

TEST(DevicePeakTest, H100SxmAndH200AreTheDenseDatasheetFigures) {
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA H100 80GB HBM3"), Peak(67, 989, 989, 1979));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA H200"), Peak(67, 989, 989, 1979));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA GH200 480GB"), Peak(67, 989, 989, 1979));
}

TEST(DevicePeakTest, VariantsWinOverTheirFamily) {
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA H100 PCIe"), Peak(51, 756, 756, 1513));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA H100 NVL"), Peak(60, 835, 835, 1670));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA H200 NVL"), Peak(60, 835, 835, 1670));
  EXPECT_EQ(PeakTflopsForGpuName("Tesla V100-PCIE-32GB"), Peak(14, 0, 112));
  EXPECT_EQ(PeakTflopsForGpuName("Tesla V100-SXM2-16GB"), Peak(15.7, 0, 125));
}

TEST(DevicePeakTest, A100SxmAndPcieShareTheirPeak) {
  for (const char* name : {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB",
                           "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"}) {
    EXPECT_EQ(PeakTflopsForGpuName(name), Peak(19.5, 312, 312)) << name;
  }
}

TEST(DevicePeakTest, ModelNamesMatchAsWholeWordsNotPrefixes) {
  // "A10" is a word of neither "A100" nor "A10G"; "L4" not of "L40S".
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA A10"), Peak(31.2, 125, 125));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA A10G"), Peak(35, 70, 70));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA L4"), Peak(30.3, 121, 121, 242.5));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA L40S"), Peak(91.6, 362.05, 362.05, 733));
  EXPECT_EQ(PeakTflopsForGpuName("NVIDIA L40"), Peak(90.5, 181.05, 181.05, 362));
  EXPECT_EQ(PeakTflopsForGpuName("nvidia h100 pcie"), Peak(51, 756, 756, 1513));
}

TEST(DevicePeakTest, AnUnknownNameIsAllZeros) {
  for (const char* name :
       {"NVIDIA GeForce RTX 4090", "AMD Instinct MI300X", "", "cuda:0", "NVIDIA H1000", "XA100"}) {
    EXPECT_EQ(PeakTflopsForGpuName(name), PeakTflops{}) << name;
  }
}

// The device catalog (search/device_catalog.json) repeats the peaks of the
// GPUs it lists; the two tables must agree, by the name nvidia-smi prints.
TEST(DevicePeakTest, AgreesWithTheDeviceCatalog) {
  absl::StatusOr<DeviceCatalog> catalog = DeviceCatalog::BuiltIn();
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  int checked = 0;
  for (const CatalogDevice& d : catalog->devices()) {
    if (d.nvidia_smi_name.empty()) continue;
    EXPECT_EQ(PeakTflopsForGpuName(d.nvidia_smi_name), d.spec.peak) << d.name;
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

}  // namespace
}  // namespace autoaccel
