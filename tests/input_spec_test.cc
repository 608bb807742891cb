// The --input-spec text a user writes for a TorchScript model: parsing, the
// canonical form, shapes and the errors a user sees.
#include "spec/input_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

TEST(InputSpecTest, ParsesCausalLmSpec) {
  absl::StatusOr<InputSpec> spec = ParseInputSpec("input_ids:int64[B,T]<50257; labels=input_ids");
  ASSERT_THAT(spec, IsOk());
  ASSERT_EQ(spec->inputs.size(), 2u);
  const InputTensorSpec& ids = spec->inputs[0];
  EXPECT_EQ(ids.name, "input_ids");
  EXPECT_FALSE(ids.is_alias());
  EXPECT_EQ(ids.dtype, InputDtype::kInt64);
  EXPECT_THAT(ids.dims, ElementsAre(InputDim::Batch(), InputDim::SeqLen()));
  EXPECT_EQ(ids.high, 50257);
  const InputTensorSpec& labels = spec->inputs[1];
  EXPECT_EQ(labels.name, "labels");
  EXPECT_EQ(labels.alias_of, "input_ids");
  EXPECT_TRUE(labels.is_alias());
}

TEST(InputSpecTest, AllDtypesFixedDimsAndWhitespace) {
  absl::StatusOr<InputSpec> spec = ParseInputSpec(
      "  x : float32 [ B , 3 , 224 , 224 ] ;\ty:int32[B]< 10 ; m:bool[B,T]; h:bfloat16[B,T,8];"
      "f:float16[B] ; z = y ; w=z ");
  ASSERT_THAT(spec, IsOk());
  ASSERT_EQ(spec->inputs.size(), 7u);
  EXPECT_EQ(spec->inputs[0].dtype, InputDtype::kFloat32);
  EXPECT_THAT(spec->inputs[0].dims, ElementsAre(InputDim::Batch(), InputDim::Fixed(3),
                                                InputDim::Fixed(224), InputDim::Fixed(224)));
  EXPECT_EQ(spec->inputs[0].high, 0);
  EXPECT_EQ(spec->inputs[1].dtype, InputDtype::kInt32);
  EXPECT_EQ(spec->inputs[1].high, 10);
  EXPECT_EQ(spec->inputs[2].dtype, InputDtype::kBool);
  EXPECT_EQ(spec->inputs[3].dtype, InputDtype::kBfloat16);
  EXPECT_EQ(spec->inputs[4].dtype, InputDtype::kFloat16);
  EXPECT_EQ(spec->inputs[5].alias_of, "y");
  EXPECT_EQ(spec->inputs[6].alias_of, "z");  // an alias of an alias
  EXPECT_EQ(InputSpecToText(*spec),
            "x:float32[B,3,224,224]; y:int32[B]<10; m:bool[B,T]; h:bfloat16[B,T,8]; "
            "f:float16[B]; z=y; w=z");
}

TEST(InputSpecTest, CanonicalTextRoundTrips) {
  for (const char* text : {
           "input_ids:int64[B,T]<50257; labels=input_ids",
           "x:float32[B,3,32,32]; y:int64[B]<10",
           "tokens:int32[B,T]<2147483648; mask:bool[B,1,T,T]; t:int64[4,B]<7; u=t",
       }) {
    absl::StatusOr<InputSpec> spec = ParseInputSpec(text);
    ASSERT_THAT(spec, IsOk()) << text;
    EXPECT_EQ(InputSpecToText(*spec), text);
    absl::StatusOr<InputSpec> again = ParseInputSpec(InputSpecToText(*spec));
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(*again, *spec);
  }
}

TEST(InputSpecTest, ResolveShapeAndTokensPerSample) {
  absl::StatusOr<InputSpec> spec = ParseInputSpec("x:float32[B,T,4]; y:int64[2,B]<3");
  ASSERT_THAT(spec, IsOk());
  EXPECT_THAT(ResolveShape(spec->inputs[0], 8, 128), ElementsAre(8, 128, 4));
  EXPECT_THAT(ResolveShape(spec->inputs[1], 8, 128), ElementsAre(2, 8));
  EXPECT_EQ(TokensPerSample(*spec, 128), 128);

  absl::StatusOr<InputSpec> images = ParseInputSpec("x:float32[B,3,32,32]; y:int64[B]<10");
  ASSERT_THAT(images, IsOk());
  EXPECT_EQ(TokensPerSample(*images, 128), 1);  // no T: one sample is one "token"
}

// Every error is INVALID_ARGUMENT, starts with "input_spec: ", and says what
// is wrong with which item.
struct BadSpec {
  const char* text;
  std::vector<const char*> says;
};
void PrintTo(const BadSpec& b, std::ostream* os) { *os << "'" << b.text << "'"; }

class InputSpecErrorTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(InputSpecErrorTest, IsInvalidArgumentNamingTheProblem) {
  absl::StatusOr<InputSpec> spec = ParseInputSpec(GetParam().text);
  ASSERT_FALSE(spec.ok()) << GetParam().text << " parsed as " << InputSpecToText(*spec);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  std::string message(spec.status().message());
  EXPECT_THAT(message, StartsWith("input_spec: "));
  for (const char* s : GetParam().says) EXPECT_THAT(message, HasSubstr(s));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, InputSpecErrorTest,
    ::testing::Values(
        BadSpec{"", {"empty"}}, BadSpec{"  \t ", {"empty"}},
        BadSpec{"x:int64[B,T]<5;", {"item 2", "empty"}},
        BadSpec{"x:int64[B,T]<5;; y=x", {"item 2", "empty"}},
        BadSpec{"x:int8[B]<5",
                {"item 1 'x:int8[B]<5'", "unknown dtype 'int8'",
                 "int64, int32, float32, bfloat16, float16, bool"}},
        BadSpec{"x:float64[B]", {"unknown dtype 'float64'", "allowed"}},
        BadSpec{"x:int64[B,T]", {"item 1", "int64", "'<N'"}},
        BadSpec{"x:int32[B]", {"int32", "'<N'"}},
        BadSpec{"x:float32[B]<5", {"'<N'", "float32", "standard normal"}},
        BadSpec{"x:bool[B]<2", {"'<N'", "bool"}},
        BadSpec{"x:int64[B]<0", {"positive integer", "'0'"}},
        BadSpec{"x:int64[B]<abc", {"positive integer", "'abc'"}},
        BadSpec{"x:int64[B]<", {"positive integer"}},
        BadSpec{"x:int32[B]<2147483649", {"int32", "2147483648"}},
        BadSpec{"x:int64[B,0]<5", {"dimension '0'", "positive integer, B", "T"}},
        BadSpec{"x:int64[B,-3]<5", {"dimension '-3'"}},
        BadSpec{"x:int64[B,b]<5", {"dimension 'b'"}},
        BadSpec{"x:int64[B,]<5", {"expected a dimension", "got ']<5'"}},
        BadSpec{"x:int64[]<5", {"expected a dimension"}},
        BadSpec{"x:int64[B,T<5", {"expected ',' or ']'"}},
        BadSpec{"x:int64 B,T<5", {"expected '['"}},
        BadSpec{"x:int64[B]<5 extra", {"unexpected 'extra'"}},
        BadSpec{"x int64[B]<5", {"expected ':'", "'='", "'x'"}},
        BadSpec{"x:[B]", {"expected a dtype"}}, BadSpec{":int64[B]<5", {"expected a name"}},
        BadSpec{"1x:int64[B]<5", {"expected a name"}},
        BadSpec{"x:int64[B]<5; x:int64[B]<5", {"item 2", "duplicate name 'x'"}},
        BadSpec{"x:int64[B]<5; x=x", {"item 2", "duplicate name 'x'"}},
        BadSpec{"x:int64[B]<5; y=z", {"item 2 'y=z'", "alias to 'z'", "not an earlier input"}},
        BadSpec{"y=x; x:int64[B]<5", {"item 1 'y=x'", "alias to 'x'"}},
        BadSpec{"x:int64[B]<5; y=", {"item 2", "expected the name of an earlier input"}},
        BadSpec{"x:int64[B]<5; y=x z", {"unexpected 'z'"}},
        BadSpec{"x:int64[4,T]<5; y:float32[3]", {"micro-batch dimension B", "at least one"}}));

}  // namespace
}  // namespace autoaccel
