// The wire form of the search's value types (proto/convert.h): the field
// tables of Strategy (spec/strategy_fields.h) and TrialMetrics
// (spec/trial_metrics_fields.h) against the messages' descriptors, and
// every field through the wire.
#include <google/protobuf/descriptor.h>

#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/autoaccel.pb.h"
#include "proto/convert.h"
#include "spec/strategy.h"
#include "spec/strategy_fields.h"
#include "spec/trial.h"
#include "spec/trial_metrics_fields.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using ::testing::ElementsAre;

// The C++ type of the proto field that a row of value type T converts to and
// from: a flag bool, an enumerator its name, a vector a repeated field.
template <typename T>
FieldDescriptor::CppType WireType() {
  if constexpr (std::is_same_v<T, bool>) {
    return FieldDescriptor::CPPTYPE_BOOL;
  } else if constexpr (std::is_enum_v<T>) {
    return FieldDescriptor::CPPTYPE_STRING;
  } else if constexpr (std::is_same_v<T, double>) {
    return FieldDescriptor::CPPTYPE_DOUBLE;
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, std::vector<int64_t>>) {
    return FieldDescriptor::CPPTYPE_INT64;
  } else {
    return FieldDescriptor::CPPTYPE_INT32;
  }
}

// Checks that every row of `table` names a field of `d` of the row's type,
// and returns the fields of `d` that no row names.
template <typename Table>
std::set<std::string> FieldsWithoutARow(const Table& table, const Descriptor* d) {
  std::set<std::string> unmatched;
  for (int i = 0; i < d->field_count(); ++i) unmatched.insert(d->field(i)->name());
  ForEachRow(table, [&](const auto& field) {
    using T = RowValue<decltype(field)>;
    const FieldDescriptor* f = d->FindFieldByName(std::string(field.name));
    ASSERT_NE(f, nullptr) << field.name;
    EXPECT_EQ(f->cpp_type(), WireType<T>()) << field.name;
    EXPECT_EQ(f->is_repeated(), (std::is_same_v<T, std::vector<int64_t>>)) << field.name;
    unmatched.erase(f->name());
  });
  return unmatched;
}

TEST(ProtoConvert, EveryStrategyRowIsAProtoFieldOfItsKindAndEveryFieldHasARow) {
  // `text`: the canonical text, output only.
  EXPECT_EQ(FieldsWithoutARow(kStrategyFields, v1::Strategy::descriptor()),
            std::set<std::string>{"text"});
}

TEST(ProtoConvert, EveryPeakRowIsADoubleFieldAndEveryPeakSurvivesTheWire) {
  const Descriptor* d = v1::PeakTflops::descriptor();
  std::set<std::string> unmatched;
  for (int i = 0; i < d->field_count(); ++i) unmatched.insert(d->field(i)->name());
  PeakTflops peak;
  double value = 1;
  for (const PeakTflopsField& f : kPeakTflopsFields) {
    const FieldDescriptor* field = d->FindFieldByName(std::string(f.name));
    ASSERT_NE(field, nullptr) << f.name;
    EXPECT_EQ(field->cpp_type(), FieldDescriptor::CPPTYPE_DOUBLE) << f.name;
    unmatched.erase(field->name());
    peak.*f.member = value++;
  }
  EXPECT_THAT(unmatched, ::testing::IsEmpty());
  EXPECT_EQ(FromProto(ToProto(peak)), peak);
  EXPECT_EQ(ToProto(peak).fp8(), 4);
}

TEST(ProtoConvert, EveryStrategyFieldAtEveryValueSurvivesTheWire) {
  ForEveryFieldValue([](const auto& field, const Strategy& s) {
    const std::string shown = absl::StrCat(field.name, "=", FieldText(field, s.*field.member));
    const v1::Strategy p = ToProto(s);
    EXPECT_EQ(p.text(), StrategyToText(s)) << shown;
    absl::StatusOr<Strategy> back = FromProto(p);
    ASSERT_TRUE(back.ok()) << shown << ": " << back.status();
    EXPECT_EQ(*back, s) << shown;
  });
}

// Unset on the wire (0, "") is the field's default where its row says so
// (messages from before the field existed), else refused naming the field.
TEST(ProtoConvert, AnUnsetStrategyFieldIsItsDefaultOrRefused) {
  const Strategy s;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    v1::Strategy p = ToProto(s);
    p.GetReflection()->ClearField(&p, p.GetDescriptor()->FindFieldByName(std::string(field.name)));
    absl::StatusOr<Strategy> back = FromProto(p);
    if (field.proto_unset == ProtoUnset::kDefault) {
      ASSERT_TRUE(back.ok()) << field.name << ": " << back.status();
      EXPECT_EQ(*back, s) << field.name;
    } else {
      EXPECT_THAT(std::string(back.status().message()),
                  StartsWith(absl::StrCat("strategy.", field.name, ": ")));
    }
  });
}

TEST(ProtoConvert, EveryMetricsRowIsAProtoFieldOfItsKindAndEveryFieldHasARow) {
  // noisy is derived from the rows (TrialMetrics::IsNoisy), not a row.
  EXPECT_THAT(FieldsWithoutARow(kTrialMetricsFields, v1::TrialMetrics::descriptor()),
              ElementsAre("noisy"));
}

TEST(ProtoConvert, TheWireSaysWhetherAMeasurementIsNoisy) {
  TrialMetrics m;
  m.step_time_median_s = 0.1;
  m.step_time_spread = 0.05;
  EXPECT_FALSE(ToProto(m).noisy());
  m.step_time_spread = 0.3;
  EXPECT_TRUE(ToProto(m).noisy());
}

TEST(ProtoConvert, EveryMetricSurvivesTheWire) {
  const TrialMetrics m = EveryMetricSet();
  ExpectSameMetrics(FromProto(ToProto(m)), m);
  ExpectSameMetrics(FromProto(v1::TrialMetrics{}), TrialMetrics{});
}

TEST(ProtoConvert, APredictionSurvivesTheWireAndItsJsonForm) {
  const TrialPrediction p{0.1234567890123, int64_t{81} << 30, 4321.5};
  EXPECT_EQ(FromProto(ToProto(p)), p);
  EXPECT_EQ(v1::Prediction::descriptor()->field_count(), 3);  // every field converted above
  absl::StatusOr<TrialPrediction> back = TrialPredictionFromJson(TrialPredictionToJson(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  EXPECT_THAT(TrialPredictionFromJson(nlohmann::json{{"step_time_s", -1}}).status().message(),
              HasSubstr("predicted.step_time_s"));
}

}  // namespace
}  // namespace autoaccel
