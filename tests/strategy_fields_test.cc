// The strategy's field table (spec/strategy_fields.h): every field, at
// every value, survives the canonical text, the JSON form and the partial
// strategy's forms, under its row's keys. (proto_convert_test walks the same
// table through the wire form.)
#include "spec/strategy_fields.h"

#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "search/load_strategy.h"
#include "spec/partial_strategy.h"
#include "spec/strategy.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

template <typename T>
nlohmann::json JsonValue(const StrategyField<T>& field, T value) {
  if constexpr (std::is_enum_v<T>) {
    return std::string(ChoiceName(field, value));
  } else {
    return value;
  }
}

TEST(StrategyFields, KeysAreDistinctAndEveryEnumeratorHasAName) {
  std::set<absl::string_view> names, text_keys;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    EXPECT_TRUE(names.insert(field.name).second) << field.name;
    EXPECT_TRUE(text_keys.insert(field.text_key).second) << field.text_key;
    using T = RowValue<decltype(field)>;
    if constexpr (std::is_enum_v<T>) {
      // Names by enumerator, in declaration order: the enumerators are 0..n-1.
      for (size_t i = 0; i < field.names.size(); ++i) {
        EXPECT_EQ(static_cast<size_t>(field.names[i].first), i) << field.name;
      }
      EXPECT_FALSE(field.names.empty()) << field.name;
    } else {
      EXPECT_TRUE(field.names.empty()) << field.name;
    }
  });
  EXPECT_EQ(names.size(), kNumStrategyFields);
}

TEST(StrategyFields, EveryFieldAtEveryValueRoundTripsThroughTextAndJson) {
  ForEveryFieldValue([](const auto& field, const Strategy& s) {
    const auto value = s.*field.member;
    const std::string shown = absl::StrCat(field.name, "=", FieldText(field, value));

    const std::string text = StrategyToText(s);
    absl::StatusOr<Strategy> from_text = ParseStrategyText(text);
    ASSERT_TRUE(from_text.ok()) << shown << ": " << text << ": " << from_text.status();
    EXPECT_EQ(*from_text, s) << shown;
    // The key is written with the value, or left out at its default.
    const std::vector<std::string> items = absl::StrSplit(text, ',');
    const std::string item = absl::StrCat(field.text_key, "=", FieldText(field, value));
    if (value != Strategy{}.*field.member) {
      EXPECT_THAT(items, Contains(item)) << shown << ": " << text;
    }

    const nlohmann::json json = StrategyToJson(s);
    EXPECT_EQ(json.at(std::string(field.name)), JsonValue(field, value)) << shown;
    EXPECT_EQ(json.size(), kNumStrategyFields);
    absl::StatusOr<Strategy> from_json = StrategyFromJson(json);
    ASSERT_TRUE(from_json.ok()) << shown << ": " << from_json.status();
    EXPECT_EQ(*from_json, s) << shown;

    // Another value of the field makes another strategy.
    Strategy other = s;
    other.*field.member =
        ValuesToTry(field).back() == value ? ValuesToTry(field).front() : ValuesToTry(field).back();
    EXPECT_NE(other, s) << shown;
  });
}

TEST(StrategyFields, EveryFieldAtEveryValueIsAPartialStrategyInEachForm) {
  ForEveryFieldValue([](const auto& field, const Strategy& s) {
    const auto value = s.*field.member;
    const std::string item = absl::StrCat(field.text_key, "=", FieldText(field, value));
    const nlohmann::json json = {{std::string(field.name), JsonValue(field, value)}};
    for (const std::string& input : {item, json.dump()}) {
      const PartialStrategy p = Load(input);
      EXPECT_EQ(p.CountSet(), 1) << input;
      EXPECT_EQ(p.*field.partial, value) << input;
      EXPECT_TRUE(p.Matches(s)) << input;
      EXPECT_EQ(p.ToText(), item) << input;
      EXPECT_EQ(Load(p.ToText()), p) << input;
    }
    // A whole strategy's text is a partial strategy that matches it.
    EXPECT_TRUE(Load(StrategyToText(s)).Matches(s)) << item;
  });
}

}  // namespace
}  // namespace autoaccel
