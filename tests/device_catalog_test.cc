// The device catalog (search/device_catalog.h): the built-in file, the
// errors a bad user file gets, a user file overriding a built-in entry, and
// the cost model's topology: a group that crosses nodes pays the inter-node
// link.
#include "search/device_catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_replace.h"
#include "search/cost_model.h"
#include "tests/search_test_util.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

constexpr double kGiB = 1024.0 * 1024 * 1024;

// One valid entry; tests break one field of it at a time.
std::string Entry(const std::string& name) {
  return absl::StrReplaceAll(R"({
    "name": "NAME", "aliases": ["mine"], "type": "cuda", "memory_gib": 24,
    "memory_bandwidth_gb_s": 1000,
    "peak_tflops": {"fp32": 10, "bf16": 100, "fp16": 100},
    "intra_node": {"link": "PCIe", "bandwidth_gb_s": 32, "latency_us": 20},
    "inter_node": {"bandwidth_gb_s": 12.5, "latency_us": 50},
    "devices_per_node": 4,
    "source": "https://example.com/datasheet.pdf"})",
                             {{"NAME", name}});
}

std::string OneDevice(const std::string& name = "my-gpu") {
  return R"({"devices": [)" + Entry(name) + "]}";
}

TEST(DeviceCatalog, BuiltInHasTheDevicesTheIssueNamesWithEveryFigure) {
  absl::StatusOr<DeviceCatalog> catalog = DeviceCatalog::BuiltIn();
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  for (const char* name :
       {"a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "l40s", "l4"}) {
    const CatalogDevice* d = catalog->Find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->spec.type, "cuda") << name;
    EXPECT_GT(d->spec.memory_bytes, 20 * kGiB) << name;
    EXPECT_GT(d->spec.peak.bf16, d->spec.peak.fp32) << name;  // tensor cores
    EXPECT_GT(d->spec.memory_bandwidth_bytes_per_s, 0) << name;
    EXPECT_GT(d->spec.intra_node.bandwidth_bytes_per_s, d->spec.inter_node.bandwidth_bytes_per_s)
        << name;
    EXPECT_GT(d->spec.devices_per_node, 0) << name;
    EXPECT_THAT(d->source, HasSubstr("https://")) << name;
  }
  // Aliases and case.
  EXPECT_EQ(catalog->Find("H100")->name, "h100-sxm");
  EXPECT_EQ(catalog->Find("A100-80GB")->name, "a100-80gb");
  // The figures the cost model reads, in its units.
  const CatalogDevice& h100 = *catalog->Find("h100-sxm");
  EXPECT_EQ(h100.spec.memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(h100.spec.peak, (PeakTflops{67, 989, 989, 1979}));
  EXPECT_EQ(catalog->Find("a100-80gb")->spec.peak.fp8, 0);  // no fp8 tensor cores
  EXPECT_DOUBLE_EQ(h100.spec.memory_bandwidth_bytes_per_s, 3350e9);
  EXPECT_DOUBLE_EQ(h100.spec.intra_node.bandwidth_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(h100.spec.inter_node.latency_s, 50e-6);
}

// Blackwell and Instinct entries with the figures their cited pages give
// (search/device_catalog.json's notes say which page each comes from); AMD
// GPUs have type "hip", as a worker registers them; a network no source
// gave is 0 (unknown).
TEST(DeviceCatalog, BuiltInHasBlackwellAndInstinctEntries) {
  absl::StatusOr<DeviceCatalog> catalog = DeviceCatalog::BuiltIn();
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  for (const char* name : {"b200", "gb200", "mi300x", "mi325x"}) {
    const CatalogDevice* d = catalog->Find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_THAT(d->source, HasSubstr("https://")) << name;
    EXPECT_FALSE(d->notes.empty()) << name;
    EXPECT_EQ(d->price_per_gpu_hour, 0) << name;  // prices are the user's
  }
  const CatalogDevice& mi300x = *catalog->Find("MI300X");
  EXPECT_EQ(mi300x.spec.type, "hip");
  EXPECT_EQ(mi300x.spec.memory_bytes, int64_t{192} << 30);
  EXPECT_EQ(mi300x.spec.peak, (PeakTflops{163.4, 1307.4, 1307.4, 2614.9}));
  EXPECT_DOUBLE_EQ(mi300x.spec.memory_bandwidth_bytes_per_s, 5300e9);
  EXPECT_EQ(catalog->Find("mi325x")->spec.memory_bytes, int64_t{256} << 30);
  EXPECT_EQ(catalog->Find("mi325x")->spec.inter_node.bandwidth_bytes_per_s, 0);
  const CatalogDevice& b200 = *catalog->Find("b200");
  EXPECT_EQ(b200.spec.type, "cuda");
  EXPECT_EQ(b200.spec.peak, (PeakTflops{75, 2250, 2250, 4500}));
  EXPECT_DOUBLE_EQ(b200.spec.intra_node.bandwidth_bytes_per_s, 900e9);
  const CatalogDevice& gb200 = *catalog->Find("gb200");
  EXPECT_EQ(gb200.spec.devices_per_node, 72);
  EXPECT_EQ(gb200.spec.inter_node.bandwidth_bytes_per_s, 0);
}

// A user's entry may carry a price; a negative one, or an intra-node link
// of 0, is refused.
TEST(DeviceCatalog, AnEntryMayCarryAPricePerGpuHour) {
  const std::string entry = R"({"devices": [{
    "name": "rented", "type": "hip", "memory_gib": 192, "memory_bandwidth_gb_s": 5300,
    "peak_tflops": {"bf16": 1307.4}, "intra_node": {"bandwidth_gb_s": 448, "latency_us": 20},
    "inter_node": {"bandwidth_gb_s": 50, "latency_us": 50}, "devices_per_node": 8,
    "source": "https://example.com", "price_per_gpu_hour": PRICE}]})";
  const auto with = [&](const std::string& price) {
    std::string text = entry;
    text.replace(text.find("PRICE"), 5, price);
    return DeviceCatalog::Parse(text, "mine.json");
  };
  absl::StatusOr<DeviceCatalog> priced = with("2.5");
  ASSERT_TRUE(priced.ok()) << priced.status();
  EXPECT_EQ(priced->Find("rented")->price_per_gpu_hour, 2.5);
  EXPECT_THAT(with("-1").status().message(),
              HasSubstr("\"price_per_gpu_hour\" must be a positive number"));
  std::string no_link = entry;
  no_link.replace(no_link.find("448"), 3, "0");
  no_link.replace(no_link.find("PRICE"), 5, "1");
  EXPECT_THAT(DeviceCatalog::Parse(no_link, "mine.json").status().message(),
              HasSubstr("\"intra_node.bandwidth_gb_s\" must be a positive number"));
}

TEST(DeviceCatalog, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<CatalogDevice> d = DeviceCatalog::BuiltIn()->Get("b900");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr("h100-sxm"));
  EXPECT_THAT(d.status().message(), HasSubstr("--device-catalog"));
}

TEST(DeviceCatalog, ParsesAValidUserEntry) {
  absl::StatusOr<DeviceCatalog> c = DeviceCatalog::Parse(OneDevice(), "mine.json");
  ASSERT_TRUE(c.ok()) << c.status();
  const CatalogDevice* d = c->Find("MINE");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "my-gpu");
  EXPECT_EQ(d->spec.memory_bytes, int64_t{24} << 30);
  EXPECT_DOUBLE_EQ(d->spec.inter_node.bandwidth_bytes_per_s, 12.5e9);
  EXPECT_EQ(d->spec.devices_per_node, 4);
  EXPECT_EQ(d->intra_node_link, "PCIe");
}

TEST(DeviceCatalog, BadEntriesAreRefusedNamingTheFileTheEntryAndTheField) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"{", "mine.json: not a JSON document"},
      {R"({"gpus": []})", "expected {\"devices\": [ ... ]}"},
      {R"({"devices": [{"type": "cuda"}]})", "devices[0]: \"name\" is missing"},
      {absl::StrReplaceAll(OneDevice(), {{"\"memory_gib\": 24", "\"memory_gib\": -1"}}),
       "device \"my-gpu\": \"memory_gib\" must be a positive number"},
      {absl::StrReplaceAll(OneDevice(), {{"\"type\": \"cuda\"", "\"type\": \"tpu\""}}),
       "device \"my-gpu\": \"type\" is \"tpu\"; allowed: \"cuda\", \"hip\", \"cpu\""},
      {absl::StrReplaceAll(OneDevice(), {{"\"latency_us\": 50", "\"latency_us\": \"fast\""}}),
       "device \"my-gpu\": \"inter_node.latency_us\" must be a number"},
      {absl::StrReplaceAll(OneDevice(), {{"\"intra_node\"", "\"intra\""}}),
       "device \"my-gpu\": \"intra_node\" is missing"},
      {absl::StrReplaceAll(OneDevice(), {{"\"devices_per_node\": 4", "\"devices_per_node\": 2.5"}}),
       "\"devices_per_node\" must be a whole number >= 1"},
      {absl::StrReplaceAll(OneDevice(), {{"\"fp32\": 10, \"bf16\": 100, \"fp16\": 100",
                                          "\"fp32\": 0, \"bf16\": 0, \"fp16\": 0"}}),
       "\"peak_tflops\" must give at least one positive peak"},
      {absl::StrReplaceAll(OneDevice(), {{"\"source\":", "\"sources\":"}}),
       "device \"my-gpu\": \"source\" is missing"},
      {R"({"devices": [)" + Entry("a") + ", " + Entry("b") + "]}",
       "device \"b\": the name \"mine\" is already used by another entry"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<DeviceCatalog> parsed = DeviceCatalog::Parse(c.text, "mine.json");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.message));
    EXPECT_THAT(parsed.status().message(), HasSubstr("mine.json"));
  }
}

TEST(DeviceCatalog, AUserFileAddsDevicesAndOverridesBuiltInOnes) {
  DeviceCatalog catalog = *DeviceCatalog::BuiltIn();
  const size_t built_in = catalog.devices().size();
  // A cluster of H100s with 4 GPUs a node and a slower network, by alias.
  absl::StatusOr<DeviceCatalog> user = DeviceCatalog::Parse(
      absl::StrReplaceAll(OneDevice("h100-sxm"), {{"\"mine\"", "\"h100\""}}), "user.json");
  ASSERT_TRUE(user.ok()) << user.status();
  catalog.Merge(*user);
  EXPECT_EQ(catalog.devices().size(), built_in);
  EXPECT_EQ(catalog.Find("h100")->spec.devices_per_node, 4);
  EXPECT_EQ(catalog.Find("h100-sxm")->spec.memory_bytes, int64_t{24} << 30);
  catalog.Merge(*DeviceCatalog::Parse(OneDevice("new-gpu"), "user.json"));
  EXPECT_EQ(catalog.devices().size(), built_in + 1);
  EXPECT_NE(catalog.Find("new-gpu"), nullptr);
  EXPECT_NE(catalog.Find("l4"), nullptr);  // the rest stays
}

Strategy DataParallel(int dp, int tp) {
  Strategy s;
  s.data_parallel = dp;
  s.tensor_parallel = tp;
  s.pipeline_parallel = 1;
  s.sharding = Sharding::kZero1;
  s.precision = Precision::kBf16;
  s.micro_batch_size = 1;
  s.grad_accum_steps = 4;
  return s;
}

TEST(Topology, GroupsFollowMegatronsRankOrder) {
  LinkTopology four{4, 10, 2.5};
  // tp=2 inner, dp=4: each data-parallel group spans ranks r, r+2, r+4, r+6.
  GroupPlacement p = PlaceGroups(DataParallel(4, 2), four);
  EXPECT_FALSE(p.tensor_crosses);
  EXPECT_TRUE(p.data_crosses);
  // tp=8 on nodes of 4: the tensor group crosses; dp=1 has no group.
  p = PlaceGroups(DataParallel(1, 8), four);
  EXPECT_TRUE(p.tensor_crosses);
  EXPECT_FALSE(p.data_crosses);
  // Everything on one node of 8.
  p = PlaceGroups(DataParallel(4, 2), LinkTopology{8, 10, 2.5});
  EXPECT_FALSE(p.tensor_crosses || p.data_crosses || p.pipeline_crosses);
  // Unknown node size: one node.
  p = PlaceGroups(DataParallel(64, 1), LinkTopology{});
  EXPECT_FALSE(p.data_crosses);
}

TEST(Topology, ADataParallelGroupAcrossNodesPaysTheInterNodeLink) {
  const ModelSpec m = Llama7B();
  const CatalogDevice h100 = *DeviceCatalog::BuiltIn()->Find("h100-sxm");
  const Strategy s = DataParallel(8, 1);
  auto step = [&](int devices_per_node) {
    DeviceSpec device = h100.spec;
    device.devices_per_node = devices_per_node;
    return CostModel(m, 4096, 32, device).Predict(s).step_time_s;
  };
  const double one_node = step(8), two_nodes = step(4), eight_nodes = step(1);
  // Gradients over 50 GB/s instead of 450; only kCudaDataParallelExposure
  // of their link time shows (the calibrated priors: DDP overlaps them).
  EXPECT_GT(two_nodes, one_node);
  EXPECT_DOUBLE_EQ(eight_nodes, two_nodes);  // a ring is as slow as its slowest link
  // The data-parallel bytes feature counts 9x (450 / 50) once the group crosses.
  const TimeFeatures inside = StepTimeFeatures(m, 4096, s, TopologyOf(h100.spec));
  DeviceSpec split = h100.spec;
  split.devices_per_node = 4;
  const TimeFeatures across = StepTimeFeatures(m, 4096, s, TopologyOf(split));
  EXPECT_NEAR(across[kDataParallelBytes], 9 * inside[kDataParallelBytes],
              1e-9 * across[kDataParallelBytes]);
  EXPECT_EQ(across[kFlopsBf16], inside[kFlopsBf16]);
}

TEST(Topology, UnknownLinksAndCpuDevicesKeepTheOldFeatures) {
  const ModelSpec m = Llama7B();
  const Strategy s = DataParallel(8, 1);
  DeviceSpec cpu;
  cpu.devices_per_node = 2;  // no link figures: factors 1
  EXPECT_EQ(StepTimeFeatures(m, 4096, s, TopologyOf(cpu)), StepTimeFeatures(m, 4096, s));
}

TEST(Priors, CudaPriorsComeFromTheCatalogsFigures) {
  const CatalogDevice h100 = *DeviceCatalog::BuiltIn()->Find("h100-sxm");
  const TimeCoefficients c = PriorTimeCoefficients(h100.spec);
  // An H100 has fp8 tensor cores: its generation's achieved fraction.
  EXPECT_DOUBLE_EQ(c.seconds_per_unit[kFlopsBf16],
                   1 / (kCudaAchievedPeakFractionFp8Devices * 989e12));
  EXPECT_DOUBLE_EQ(c.seconds_per_unit[kFusedOptimizerParams], 28 / (0.7 * 3350e9));
  EXPECT_DOUBLE_EQ(c.seconds_per_unit[kModelParallelBytes],
                   kCudaModelParallelExposure / (0.75 * 450e9));
  EXPECT_DOUBLE_EQ(c.seconds_per_unit[kActivationElements],
                   kCudaActivationBytesPerElement / 3350e9);
  EXPECT_DOUBLE_EQ(c.seconds_per_unit[kDataParallelBytes],
                   kCudaDataParallelExposure / (0.75 * 450e9));
  EXPECT_DOUBLE_EQ(c.seconds_per_unit[kCollectives], 20e-6);
  // Without the figures: the fixed CUDA priors.
  const TimeCoefficients bare = PriorTimeCoefficients([&] {
    DeviceSpec d;
    d.type = "cuda";
    d.peak = h100.spec.peak;
    return d;
  }());
  EXPECT_DOUBLE_EQ(bare.seconds_per_unit[kFusedOptimizerParams], 3e-11);
  EXPECT_DOUBLE_EQ(bare.seconds_per_unit[kModelParallelBytes], kCudaModelParallelExposure / 50e9);
  EXPECT_DOUBLE_EQ(bare.seconds_per_unit[kActivationElements],
                   kCudaActivationBytesPerElement / 1.5e12);
  EXPECT_DOUBLE_EQ(bare.seconds_per_unit[kDataParallelBytes], kCudaDataParallelExposure / 50e9);
}

}  // namespace
}  // namespace autoaccel
