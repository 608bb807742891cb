// fp8 linear layers (engine/fp8_linear.h) on CPU: per-tensor current scaling,
// the saturating cast, and Fp8Linear's forward and gradients against an fp32
// reference and against the same fp8 arithmetic spelled out by hand (which
// pins the scales, the padding to multiples of 16 and the operand layouts).
#include "engine/fp8_linear.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/engine_test_util.h"

namespace autoaccel {
namespace {

double RelativeError(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor w = want.to(torch::kFloat);
  return ((got.to(torch::kFloat) - w).norm() / w.norm()).item<double>();
}

// What a fp8 copy of `t` stands for: its rounded values, scales undone.
torch::Tensor Dequantized(const torch::Tensor& t, c10::ScalarType dtype) {
  const torch::Tensor scale = Fp8Scale(t, dtype);
  return CastToFp8(t, scale, dtype).to(torch::kFloat) / scale;
}

TEST(Fp8ScaleTest, IsTheFormatsMaxOverTheTensorsAbsoluteMax) {
  const torch::Tensor x = torch::tensor({1.0f, -2.0f, 0.5f}).to(torch::kBFloat16);
  const torch::Tensor e4m3 = Fp8Scale(x, kFp8Forward);
  EXPECT_EQ(e4m3.scalar_type(), torch::kFloat);
  EXPECT_EQ(e4m3.dim(), 0);
  EXPECT_FLOAT_EQ(e4m3.item<float>(), 448.0f / 2.0f);
  EXPECT_FLOAT_EQ(Fp8Scale(x, kFp8Backward).item<float>(), 57344.0f / 2.0f);
  // The tensor as it is now: a larger value later gives a smaller scale.
  EXPECT_FLOAT_EQ(Fp8Scale(x * 4, kFp8Forward).item<float>(), 448.0f / 8.0f);
}

TEST(Fp8ScaleTest, AnAllZeroTensorGetsScaleOne) {
  EXPECT_EQ(Fp8Scale(torch::zeros({4, 4}), kFp8Forward).item<float>(), 1.0f);
  EXPECT_EQ(Fp8Scale(torch::zeros({0, 4}), kFp8Backward).item<float>(), 1.0f);
  EXPECT_TRUE(CastToFp8(torch::zeros({3}), torch::ones({}), kFp8Forward)
                  .to(torch::kFloat)
                  .equal(torch::zeros({3})));
}

TEST(CastToFp8Test, SaturatesAtTheFormatsMaxInsteadOfOverflowing) {
  const torch::Tensor big = torch::tensor({1000.0f, -1000.0f, 448.0f, 1.0f});
  const torch::Tensor e4m3 = CastToFp8(big, torch::ones({}), kFp8Forward);
  EXPECT_EQ(e4m3.scalar_type(), torch::kFloat8_e4m3fn);
  EXPECT_TRUE(e4m3.to(torch::kFloat).equal(torch::tensor({448.0f, -448.0f, 448.0f, 1.0f})));
  const torch::Tensor e5m2 = CastToFp8(torch::tensor({1e6f, -1e6f}), torch::ones({}), kFp8Backward);
  EXPECT_EQ(e5m2.scalar_type(), torch::kFloat8_e5m2);
  EXPECT_TRUE(e5m2.to(torch::kFloat).equal(torch::tensor({57344.0f, -57344.0f})));
}

TEST(CastToFp8Test, RoundTripsWithinE4m3sRelativePrecision) {
  at::manual_seed(1);
  const torch::Tensor x = torch::randn({4096}) * 3;
  const torch::Tensor scale = Fp8Scale(x, kFp8Forward);
  const torch::Tensor back = CastToFp8(x, scale, kFp8Forward).to(torch::kFloat) / scale;
  const torch::Tensor error = (back - x).abs();
  // 3 mantissa bits: a normal value rounds to within 2^-4 of itself; below
  // e4m3's smallest normal (2^-6, scaled) the spacing is fixed at 2^-9.
  const torch::Tensor normal = x.abs() * scale >= std::ldexp(1.0, -6);
  EXPECT_TRUE(
      (error <= x.abs() * std::ldexp(1.0, -4) + 1e-7).masked_select(normal).all().item<bool>());
  EXPECT_LE(error.max().item<double>(), std::ldexp(1.0, -10) / scale.item<double>() +
                                            std::ldexp(1.0, -4) * x.abs().max().item<double>());
  // The largest magnitude lands on 448 exactly.
  EXPECT_FLOAT_EQ((x.abs().max() * scale).item<float>(), 448.0f);
  EXPECT_GT(RelativeError(back, x), 1e-3) << "fp8 rounds, visibly more than bf16 would";
}

struct Operands {
  torch::Tensor x, weight, grad;  // x [..., in], weight [out, in], grad [..., out]
};

// bf16 operands of a linear layer with hidden-layer-like magnitudes.
Operands MakeOperands(std::vector<int64_t> x_shape, int64_t out) {
  at::manual_seed(7);
  const int64_t in = x_shape.back();
  std::vector<int64_t> g_shape = x_shape;
  g_shape.back() = out;
  return {torch::randn(x_shape).to(torch::kBFloat16),
          (torch::randn({out, in}) * 0.02).to(torch::kBFloat16),
          (torch::randn(g_shape) * 1e-3).to(torch::kBFloat16)};
}

struct Results {
  torch::Tensor y, dx, dw;
};

Results RunFp8Linear(const Operands& o) {
  const torch::Tensor x = o.x.detach().requires_grad_(true);
  const torch::Tensor w = o.weight.detach().requires_grad_(true);
  const torch::Tensor y = Fp8Linear(x, w);
  y.backward(o.grad);
  return {y.detach(), x.grad(), w.grad()};
}

TEST(Fp8LinearTest, ForwardAndBothGradientsAreWithinAFewPercentOfFp32) {
  const Operands o = MakeOperands({2, 32, 64}, 48);  // multiples of 16: no padding
  const Results r = RunFp8Linear(o);
  const torch::Tensor x = o.x.to(torch::kFloat), w = o.weight.to(torch::kFloat),
                      g = o.grad.to(torch::kFloat);
  const torch::Tensor g2 = g.reshape({-1, 48}), x2 = x.reshape({-1, 64});
  // Measured on this data: forward 3.7 %, gradients 5.8-6.1 % (e5m2 has 2
  // mantissa bits); bf16 alone would be ~0.3 %.
  const double y_error = RelativeError(r.y, at::linear(x, w));
  EXPECT_LT(y_error, 0.05);
  EXPECT_GT(y_error, 0.01) << "no fp8 rounding: the product did not run in fp8";
  EXPECT_LT(RelativeError(r.dx, g.matmul(w)), 0.08);
  EXPECT_LT(RelativeError(r.dw, g2.t().matmul(x2)), 0.08);
  EXPECT_GT(RelativeError(r.dx, g.matmul(w)), 0.01) << "the gradient did not run in fp8";
}

TEST(Fp8LinearTest, OutputAndGradientsKeepTheOperandsDtypeAndShape) {
  const Operands o = MakeOperands({2, 3, 32}, 16);
  const Results r = RunFp8Linear(o);
  EXPECT_EQ(r.y.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(r.dx.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(r.dw.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(r.y.sizes(), (std::vector<int64_t>{2, 3, 16}));
  EXPECT_EQ(r.dx.sizes(), o.x.sizes());
  EXPECT_EQ(r.dw.sizes(), o.weight.sizes());
  const Operands f{o.x.to(torch::kFloat), o.weight.to(torch::kFloat), o.grad.to(torch::kFloat)};
  const Results r32 = RunFp8Linear(f);
  EXPECT_EQ(r32.y.scalar_type(), torch::kFloat);
  EXPECT_EQ(r32.dw.scalar_type(), torch::kFloat);
}

// Shapes that are not multiples of 16 are padded with zeros and sliced back:
// the result is the fp8 arithmetic of the unpadded tensors, which this test
// spells out (dequantized operands multiplied in fp32).
TEST(Fp8LinearTest, PaddedShapesGiveTheUnpaddedFp8Arithmetic) {
  const Operands o = MakeOperands({3, 5, 40}, 24);  // 15 rows, 40 in, 24 out
  const Results r = RunFp8Linear(o);
  const torch::Tensor x8 = Dequantized(o.x.reshape({15, 40}), kFp8Forward);
  const torch::Tensor w8 = Dequantized(o.weight, kFp8Forward);
  const torch::Tensor g8 = Dequantized(o.grad.reshape({15, 24}), kFp8Backward);
  auto expect_close = [](const torch::Tensor& got, const torch::Tensor& want, const char* what) {
    // bf16 rounding of the result (2^-8 relative) is all that may differ.
    const double scale = want.abs().max().item<double>();
    EXPECT_LE((got.to(torch::kFloat) - want).abs().max().item<double>(), scale / 128) << what;
  };
  expect_close(r.y.reshape({15, 24}), x8.matmul(w8.t()), "y");
  expect_close(r.dx.reshape({15, 40}), g8.matmul(w8), "dx");
  expect_close(r.dw, g8.t().matmul(x8), "dw");
}

TEST(Fp8LinearTest, AddsTheBiasAfterTheProductAndDifferentiatesIt) {
  const Operands o = MakeOperands({16, 32}, 16);
  const torch::Tensor bias = torch::randn({16}).to(torch::kBFloat16).requires_grad_(true);
  const torch::Tensor with = Fp8Linear(o.x, o.weight, bias);
  EXPECT_TRUE(with.detach().equal((Fp8Linear(o.x, o.weight) + bias).detach()));
  with.backward(o.grad);
  EXPECT_LE(
      (bias.grad().to(torch::kFloat) - o.grad.to(torch::kFloat).sum(0)).abs().max().item<double>(),
      1e-3);
}

TEST(Fp8LinearTest, AnInputWithNoRowsGivesNoRowsAndZeroWeightGradient) {
  const torch::Tensor x = torch::zeros({0, 32}, torch::kBFloat16).requires_grad_(true);
  const torch::Tensor w = torch::randn({16, 32}).to(torch::kBFloat16).requires_grad_(true);
  const torch::Tensor y = Fp8Linear(x, w);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{0, 16}));
  y.sum().backward();
  EXPECT_TRUE(w.grad().to(torch::kFloat).equal(torch::zeros({16, 32})));
}

TEST(Fp8LinearTest, ItsBackwardNodeIsNamedFp8Matmul) {
  const Operands o = MakeOperands({2, 8, 32}, 16);
  const torch::Tensor y = Fp8Linear(o.x, o.weight.detach().requires_grad_(true));
  EXPECT_EQ(testing::CountGraphNodes(y, "Fp8Matmul"), 1);
}

TEST(Fp8ComputeCapabilityTest, NeedsAdaOrNewer) {
  for (auto [major, minor] :
       {std::pair{8, 9}, std::pair{9, 0}, std::pair{10, 0}, std::pair{12, 0}}) {
    EXPECT_TRUE(CheckFp8ComputeCapability("cuda:0", major, minor).ok()) << major << "." << minor;
  }
  for (auto [major, minor] : {std::pair{8, 0}, std::pair{8, 6}, std::pair{7, 5}}) {
    const absl::Status s = CheckFp8ComputeCapability("cuda:1", major, minor);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), absl::StrCat("strategy.precision: fp8 needs compute capability 8.9 or "
                                        "newer; cuda:1 is ",
                                        major, ".", minor));
  }
}

}  // namespace
}  // namespace autoaccel
