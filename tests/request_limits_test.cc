// The request limits: every row of kRequestLimits that a check enforces is
// accepted at its bound and refused one past it, with the row's code and a
// message naming the field, the value and the bound; and the coordinator's
// entry points (ValidateTuneRequest, WorkerPool::Register) apply them.
#include "server/request_limits.h"

#include <functional>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/status_matchers.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tune_request.h"
#include "server/worker_pool.h"
#include "tests/register_request.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
  "n_positions": 64})";

v1::TuneRequest Tune() {
  v1::TuneRequest r;
  r.mutable_model()->set_family("gpt2");
  r.mutable_model()->set_config_json(kTinyGpt);
  r.set_seq_len(16);
  r.set_global_batch_size(4);
  r.set_time_limit_seconds(60);
  return r;
}

ModelSpec Model(const std::string& family = "gpt2") {
  ModelSpec m;
  m.family = family;
  m.n_layer = 2;
  m.n_embd = 32;
  m.n_head = 4;
  m.vocab_size = 64;
  m.n_positions = 64;
  m.n_inner = 128;
  return m;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

v1::RegisterRequest Register() { return RegisterRequestFor("w1", "127.0.0.1:7000", 1); }

// A JSON text of exactly `bytes` bytes (>= 8).
std::string JsonOfSize(int64_t bytes) {
  return absl::StrCat("{\"x\":\"", std::string(bytes - 8, 'a'), "\"}");
}

// How to put a value into a request for one row, the field its error names,
// and the check that reads it.
struct Probe {
  std::string field;
  std::function<absl::Status(int64_t)> check;
};

std::map<Limit, Probe> Probes() {
  using R = v1::TuneRequest;
  auto tune = [](std::function<void(R&, int64_t)> set) {
    return [set](int64_t v) {
      R r = Tune();
      set(r, v);
      return CheckTuneRequestLimits(r);
    };
  };
  auto model = [](int ModelSpec::*member) {
    return [member](int64_t v) {
      ModelSpec m = Model();
      m.*member = static_cast<int>(v);
      return CheckModelLimits(m);
    };
  };
  auto reg = [](std::function<void(v1::RegisterRequest&, int64_t)> set) {
    return [set](int64_t v) {
      v1::RegisterRequest r = Register();
      set(r, v);
      return CheckRegisterRequestLimits(r);
    };
  };
  return {
      {Limit::kModelConfigBytes, {"model_config", tune([](R& r, int64_t v) {
                                    r.mutable_model()->set_config_json(JsonOfSize(v));
                                  })}},
      {Limit::kJsonDepth, {"model_config", tune([](R& r, int64_t v) {
                             r.mutable_model()->set_config_json(std::string(v, '[') +
                                                                std::string(v, ']'));
                           })}},
      {Limit::kOverrides, {"override", tune([](R& r, int64_t v) {
                             for (int64_t i = 0; i < v; ++i)
                               r.mutable_model()->add_overrides("a=1");
                           })}},
      {Limit::kOverrideBytes, {"override[1]", tune([](R& r, int64_t v) {
                                 r.mutable_model()->add_overrides("n_layer=2");
                                 r.mutable_model()->add_new_overrides(
                                     absl::StrCat("x=", std::string(v - 2, '1')));
                               })}},
      {Limit::kModelFileBytes, {"model_file", tune([](R& r, int64_t v) {
                                  r.mutable_model()->mutable_script()->resize(v);
                                })}},
      {Limit::kTextBytes,
       {"algorithm", tune([](R& r, int64_t v) { r.set_algorithm(std::string(v, 'a')); })}},
      {Limit::kListEntries, {"precisions", tune([](R& r, int64_t v) {
                               for (int64_t i = 0; i < v; ++i) r.add_precisions("bf16");
                             })}},
      {Limit::kLauncherNameBytes,
       {"launcher", tune([](R& r, int64_t v) { r.set_launcher(std::string(v, 'l')); })}},
      {Limit::kDeviceTypeBytes,
       {"device_type", tune([](R& r, int64_t v) { r.set_device_type(std::string(v, 'd')); })}},
      {Limit::kTimeLimitSeconds,
       {"time_limit_seconds", tune([](R& r, int64_t v) { r.set_time_limit_seconds(v); })}},
      {Limit::kTrialTimeoutSeconds,
       {"trial_timeout_seconds", tune([](R& r, int64_t v) { r.set_trial_timeout_seconds(v); })}},
      {Limit::kSteps, {"measured_steps", tune([](R& r, int64_t v) { r.set_measured_steps(v); })}},
      {Limit::kMinMeasuredSeconds,
       {"min_measured_seconds", tune([](R& r, int64_t v) { r.set_min_measured_seconds(v); })}},
      {Limit::kConfirmTolerance,
       {"confirm_tolerance", tune([](R& r, int64_t v) { r.set_confirm_tolerance(v); })}},
      {Limit::kMaxTrials, {"max_trials", tune([](R& r, int64_t v) { r.set_max_trials(v); })}},
      {Limit::kWorldSize, {"world_size", tune([](R& r, int64_t v) { r.set_world_size(v); })}},
      {Limit::kSeqLen, {"seq_len", tune([](R& r, int64_t v) { r.set_seq_len(v); })}},
      {Limit::kGlobalBatchSize,
       {"global_batch_size", tune([](R& r, int64_t v) { r.set_global_batch_size(v); })}},
      {Limit::kLayers, {"model_config.n_layer", model(&ModelSpec::n_layer)}},
      {Limit::kHidden, {"model_config.n_embd", model(&ModelSpec::n_embd)}},
      {Limit::kHeads, {"model_config.n_head", model(&ModelSpec::n_head)}},
      {Limit::kHeadDim, {"model_config.head_dim", model(&ModelSpec::head_dim)}},
      {Limit::kMlpWidth, {"model_config.n_inner", model(&ModelSpec::n_inner)}},
      {Limit::kVocabulary, {"model_config.vocab_size", model(&ModelSpec::vocab_size)}},
      {Limit::kPositions, {"model_config.n_positions", model(&ModelSpec::n_positions)}},
      {Limit::kExperts, {"model_config.num_local_experts", model(&ModelSpec::num_local_experts)}},
      {Limit::kExpertWidth,
       {"model_config.moe_intermediate_size", model(&ModelSpec::moe_intermediate_size)}},
      {Limit::kLatentRank, {"model_config.kv_lora_rank", model(&ModelSpec::kv_lora_rank)}},
      {Limit::kWorkerIdBytes,
       {"worker_id", reg([](auto& r, int64_t v) { r.set_worker_id(std::string(v, 'w')); })}},
      {Limit::kIdentityKeyBytes,
       {"identity_key", reg([](auto& r, int64_t v) { r.set_identity_key(std::string(v, 'k')); })}},
      {Limit::kAddressBytes,
       {"address", reg([](auto& r, int64_t v) { r.set_address(std::string(v, 'a')); })}},
      {Limit::kDevices, {"devices", reg([](auto& r, int64_t v) {
                           r = RegisterRequestFor("w1", "127.0.0.1:7000", static_cast<int>(v));
                         })}},
      {Limit::kDeviceIndex,
       {"devices[0].index", reg([](auto& r, int64_t v) { r.mutable_devices(0)->set_index(v); })}},
      {Limit::kDeviceNameBytes, {"devices[0].name", reg([](auto& r, int64_t v) {
                                   r.mutable_devices(0)->set_name(std::string(v, 'n'));
                                 })}},
      {Limit::kDeviceMemoryBytes, {"devices[0].memory_bytes", reg([](auto& r, int64_t v) {
                                     r.mutable_devices(0)->set_memory_bytes(v);
                                   })}},
      {Limit::kDevicePeakTflops, {"devices[0].peak_tflops.bf16", reg([](auto& r, int64_t v) {
                                    r.mutable_devices(0)->mutable_peak_tflops()->set_bf16(v);
                                  })}},
      {Limit::kRendezvousPort,
       {"rendezvous_port_max", reg([](auto& r, int64_t v) { r.set_rendezvous_port_max(v); })}},
      {Limit::kHostCores,
       {"host_cpu_cores", reg([](auto& r, int64_t v) { r.set_host_cpu_cores(v); })}},
      {Limit::kHostMemoryBytes,
       {"host_memory_bytes", reg([](auto& r, int64_t v) { r.set_host_memory_bytes(v); })}},
      {Limit::kLaunchers, {"launchers", reg([](auto& r, int64_t v) {
                             for (int64_t i = 0; i < v; ++i) r.add_launchers()->set_name("l");
                           })}},
      {Limit::kLauncherFormatBytes, {"launchers[0].format", reg([](auto& r, int64_t v) {
                                       r.add_launchers()->set_format(std::string(v, 'f'));
                                     })}},
      {Limit::kLauncherDimensions, {"launchers[0].dimensions", reg([](auto& r, int64_t v) {
                                      v1::Launcher* l = r.add_launchers();
                                      for (int64_t i = 0; i < v; ++i) l->add_dimensions("tp");
                                    })}},
  };
}

bool CheckedHere(const RequestLimit& row) {
  const absl::string_view by = row.checked_by;
  return by == kByTune || by == kByModel || by == kByRegister;
}

TEST(RequestLimitsTest, EveryCheckedLimitIsAcceptedAtItsBoundAndRefusedPastItNamingTheField) {
  const std::map<Limit, Probe> probes = Probes();
  for (const RequestLimit& row : kRequestLimits) {
    if (!CheckedHere(row)) continue;
    auto probe = probes.find(row.limit);
    ASSERT_NE(probe, probes.end()) << row.field << ": a checked row without a test";
    SCOPED_TRACE(probe->second.field);
    EXPECT_TRUE(probe->second.check(row.max).ok()) << probe->second.check(row.max);
    const absl::Status over = probe->second.check(row.max + 1);
    EXPECT_EQ(over.code(), row.over) << over;
    EXPECT_THAT(Message(over),
                AllOf(StartsWith(probe->second.field + ": "), HasSubstr(absl::StrCat(row.max + 1)),
                      HasSubstr(absl::StrCat("at most ", row.max))));
  }
}

TEST(RequestLimitsTest, SizesAreResourceExhaustedAndValuesInvalidArgument) {
  EXPECT_EQ(LimitRow(Limit::kModelConfigBytes).over, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(LimitRow(Limit::kDevices).over, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(LimitRow(Limit::kSpaceCombinations).over, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(LimitRow(Limit::kWorldSize).over, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LimitRow(Limit::kLayers).over, absl::StatusCode::kInvalidArgument);
}

TEST(RequestLimitsTest, NegativeAndNonFiniteNumbersAreInvalidArgumentNamingTheField) {
  v1::TuneRequest r = Tune();
  r.set_world_size(-1);
  absl::Status s = CheckTuneRequestLimits(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), StartsWith("world_size: -1 ranks, must be between 0 and 65536"));
  r = Tune();
  r.set_min_measured_seconds(std::nan(""));
  EXPECT_THAT(Message(CheckTuneRequestLimits(r)), StartsWith("min_measured_seconds: nan"));
  v1::RegisterRequest w = Register();
  w.mutable_devices(0)->set_memory_bytes(-5);
  s = CheckRegisterRequestLimits(w);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), StartsWith("devices[0].memory_bytes: -5 bytes"));
  w = Register();
  w.mutable_devices(0)->mutable_peak_tflops()->set_fp16(std::numeric_limits<double>::infinity());
  EXPECT_THAT(Message(CheckRegisterRequestLimits(w)),
              StartsWith("devices[0].peak_tflops.fp16: inf"));
}

TEST(RequestLimitsTest, ExportAndEstimateRequestsAreBoundedAsATuningRequestsParts) {
  // The coordinator parses what they carry (offline/), so the same bounds hold.
  const std::string huge_config(LimitMax(Limit::kModelConfigBytes) + 1, ' ');
  v1::ExportRequest e;
  e.set_strategy("mbs=4");
  EXPECT_OK(CheckExportRequestLimits(e));
  e.mutable_model()->set_config_json(huge_config);
  absl::Status s = CheckExportRequestLimits(e);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(s), StartsWith("model_config: 262145 bytes"));
  e = v1::ExportRequest();
  e.set_world_size(70000);
  EXPECT_THAT(Message(CheckExportRequestLimits(e)), StartsWith("world_size: 70000 ranks"));
  e = v1::ExportRequest();
  e.set_strategy(std::string(LimitMax(Limit::kTextBytes) + 1, 'x'));
  EXPECT_THAT(Message(CheckExportRequestLimits(e)), StartsWith("strategy: 16385 bytes"));

  v1::EstimateRequest r;
  r.set_top(5);
  r.set_device_catalog_json(std::string(20000, ' '));  // larger than a text field, fine
  EXPECT_OK(CheckEstimateRequestLimits(r));
  r.set_device_catalog_json(huge_config);
  EXPECT_THAT(Message(CheckEstimateRequestLimits(r)), StartsWith("device_catalog_json: 262145"));
  r = v1::EstimateRequest();
  r.set_top(100000);
  EXPECT_THAT(Message(CheckEstimateRequestLimits(r)), StartsWith("top: 100000 entries"));
  r = v1::EstimateRequest();
  r.mutable_model()->add_overrides(std::string(LimitMax(Limit::kOverrideBytes) + 1, 'x'));
  EXPECT_THAT(Message(CheckEstimateRequestLimits(r)), StartsWith("override[0]: "));
  // A sweep: each world size bounded, and the clusters it asks for.
  r = v1::EstimateRequest();
  for (int w : {64, 128, 256, 512, 1024, 2048, 4096, 8192}) r.add_world_sizes(w);
  for (int d = 0; d < 4; ++d) r.add_devices(absl::StrCat("device-", d));
  EXPECT_OK(CheckEstimateRequestLimits(r));  // 32 clusters
  r.add_devices("one-more");
  s = CheckEstimateRequestLimits(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(s), StartsWith("world_sizes x devices: 40 clusters, at most 32"));
  r = v1::EstimateRequest();
  r.add_world_sizes(8);
  r.add_world_sizes(70000);
  EXPECT_THAT(Message(CheckEstimateRequestLimits(r)), StartsWith("world_sizes[1]: 70000 ranks"));
}

TEST(RequestLimitsTest, AStrategyQueryIsBoundedAsATuningRequestsParts) {
  // QueryStrategies parses the model's config as a tuning request does.
  v1::QueryStrategiesRequest q;
  q.set_seq_len(1024);
  q.set_global_batch_size(8);
  EXPECT_OK(CheckQueryRequestLimits(q));
  q.mutable_model()->set_config_json(std::string(LimitMax(Limit::kModelConfigBytes) + 1, ' '));
  absl::Status s = CheckQueryRequestLimits(q);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(s), StartsWith("model_config: 262145 bytes"));
  q = v1::QueryStrategiesRequest();
  q.set_seq_len(-1);
  EXPECT_THAT(Message(CheckQueryRequestLimits(q)), StartsWith("seq_len: -1"));
  q = v1::QueryStrategiesRequest();
  q.set_device_type(std::string(LimitMax(Limit::kDeviceTypeBytes) + 1, 'x'));
  EXPECT_THAT(Message(CheckQueryRequestLimits(q)), StartsWith("device_type: 33 bytes"));
  q = v1::QueryStrategiesRequest();
  q.mutable_model()->set_family(std::string(LimitMax(Limit::kTextBytes) + 1, 'x'));
  EXPECT_THAT(Message(CheckQueryRequestLimits(q)), StartsWith("model.family: 16385 bytes"));
}

TEST(RequestLimitsTest, AModelDimensionIsNamedAsTheFamilysConfigNamesIt) {
  ModelSpec m = Model("llama");
  m.n_layer = 5000;
  EXPECT_THAT(Message(CheckModelLimits(m)),
              StartsWith("model_config.num_hidden_layers: 5000, at most 1024 allowed"));
  m = Model("gpt2");
  m.vocab_size = 1 << 30;
  EXPECT_THAT(Message(CheckModelLimits(m)), StartsWith("model_config.vocab_size: 1073741824"));
}

TEST(RequestLimitsTest, AFieldAddedToTheRequestIsBoundedWithoutARowOfItsOwn) {
  // input_spec and load_strategy have no row: the walk over every string
  // field bounds them.
  v1::TuneRequest r = Tune();
  r.mutable_model()->set_input_spec(std::string(LimitMax(Limit::kTextBytes) + 1, 'x'));
  absl::Status s = CheckTuneRequestLimits(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(s), StartsWith("model.input_spec: 16385 bytes, at most 16384 allowed"));
  r = Tune();
  r.add_include(std::string(LimitMax(Limit::kTextBytes) + 1, 'x'));
  EXPECT_THAT(Message(CheckTuneRequestLimits(r)), StartsWith("include[0]: "));
}

TEST(RequestLimitsTest, ValidateTuneRequestRefusesAHugeModelBeforeBuildingItsSpace) {
  v1::TuneRequest r = Tune();
  r.mutable_model()->set_config_json(
      R"({"n_layer": 100000, "n_embd": 32, "n_head": 4, "vocab_size": 64, "n_positions": 64})");
  absl::StatusOr<JobSpec> v = ValidateTuneRequest(r, TuneDefaults());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(v.status()), StartsWith("model_config.n_layer: 100000, at most 1024"));
  // An override that raises a dimension past its bound is refused too.
  r = Tune();
  r.mutable_model()->add_overrides("vocab_size=100000000");
  v = ValidateTuneRequest(r, TuneDefaults());
  EXPECT_THAT(Message(v.status()), StartsWith("model_config.vocab_size: 100000000"));
}

TEST(RequestLimitsTest, ASpaceOverItsBoundIsResourceExhaustedNamingItsDimensions) {
  // 5,040 ranks have 60 divisors; with 100 checkpoint percents the cross
  // product runs to millions of combinations, refused before it is built.
  v1::TuneRequest r = Tune();
  r.mutable_model()->set_config_json(
      R"({"n_layer": 1008, "n_embd": 5040, "n_head": 1008, "vocab_size": 5040,
          "n_positions": 64})");
  r.set_world_size(5040);
  r.set_global_batch_size(5040);
  for (int p = 1; p <= 100; ++p) r.add_checkpoint_percents(p);
  absl::StatusOr<JobSpec> v = ValidateTuneRequest(r, TuneDefaults());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(v.status()),
              AllOf(StartsWith("space: "), HasSubstr("more than the 250000 searched"),
                    HasSubstr("layouts"), HasSubstr("checkpointings")));
}

TEST(RequestLimitsTest, AWorkerAdvertisingTooManyDevicesIsRefusedAndNotRegistered) {
  FakeClock clock;
  WorkerPool pool(&clock);
  absl::Status s = pool.Register(RegisterRequestFor("fake", "127.0.0.1:1", 2000)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(s), StartsWith("devices: 2000 entries, at most 1024 allowed"));
  v1::RegisterRequest huge = RegisterRequestFor("fake", "127.0.0.1:1", 1);
  huge.mutable_devices(0)->set_memory_bytes(int64_t{1} << 50);  // 1 PiB
  EXPECT_EQ(pool.Register(huge).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.List(), IsEmpty());
  EXPECT_TRUE(pool.Register(RegisterRequestFor("real", "127.0.0.1:2", 1024)).ok());
}

// Found by bench/api_fuzz.py: a worker id with a newline forged a line of
// the coordinator's log ("worker evil\n[...] [info] forged line lost: ..."),
// and escape sequences in a device name reached `autoaccel workers`.
TEST(RequestLimitsTest, AControlCharacterInAnyStringOfARegistrationIsRefusedNamingTheField) {
  v1::RegisterRequest r = Register();
  r.set_worker_id("evil\n[2026-11-24 20:00:00.000] [info] forged line");
  absl::Status s = CheckRegisterRequestLimits(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), StartsWith("worker_id: control character U+000A at byte 4"));

  r = Register();
  r.mutable_devices(0)->set_name("cpu\x1b[2J");
  EXPECT_THAT(Message(CheckRegisterRequestLimits(r)),
              StartsWith("devices[0].name: control character U+001B at byte 3"));
  r = Register();
  r.add_launchers()->add_dimensions(
      "mbs\xc2\x9b"
      "31m");  // C1 CSI as UTF-8
  EXPECT_THAT(Message(CheckRegisterRequestLimits(r)),
              StartsWith("launchers[0].dimensions[0]: control character U+009B at byte 3"));
  r = Register();
  r.set_address("127.0.0.1:7000\x7f");
  EXPECT_THAT(Message(CheckRegisterRequestLimits(r)), StartsWith("address: control character"));

  // Printable text outside ASCII is a name like any other.
  r = Register();
  r.set_worker_id("gpu-nœud-7");
  r.mutable_devices(0)->set_name("NVIDIA H100 80GB HBM3 \xc2\xa0(\xe2\x84\xa2)");
  EXPECT_TRUE(CheckRegisterRequestLimits(r).ok()) << CheckRegisterRequestLimits(r);

  // The pool applies it: nothing is registered.
  FakeClock clock;
  WorkerPool pool(&clock);
  EXPECT_EQ(pool.Register(RegisterRequestFor("w\tx", "127.0.0.1:1", 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.List(), IsEmpty());
}

// An error that quotes a caller's 16 KiB of input sends 2 KiB back, cut at
// a character boundary.
TEST(StatusMessage, AnEchoOfTheInputIsCut) {
  const std::string input(16 * 1024, 'x');
  const grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError("model: '" + input + "'"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(s.error_message().size(), kMaxStatusMessageBytes + 32);
  EXPECT_THAT(s.error_message(), ::testing::EndsWith("more bytes)"));
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("short")).error_message(), "short");
  std::string accents = std::string(kMaxStatusMessageBytes - 1, 'a') + "\xc3\xa9\xc3\xa9";
  EXPECT_TRUE(IsValidUtf8(ToGrpcStatus(absl::InternalError(accents)).error_message()));
}

}  // namespace
}  // namespace autoaccel
