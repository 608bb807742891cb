// The searched dimensions' table (search/space_dimensions.h) against what it
// drives: the strategy's fields, TuneRequest's fields (by descriptor), the
// request's lists read into a SpaceRequest, and the Python client's table.
#include "search/space_dimensions.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/request_space.h"
#include "spec/field_table.h"
#include "spec/strategy_fields.h"
#include "tests/model_test_util.h"

namespace autoaccel {
namespace {

using google::protobuf::FieldDescriptor;
using ::testing::HasSubstr;

// Strategy fields that no request lists: they follow from the others.
const std::set<std::string> kDerived = {"data_parallel", "grad_accum_steps"};

TEST(SpaceDimensionsTest, EveryStrategyFieldIsSearchedOrDerivedAndEveryRowIsOne) {
  std::set<std::string> rows;
  ForEachRow(kSpaceDimensions, [&](const auto& row) { rows.emplace(row.key); });
  EXPECT_EQ(rows.size(), kNumSpaceDimensions) << "one row per key";
  ForEachRow(kStrategyFields, [&](const auto& field) {
    const std::string key(field.name);
    EXPECT_NE(rows.count(key) > 0, kDerived.count(key) > 0)
        << key << ": a new strategy field needs its search dimension row";
    rows.erase(key);
  });
  EXPECT_TRUE(rows.empty()) << "rows without a strategy field: " << *rows.begin();
}

TEST(SpaceDimensionsTest, EachRowNamesARepeatedTuneRequestFieldOfItsType) {
  std::set<std::string> flags, keywords;
  ForEachRow(kSpaceDimensions, [&](const auto& row) {
    const FieldDescriptor* field =
        v1::TuneRequest::descriptor()->FindFieldByName(std::string(row.request_field));
    ASSERT_NE(field, nullptr) << row.request_field;
    EXPECT_TRUE(field->is_repeated()) << row.request_field;
    constexpr bool kCount = std::is_same_v<RowValue<decltype(row)>, int>;
    EXPECT_EQ(field->cpp_type(),
              kCount ? FieldDescriptor::CPPTYPE_INT32 : FieldDescriptor::CPPTYPE_STRING)
        << row.request_field;
    EXPECT_TRUE(flags.emplace(row.flag).second) << row.flag;
    EXPECT_TRUE(keywords.emplace(row.python_keyword).second) << row.python_keyword;
    EXPECT_THAT(std::string(row.flag), ::testing::StartsWith("--"));
  });
}

TEST(SpaceDimensionsTest, EveryRowsCandidatesReachTheSpaceAndBadNamesNameTheField) {
  v1::TuneRequest request;
  ForEachRow(kSpaceDimensions, [&](const auto& row) {
    using T = RowValue<decltype(row)>;
    if constexpr (std::is_same_v<T, int>) {
      ASSERT_TRUE(AddCandidate(row.request_field, "2", &request).ok()) << row.request_field;
      EXPECT_THAT(std::string(AddCandidate(row.request_field, "two", &request).message()),
                  HasSubstr(absl::StrCat(row.flag, ": 'two' is not a whole number")));
    } else {
      ASSERT_TRUE(AddCandidate(row.request_field, row.names.back().second, &request).ok());
    }
  });
  SpaceRequest space;
  ASSERT_TRUE(SpaceListsFromRequest(request, &space).ok());
  ForEachRow(kSpaceDimensions, [&](const auto& row) {
    using T = RowValue<decltype(row)>;
    const std::vector<T>& values = space.*row.member;
    ASSERT_EQ(values.size(), 1u) << row.request_field;
    if constexpr (std::is_same_v<T, int>) {
      EXPECT_EQ(values[0], 2) << row.request_field;
    } else {
      EXPECT_EQ(values[0], row.names.back().first) << row.request_field;
      v1::TuneRequest bad;
      ASSERT_TRUE(AddCandidate(row.request_field, "nonsense", &bad).ok());
      SpaceRequest unused;
      EXPECT_THAT(std::string(SpaceListsFromRequest(bad, &unused).message()),
                  HasSubstr(absl::StrCat(row.request_field, ": unknown value 'nonsense'")));
    }
  });
  EXPECT_EQ(AddCandidate("seq_len", "1", &request).code(), absl::StatusCode::kNotFound);
}

// One value per dimension under which every other dimension applies: a
// layout with tensor, pipeline, context and expert parallelism (the experts
// over the two context-parallel ranks), interleaved, with sequence
// parallelism and checkpointing (all_gather: the ring runs the math kernel
// only).
const std::map<std::string, std::string> kOneValue = {
    {"tensor_parallel", "2"},      {"pipeline_parallel", "2"},
    {"sharding", "none"},          {"sequence_parallel", "on"},
    {"context_parallel", "2"},     {"context_parallel_comm", "all_gather"},
    {"expert_parallel", "2"},      {"pipeline_schedule", "interleaved"},
    {"virtual_stages", "2"},       {"micro_batch_size", "1"},
    {"precision", "fp32"},         {"checkpointing", "full"},
    {"checkpoint_percent", "100"}, {"attention", "math"},
    {"optimizer", "adamw"},        {"offload", "none"}};
// A second value of each count dimension.
const std::map<std::string, int> kOtherCount = {{"tensor_parallel", 1},    {"pipeline_parallel", 1},
                                                {"context_parallel", 1},   {"expert_parallel", 1},
                                                {"virtual_stages", 4},     {"micro_batch_size", 2},
                                                {"checkpoint_percent", 50}};

// The value of the strategy field `key` of `s`, as text.
std::string FieldText(const Strategy& s, absl::string_view key) {
  std::string out;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    if (field.name == key) out = absl::StrCat(s.*field.member);
  });
  return out;
}

// A dimension's candidates must reach the strategies the space enumerates:
// given two values (the others one each), the space holds both. A row whose
// list the enumeration in search/space.cc ignores fails here.
TEST(SpaceDimensionsTest, TwoValuesOfEveryRowBothReachTheEnumeratedSpace) {
  ForEachRow(kSpaceDimensions, [&](const auto& tested) {
    using Tested = RowValue<decltype(tested)>;
    SpaceRequest r;
    r.model = testing::TinyModelSpec("mixtral");  // experts to spread
    r.model.n_layer = 8;
    r.model.n_kv_head = 4;
    r.seq_len = 16;
    r.global_batch_size = 16;
    r.world_size = 8;
    r.device_supports_bf16 = true;
    r.device_is_accelerator = true;
    ForEachRow(kSpaceDimensions, [&](const auto& row) {
      using T = RowValue<decltype(row)>;
      auto it = kOneValue.find(std::string(row.key));
      ASSERT_NE(it, kOneValue.end()) << row.key << ": give the row a value in kOneValue";
      if constexpr (std::is_same_v<T, int>) {
        r.*row.member = {std::stoi(it->second)};
      } else {
        for (const auto& [value, name] : row.names) {
          if (name == it->second) r.*row.member = {value};
        }
        ASSERT_EQ((r.*row.member).size(), 1u) << row.key << ": no value " << it->second;
      }
    });
    std::vector<Tested>& list = r.*tested.member;
    if constexpr (std::is_same_v<Tested, int>) {
      auto other = kOtherCount.find(std::string(tested.key));
      ASSERT_NE(other, kOtherCount.end()) << tested.key << ": give it a second value";
      list.push_back(other->second);
    } else {
      list.clear();
      for (const auto& [value, name] : tested.names) list.push_back(value);
    }
    absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
    ASSERT_TRUE(space.ok()) << tested.key << ": " << space.status();
    std::set<std::string> seen;
    for (const Strategy& s : *space) seen.insert(FieldText(s, tested.key));
    EXPECT_GE(seen.size(), 2u) << tested.key << ": of two candidates the space holds "
                               << (seen.empty() ? "none"
                                                : absl::StrCat("one (", *seen.begin(), ")"))
                               << ": does search/space.cc enumerate its list?";
  });
}

TEST(SpaceDimensionsTest, ThePythonClientHasTheSameRows) {
  std::ifstream in(AUTOACCEL_SOURCE_DIR "/python/autoaccel/client.py");
  ASSERT_TRUE(in) << "python/autoaccel/client.py";
  std::stringstream text;
  text << in.rdbuf();
  const std::string client = text.str();
  const size_t start = client.find("SPACE_DIMENSIONS = (");
  ASSERT_NE(start, std::string::npos);
  const std::string table = client.substr(start, client.find("\n)\n", start) - start);
  size_t rows = 0;
  for (size_t at = table.find("\n    (\""); at != std::string::npos;
       at = table.find("\n    (\"", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, kNumSpaceDimensions);
  ForEachRow(kSpaceDimensions, [&](const auto& row) {
    const std::string line =
        absl::StrCat("(\"", row.python_keyword, "\", \"", row.request_field, "\", \"",
                     std::is_same_v<RowValue<decltype(row)>, int> ? "ints" : "strings", "\")");
    EXPECT_THAT(table, HasSubstr(line));
  });
}

}  // namespace
}  // namespace autoaccel
