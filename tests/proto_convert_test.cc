// The wire form of the search's value types (proto/convert.h): the field
// tables of Strategy (search/strategy_fields.h) and TrialMetrics
// (search/trial_metrics_fields.h) against the messages' descriptors, and
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
#include "search/strategy.h"
#include "search/strategy_fields.h"
#include "search/trial.h"
#include "search/trial_metrics_fields.h"
#include "tests/search_test_util.h"

namespace autoaccel {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using ::testing::StartsWith;

template <typename Field>
using ValueOf = typename std::decay_t<Field>::Value;

// The names of `d`'s fields.
std::set<std::string> FieldNames(const Descriptor* d) {
  std::set<std::string> out;
  for (int i = 0; i < d->field_count(); ++i) out.insert(d->field(i)->name());
  return out;
}

TEST(ProtoConvert, EveryStrategyRowIsAProtoFieldOfItsKindAndEveryFieldHasARow) {
  const Descriptor* d = v1::Strategy::descriptor();
  std::set<std::string> unmatched = FieldNames(d);
  ForEachStrategyField([&](const auto& field) {
    const FieldDescriptor* f = d->FindFieldByName(std::string(field.name));
    ASSERT_NE(f, nullptr) << field.name;
    using T = ValueOf<decltype(field)>;
    const FieldDescriptor::CppType expected = std::is_same_v<T, bool>
                                                  ? FieldDescriptor::CPPTYPE_BOOL
                                              : std::is_enum_v<T> ? FieldDescriptor::CPPTYPE_STRING
                                                                  : FieldDescriptor::CPPTYPE_INT32;
    EXPECT_EQ(f->cpp_type(), expected) << field.name;
    EXPECT_FALSE(f->is_repeated()) << field.name;
    unmatched.erase(f->name());
  });
  EXPECT_EQ(unmatched, std::set<std::string>{"text"});  // the canonical text, output only
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
  ForEachStrategyField([&](const auto& field) {
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
  const Descriptor* d = v1::TrialMetrics::descriptor();
  std::set<std::string> unmatched = FieldNames(d);
  ForEachTrialMetricsField([&](const auto& field) {
    const FieldDescriptor* f = d->FindFieldByName(std::string(field.name));
    ASSERT_NE(f, nullptr) << field.name;
    using T = ValueOf<decltype(field)>;
    const bool repeated = std::is_same_v<T, std::vector<int64_t>>;
    const FieldDescriptor::CppType expected =
        repeated || std::is_same_v<T, int64_t> ? FieldDescriptor::CPPTYPE_INT64
        : std::is_same_v<T, double>            ? FieldDescriptor::CPPTYPE_DOUBLE
                                               : FieldDescriptor::CPPTYPE_INT32;
    EXPECT_EQ(f->cpp_type(), expected) << field.name;
    EXPECT_EQ(f->is_repeated(), repeated) << field.name;
    unmatched.erase(f->name());
  });
  EXPECT_THAT(unmatched, ::testing::IsEmpty());
}

TEST(ProtoConvert, EveryMetricSurvivesTheWire) {
  const TrialMetrics m = EveryMetricSet();
  ExpectSameMetrics(FromProto(ToProto(m)), m);
  ExpectSameMetrics(FromProto(v1::TrialMetrics{}), TrialMetrics{});
}

}  // namespace
}  // namespace autoaccel
