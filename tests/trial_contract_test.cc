// The trial contract: what the coordinator sends of a spec, and that a spec
// survives the runner's file.
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model_test_util.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {
namespace {
using ::testing::HasSubstr;

TrialSpec FullSpec() {
  TrialSpec spec;
  spec.trial_id = "job-1-t0002";
  spec.attempt = 3;
  spec.rank = 1;
  spec.world_size = 2;
  spec.local_rank = 1;
  spec.local_world_size = 2;
  spec.group_rank = 0;
  spec.local_device_indices = {3, 1};
  spec.master_addr = "10.0.0.7";
  spec.master_port = 29501;
  spec.model = testing::TinyModelSpec("gpt2");
  spec.seq_len = 4;
  spec.global_batch_size = 2;
  spec.warmup_steps = 1;
  spec.measured_steps = 3;
  spec.memory_limit_bytes = 1 << 30;
  spec.device = "cuda:1";
  spec.num_threads = 8;
  spec.seed = 7;
  spec.peak_tflops = PeakTflops{1, 2, 3};
  spec.model_file = "/work/models/sha256-ab.pt";
  return spec;
}

TEST(TrialSpecTest, TheCoordinatorSendsItsFieldsAndNoneOfTheWorkers) {
  const nlohmann::json sent = TrialSpecToRequestJson(FullSpec());
  for (const char* key : kWorkerFilledTrialSpecKeys) {
    EXPECT_FALSE(sent.contains(key)) << key << " is the worker's";
  }
  absl::StatusOr<TrialSpec> got = TrialSpecFromJson(sent);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->rank, 1);
  EXPECT_EQ(got->world_size, 2);
  EXPECT_EQ(got->master_addr, "10.0.0.7");
  EXPECT_EQ(got->master_port, 29501);
  EXPECT_EQ(got->local_rank, 1);
  EXPECT_EQ(got->local_world_size, 2);
  EXPECT_EQ(got->group_rank, 0);
  EXPECT_THAT(got->local_device_indices, ::testing::ElementsAre(3, 1));
  EXPECT_EQ(got->measured_steps, 3);
  EXPECT_EQ(got->memory_limit_bytes, 1 << 30);
  EXPECT_EQ(got->peak_tflops, (PeakTflops{1, 2, 3}));
  // The worker's fields read as unfilled.
  EXPECT_EQ(got->trial_id, "");
  EXPECT_EQ(got->device, "cpu");
  EXPECT_EQ(got->model_file, "");
}

TEST(TrialSpecTest, TheRunnersFileCarriesEveryField) {
  const nlohmann::json file = TrialSpecToJson(FullSpec());
  for (const char* key : kWorkerFilledTrialSpecKeys) EXPECT_TRUE(file.contains(key)) << key;
  EXPECT_EQ(file.size(),
            TrialSpecToRequestJson(FullSpec()).size() + std::size(kWorkerFilledTrialSpecKeys));
  absl::StatusOr<TrialSpec> got = TrialSpecFromJson(file);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->trial_id, "job-1-t0002");
  EXPECT_EQ(got->attempt, 3);
  EXPECT_EQ(got->device, "cuda:1");
  EXPECT_EQ(got->num_threads, 8);
  EXPECT_EQ(got->model_file, "/work/models/sha256-ab.pt");
  EXPECT_EQ(TrialSpecToJson(*got), file) << "a spec survives its file";
}

// Found by tests/fuzz/trial_spec_fuzz: "warmup_steps": 28888877777777777776
// (a float past int's range) was converted with undefined behaviour, and
// 2.5 truncated; integers now must be integers of the field's range.
TEST(TrialContract, SpecIntegersMustBeIntegersInRange) {
  const TrialSpec spec = FullSpec();
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"warmup_steps", 28888877777777777776.0},
                                                           {"warmup_steps", 2.5},
                                                           {"seq_len", int64_t{1} << 40},
                                                           {"seed", -1},
                                                           {"memory_limit_bytes", "1"}}) {
    nlohmann::json j = TrialSpecToJson(spec);
    j[key] = value;
    EXPECT_THAT(TrialSpecFromJson(j).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(key)))
        << key << "=" << value.dump();
  }
  nlohmann::json j = TrialSpecToJson(spec);
  j["seed"] = uint64_t{18446744073709551615u};
  ASSERT_THAT(TrialSpecFromJson(j).status(), IsOk());
  EXPECT_EQ(TrialSpecFromJson(j)->seed, uint64_t{18446744073709551615u});
}

// The rank's place on its worker must be one a gang can have: a worker hosts
// at most the whole gang, and the rank sits among its worker's devices.
TEST(TrialContract, ARanksPlaceOnItsWorkerMustFitTheGang) {
  const auto with = [](const char* key, nlohmann::json value) {
    nlohmann::json j = TrialSpecToJson(FullSpec());
    j[key] = std::move(value);
    return TrialSpecFromJson(j).status();
  };
  EXPECT_THAT(with("local_world_size", 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("local_world_size 3")));
  EXPECT_THAT(with("local_world_size", 0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(with("group_rank", 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("group_rank 2")));
  EXPECT_THAT(with("local_device_indices", nlohmann::json::array({3})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 local_device_indices")));
  EXPECT_THAT(with("local_device_indices", nlohmann::json::array({3, -1})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("local_device_indices")));
  EXPECT_THAT(with("local_device_indices", "3,1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("local_device_indices")));
  // Placed on a worker, the rank's local_rank indexes its neighbours.
  nlohmann::json j = TrialSpecToJson(FullSpec());
  j["local_rank"] = 2;
  EXPECT_THAT(TrialSpecFromJson(j).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  // A hand-written spec without neighbours keeps what it says.
  j.erase("local_device_indices");
  j["local_world_size"] = 1;
  j["local_rank"] = 1;
  EXPECT_THAT(TrialSpecFromJson(j).status(), IsOk());
}

}  // namespace
}  // namespace autoaccel
