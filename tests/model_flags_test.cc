// The model flags tune, estimate and export share (client/model_flags.h):
// one definition parsed by CLI11, one reading into a ModelSpec.
#include "client/model_flags.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

// Parses `args` (after the program name) with the flags of `use`.
absl::Status Parse(std::vector<std::string> args, const ModelFlags::Use& use, ModelFlags* flags) {
  CLI::App app;
  flags->Add(&app, use);
  std::vector<const char*> argv = {"autoaccel"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return absl::OkStatus();
}

TEST(ModelFlagsTest, EveryCommandReadsTheSameFlagsIntoTheSameSpec) {
  const std::string config = testing::TempDir() + "/model_flags_config.json";
  std::ofstream(config) << R"({"n_layer": 2})";
  ModelFlags flags;
  ASSERT_TRUE(Parse({"--model", "gpt2", "--model-config", config, "--override", "n_layer=4",
                     "--override-new", "extra=1"},
                    ModelFlags::Use(), &flags)
                  .ok());
  v1::ModelSpec spec;
  ASSERT_TRUE(flags.Fill(&spec, /*optional=*/false).ok());
  EXPECT_EQ(spec.family(), "gpt2");
  EXPECT_EQ(spec.config_json(), R"({"n_layer": 2})");
  EXPECT_THAT(spec.overrides(), ::testing::ElementsAre("n_layer=4"));
  EXPECT_THAT(spec.new_overrides(), ::testing::ElementsAre("extra=1"));
  std::filesystem::remove(config);
}

TEST(ModelFlagsTest, MissingOrUnreadableFlagsAreNamed) {
  ModelFlags flags;
  v1::ModelSpec spec;
  EXPECT_TRUE(flags.Fill(&spec, /*optional=*/true).ok()) << "no model, and none needed";
  EXPECT_THAT(std::string(flags.Fill(&spec, false).message()),
              HasSubstr("--model FAMILY is required"));
  flags.overrides = {"n_layer=2"};
  EXPECT_THAT(std::string(flags.Fill(&spec, true).message()),
              HasSubstr("--model FAMILY is required with --model-config"));
  flags = ModelFlags();
  flags.family = "llama";
  EXPECT_THAT(std::string(flags.Fill(&spec, false).message()),
              HasSubstr("--model llama needs --model-config FILE"));
  flags.config_file = "/nonexistent/config.json";
  EXPECT_THAT(std::string(flags.Fill(&spec, false).message()), HasSubstr("--model-config"));
  // TorchScript only where the command takes a module.
  ModelFlags script;
  ASSERT_TRUE(Parse({"--model", "torchscript"}, ModelFlags::Use(), &script).ok());
  EXPECT_THAT(std::string(script.Fill(&spec, false).message()),
              HasSubstr("`tune` takes a TorchScript module"));
  ModelFlags::Use tune;
  tune.torchscript = true;
  ModelFlags tuned;
  ASSERT_TRUE(Parse({"--model", "torchscript"}, tune, &tuned).ok());
  EXPECT_THAT(std::string(tuned.Fill(&spec, false).message()),
              HasSubstr("needs --model-file FILE.pt and --input-spec SPEC"));
  EXPECT_FALSE(Parse({"--model-file", "m.pt"}, ModelFlags::Use(), &script).ok())
      << "estimate and export have no --model-file";
}

}  // namespace
}  // namespace autoaccel
