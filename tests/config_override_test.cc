// --override and --override-new (spec/config_override.h): edits of a
// config.json before it is read.
#include "spec/config_override.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/hub_configs.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

TEST(ModelOverrides, ParseKeyEqualsValue) {
  absl::StatusOr<std::pair<std::string, std::string>> kv = ParseOverride("n_layer=2");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(kv->first, "n_layer");
  EXPECT_EQ(kv->second, "2");
  kv = ParseOverride("activation_function=a=b");  // the first '=' splits
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->second, "a=b");
  kv = ParseOverride("name=");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->second, "");
  EXPECT_THAT(ParseOverride("n_layer").status(), InvalidArgument(HasSubstr("key=value")));
  EXPECT_THAT(ParseOverride("=2").status(), InvalidArgument(HasSubstr("key=value")));
}

TEST(ModelOverrides, ValuesAreJsonWhenTheyParseElseStrings) {
  nlohmann::json config = nlohmann::json::parse(kGpt2SmallConfig);
  ASSERT_THAT(ApplyConfigOverrides({{"n_layer", "2"},
                                    {"resid_pdrop", "0.0", /*new_key=*/true},
                                    {"activation_function", "gelu_pytorch_tanh"},
                                    {"n_inner", "null"},
                                    {"use_cache", "false", true},
                                    {"quoted", "\"2\"", true},
                                    {"list", "[1, 2]", true},
                                    {"empty", "", true}},
                                   &config),
              IsOk());
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["resid_pdrop"], 0.0);
  EXPECT_TRUE(config["resid_pdrop"].is_number_float());
  EXPECT_EQ(config["activation_function"], "gelu_pytorch_tanh");
  EXPECT_TRUE(config["n_inner"].is_null());
  EXPECT_EQ(config["use_cache"], false);
  EXPECT_EQ(config["quoted"], "2");
  EXPECT_EQ(config["list"], nlohmann::json::array({1, 2}));
  EXPECT_EQ(config["empty"], "");
  // The overridden config is what gets parsed: fewer layers.
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("gpt2", config);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->n_layer, 2);
  EXPECT_LT(m->ParameterCount(), Gpt2Small().ParameterCount());
}

TEST(ModelOverrides, DottedKeysReachNestedFieldsAndLaterOnesWin) {
  nlohmann::json config = nlohmann::json::parse(kLlama2_7bConfig);
  ASSERT_THAT(ApplyConfigOverrides({{"rope_parameters.rope_theta", "500000"},
                                    {"num_hidden_layers", "4"},
                                    {"num_hidden_layers", "2"},
                                    {"new.nested.key", "1", /*new_key=*/true}},
                                   &config),
              IsOk());
  EXPECT_EQ(config["rope_parameters"]["rope_theta"], 500000);
  EXPECT_EQ(config["rope_parameters"]["rope_type"], "default");  // siblings kept
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["new"]["nested"]["key"], 1);
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("llama", config);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->n_layer, 2);
  EXPECT_DOUBLE_EQ(m->rope_theta, 500000.0);
}

TEST(ModelOverrides, AKeyTheConfigDoesNotHaveIsRefusedNamingTheNearestUnlessMarkedNew) {
  // transformers 5 keeps rope_theta inside rope_parameters: CLI.md's old
  // example --override rope_theta=500000 would be silently ignored.
  nlohmann::json config = nlohmann::json::parse(kLlama2_7bConfig);
  const nlohmann::json original = config;
  EXPECT_THAT(ApplyOverrides({{"num_hidden_layers", "2"}, {"rope_theta", "500000"}}, &config),
              InvalidArgument(AllOf(HasSubstr("override[1]: model_config has no key 'rope_theta' "
                                              "(nearest: 'rope_parameters.rope_theta')"),
                                    HasSubstr("--override-new"))));
  EXPECT_EQ(config, original);  // nothing applied
  // A typo is answered with the key meant.
  EXPECT_THAT(ApplyOverrides({{"num_hiden_layers", "2"}}, &config),
              InvalidArgument(HasSubstr("(nearest: 'num_hidden_layers')")));
  // A missing nested key too, and a path whose parent is missing.
  EXPECT_THAT(ApplyOverrides({{"rope_parameters.factor", "8"}}, &config),
              InvalidArgument(HasSubstr("model_config has no key 'rope_parameters.factor'")));
  EXPECT_THAT(ApplyOverrides({{"rope_scaling.factor", "8"}}, &config),
              InvalidArgument(HasSubstr("no key 'rope_scaling.factor'")));
  // Marked new, it is added (with the objects on its path); an existing key
  // may be marked new too.
  ASSERT_THAT(ApplyConfigOverrides({{"rope_theta", "500000", /*new_key=*/true},
                                    {"rope_scaling.factor", "8", true},
                                    {"num_hidden_layers", "2", true}},
                                   &config),
              IsOk());
  EXPECT_EQ(config["rope_theta"], 500000);
  EXPECT_EQ(config["rope_scaling"]["factor"], 8);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  // A key that exists with a null value exists.
  nlohmann::json gpt2 = nlohmann::json::parse(kGpt2SmallConfig);
  EXPECT_THAT(ApplyOverrides({{"n_inner", "1024"}}, &gpt2), IsOk());
  // The text form, with the flag.
  absl::StatusOr<ConfigOverride> o = ParseConfigOverride("sliding_window=null", true);
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->key, "sliding_window");
  EXPECT_EQ(o->value, "null");
  EXPECT_TRUE(o->new_key);
  EXPECT_FALSE(ParseConfigOverride("a=1")->new_key);
  EXPECT_THAT(ParseConfigOverride("=1").status(), InvalidArgument(HasSubstr("key=value")));
}

TEST(ModelOverrides, BadOverridesChangeNothing) {
  const nlohmann::json original = nlohmann::json::parse(kGpt2SmallConfig);
  nlohmann::json config = original;
  EXPECT_THAT(
      ApplyOverrides({{"n_layer", "2"}, {"n_head.x", "1"}}, &config),
      InvalidArgument(AllOf(HasSubstr("override[1]"), HasSubstr("'n_head' is not an object"))));
  EXPECT_EQ(config, original);
  EXPECT_THAT(ApplyOverrides({{"", "1"}}, &config), InvalidArgument(HasSubstr("override[0]")));
  EXPECT_THAT(ApplyConfigOverrides({{"a..b", "1", /*new_key=*/true}}, &config),
              InvalidArgument(HasSubstr("empty key")));
  EXPECT_EQ(config, original);
  nlohmann::json not_object = nlohmann::json::array();
  EXPECT_THAT(ApplyOverrides({{"n_layer", "2"}}, &not_object),
              InvalidArgument(HasSubstr("object")));
}

// Found by tests/fuzz/model_overrides_fuzz: a value that is not JSON and not
// UTF-8 became a JSON string, and the model reader's error message printing
// it threw, ending the process.
TEST(ModelOverrides, RefusesKeysAndValuesThatAreNotUtf8) {
  nlohmann::json config = nlohmann::json::parse(R"({"n_layer": 12, "n_embd": 768})");
  const nlohmann::json before = config;
  EXPECT_THAT(ApplyConfigOverrides({{"n_layer", "2"}, {"n_embd", "1\xff"}}, &config),
              InvalidArgument(HasSubstr("override[1]: not valid UTF-8 (value byte 1)")));
  EXPECT_THAT(ApplyConfigOverrides({{"n_\xe0\x80", "2", /*new_key=*/true}}, &config),
              InvalidArgument(HasSubstr("override[0]: not valid UTF-8 (key byte 2)")));
  EXPECT_EQ(config, before);
  ASSERT_THAT(ApplyConfigOverrides({{"name", "caf\xc3\xa9", /*new_key=*/true}}, &config), IsOk());
  EXPECT_EQ(config["name"], "caf\xc3\xa9");
}

// A value nested past the JSON depth limit is refused, not parsed (parsing
// and printing nest on the stack).
TEST(ModelOverrides, RefusesValuesNestedTooDeep) {
  nlohmann::json config = nlohmann::json::parse(R"({"n_layer": 12})");
  EXPECT_THAT(ApplyConfigOverrides({{"n_layer", std::string(100000, '[')}}, &config),
              InvalidArgument(HasSubstr("override[0]: value nested deeper than 64 levels")));
}

}  // namespace
}  // namespace autoaccel
