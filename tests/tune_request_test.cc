// Request validation: every bound a hostile or mistaken request could cross
// is refused with INVALID_ARGUMENT naming the field, before any costly work.
#include "server/tune_request.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/untrusted_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
  "n_positions": 64})";

v1::TuneRequest Request() {
  v1::TuneRequest r;
  r.mutable_model()->set_family("gpt2");
  r.mutable_model()->set_config_json(kTinyGpt);
  r.set_seq_len(16);
  r.set_global_batch_size(4);
  r.set_time_limit_seconds(60);
  return r;
}

// The error a request gets, or "" when it is accepted.
std::string Refusal(const v1::TuneRequest& r) {
  absl::StatusOr<JobSpec> v = ValidateTuneRequest(r, TuneDefaults());
  if (v.ok()) return "";
  // Oversized input is RESOURCE_EXHAUSTED (server/request_limits.h).
  EXPECT_THAT(v.status().code(), testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                                absl::StatusCode::kResourceExhausted))
      << v.status();
  return std::string(v.status().message());
}

TEST(TuneRequestTest, AGoodRequestGetsItsDefaults) {
  absl::StatusOr<JobSpec> v = ValidateTuneRequest(Request(), TuneDefaults());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->request.world_size(), 1);
  EXPECT_EQ(v->request.measured_steps(), 5);
  EXPECT_EQ(v->request.device_type(), "cpu");
  EXPECT_FALSE(v->space.empty());
  // The job runs from the typed spec, defaults included.
  EXPECT_EQ(v->world_size, 1);
  EXPECT_EQ(v->device_type, "cpu");
  EXPECT_EQ(v->measured_steps, 5);
  EXPECT_EQ(v->warmup_steps, 2);
  EXPECT_EQ(v->trial_timeout, absl::Minutes(10));
  EXPECT_EQ(v->time_limit, absl::Seconds(Request().time_limit_seconds()));
  EXPECT_EQ(v->seq_len, Request().seq_len());
  EXPECT_EQ(v->script, nullptr);
}

TEST(TuneRequestTest, NumbersThatNeverEndOrOverflowAreRefusedNamingTheField) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double limit : {inf, 1e300, nan, -1.0, 0.0}) {
    v1::TuneRequest r = Request();
    r.set_time_limit_seconds(limit);
    EXPECT_THAT(Refusal(r), StartsWith("time_limit_seconds: ")) << limit;
  }
  for (double timeout : {nan, inf, -5.0, 1e9}) {
    v1::TuneRequest r = Request();
    r.set_trial_timeout_seconds(timeout);
    EXPECT_THAT(Refusal(r), StartsWith("trial_timeout_seconds: ")) << timeout;
  }
  v1::TuneRequest r = Request();
  r.set_measured_steps(std::numeric_limits<int32_t>::max());
  EXPECT_THAT(Refusal(r), StartsWith("measured_steps: "));
  r = Request();
  r.set_warmup_steps(-1);
  EXPECT_THAT(Refusal(r), StartsWith("warmup_steps: "));
  r = Request();
  r.set_world_size(1 << 20);
  EXPECT_THAT(Refusal(r), StartsWith("world_size: "));
  r = Request();
  r.set_max_trials(-3);
  EXPECT_THAT(Refusal(r), StartsWith("max_trials: "));
}

// A space of millions: tests/request_limits_test.cc.

TEST(TuneRequestTest, OversizedOrDeeplyNestedInputIsRefusedWithoutParsingIt) {
  v1::TuneRequest r = Request();
  r.mutable_model()->set_config_json(std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_THAT(Refusal(r), AllOf(StartsWith("model_config: "), HasSubstr("levels of nesting")));
  r = Request();
  r.mutable_model()->set_config_json(
      absl::StrCat(R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64, )",
                   R"("n_positions": 64, "padding": ")", std::string(8 << 20, 'x'), "\"}"));
  EXPECT_THAT(Refusal(r), AllOf(StartsWith("model_config: "), HasSubstr("bytes")));
  r = Request();
  r.mutable_model()->add_overrides("n_layer=" + std::string(2000, '[') + std::string(2000, ']'));
  EXPECT_THAT(Refusal(r), StartsWith("override[0]: "));
  r = Request();
  r.set_load_strategy(std::string(2000, '[') + std::string(2000, ']'));
  EXPECT_THAT(Refusal(r), StartsWith("load_strategy: "));
  r = Request();
  for (int i = 0; i < 300; ++i) r.add_precisions("bf16");
  EXPECT_THAT(Refusal(r), StartsWith("precisions: "));
  r = Request();
  r.set_algorithm(std::string(20000, 'a'));
  EXPECT_THAT(Refusal(r), StartsWith("algorithm: "));
}

TEST(TuneRequestTest, AnOverrideOfAKeyTheConfigLacksIsRefusedUnlessMarkedNew) {
  v1::TuneRequest r = Request();
  r.mutable_model()->set_family("llama");
  r.mutable_model()->set_config_json(
      R"({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 64, "max_position_embeddings": 64,
          "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}})");
  r.mutable_model()->add_overrides("rope_theta=500000");
  EXPECT_THAT(Refusal(r), AllOf(StartsWith("override[0]: "),
                                HasSubstr("nearest: 'rope_parameters.rope_theta'")));
  r.mutable_model()->clear_overrides();
  r.mutable_model()->add_overrides("rope_parameters.rope_theta=500000");
  absl::StatusOr<JobSpec> v = ValidateTuneRequest(r, TuneDefaults());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->model.rope_theta, 500000);
  // A key it does not have, added on purpose.
  r.mutable_model()->add_new_overrides("use_cache=false");
  EXPECT_TRUE(ValidateTuneRequest(r, TuneDefaults()).ok());
}

TEST(UntrustedJsonTest, DepthCountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": 2}]})"), 3);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[[{{{{", "b": "\"[["})"), 1);
  EXPECT_EQ(JsonNestingDepth("42"), 0);
  EXPECT_TRUE(ParseUntrustedJson(R"({"x": [[1]]})", "x").ok());
  absl::StatusOr<nlohmann::json> bad = ParseUntrustedJson("{\"x\": ", "model_config");
  EXPECT_THAT(std::string(bad.status().message()), StartsWith("model_config: not valid JSON"));
}

}  // namespace
}  // namespace autoaccel
