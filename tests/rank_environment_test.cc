// What of the worker's environment a trial rank inherits
// (worker/rank_environment.h): what training needs, never a credential, and
// exactly the operator's list when given.
#include "worker/rank_environment.h"

#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/child_process.h"

namespace autoaccel {
namespace {

using ::testing::Contains;
using ::testing::Not;

std::vector<std::string> Names(const std::vector<std::string>& env) {
  std::vector<std::string> names;
  for (const std::string& e : env) names.push_back(e.substr(0, e.find('=')));
  return names;
}

class RankEnvAllowlistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) ::setenv(name, "x", 1);
  }
  void TearDown() override {
    for (const char* name : kVariables) ::unsetenv(name);
  }
  static constexpr const char* kVariables[] = {"AUTOACCEL_TOKEN",
                                               "AWS_SECRET_ACCESS_KEY",
                                               "HF_TOKEN",
                                               "GITHUB_TOKEN",
                                               "NCCL_DEBUG",
                                               "LC_ALL",
                                               "CUDA_VISIBLE_DEVICES",
                                               "MY_SETTING",
                                               "TOKENIZERS_PARALLELISM"};
};

TEST_F(RankEnvAllowlistTest, RanksGetWhatTrainingNeedsAndNoCredential) {
  const RankEnvAllowlist allow;
  const std::vector<std::string> names =
      Names(ChildEnvironment({{"RANK", "0"}, {"AUTOACCEL_TRIAL_ID", "t"}}, {}, &allow));
  for (const char* kept : {"PATH", "NCCL_DEBUG", "LC_ALL", "CUDA_VISIBLE_DEVICES",
                           "TOKENIZERS_PARALLELISM", "RANK", "AUTOACCEL_TRIAL_ID"}) {
    EXPECT_THAT(names, Contains(kept));
  }
  for (const char* dropped :
       {"AUTOACCEL_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "GITHUB_TOKEN", "MY_SETTING"}) {
    EXPECT_THAT(names, Not(Contains(dropped)));
  }
  // Without a list (the worker's own helpers): everything.
  EXPECT_THAT(Names(ChildEnvironment({}, {})), Contains("AUTOACCEL_TOKEN"));
}

TEST_F(RankEnvAllowlistTest, TheOperatorsListReplacesTheDefaultAndNamesSecretsExactly) {
  const RankEnvAllowlist allow({"MY_*", "HF_TOKEN", "AWS_*"});
  const std::vector<std::string> names = Names(ChildEnvironment({}, {}, &allow));
  EXPECT_THAT(names, Contains("MY_SETTING"));
  EXPECT_THAT(names, Contains("HF_TOKEN")) << "named exactly";
  EXPECT_THAT(names, Not(Contains("AWS_SECRET_ACCESS_KEY"))) << "a prefix never passes a secret";
  EXPECT_THAT(names, Not(Contains("PATH")));
  EXPECT_TRUE(RankEnvAllowlist(std::vector<std::string>{}).Allows("PATH")) << "empty: the default";
}

}  // namespace
}  // namespace autoaccel
