#include "engine/fp8_linear.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What CUDA's _scaled_mm needs every dimension to be a multiple of.
constexpr int64_t kAlign = 16;

int64_t RoundUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// `t` [rows, cols] padded with zeros to multiples of kAlign (itself when
// already aligned). Zeros change neither the absolute maximum nor a product.
torch::Tensor Padded(const torch::Tensor& t) {
  const int64_t rows = RoundUp(t.size(0)) - t.size(0), cols = RoundUp(t.size(1)) - t.size(1);
  if (rows == 0 && cols == 0) return t;
  return at::constant_pad_nd(t, {0, cols, 0, rows});
}

// An fp8 operand: the rounded values and 1 / the scale that made them.
struct Fp8Operand {
  torch::Tensor data;
  torch::Tensor inverse_scale;
};

Fp8Operand ToFp8(const torch::Tensor& t, c10::ScalarType dtype) {
  const torch::Tensor scale = Fp8Scale(t, dtype);
  return {CastToFp8(t, scale, dtype), scale.reciprocal()};
}

// The same values laid out column-major (what _scaled_mm's second operand
// must be on CUDA).
torch::Tensor ColumnMajor(const torch::Tensor& t) { return t.t().contiguous().t(); }

// a [M, K] · b [K, N] in `out_dtype`, both scales undone. Checks CUDA's rules
// on every device, so that a CPU run fails where a GPU would.
torch::Tensor ScaledMm(const torch::Tensor& a, const torch::Tensor& a_inverse_scale,
                       const torch::Tensor& b, const torch::Tensor& b_inverse_scale,
                       c10::ScalarType out_dtype) {
  TORCH_CHECK(a.is_contiguous() && b.t().is_contiguous(),
              "fp8 matrix product: the first operand must be row-major, the second column-major");
  TORCH_CHECK(a.size(0) % kAlign == 0 && a.size(1) % kAlign == 0 && b.size(1) % kAlign == 0,
              "fp8 matrix product: dimensions ", a.sizes(), " x ", b.sizes(),
              " are not multiples of ", kAlign);
  TORCH_CHECK(a.scalar_type() != kFp8Backward || b.scalar_type() != kFp8Backward,
              "fp8 matrix product: e5m2 x e5m2 is not supported on CUDA");
  return at::_scaled_mm(a, b, a_inverse_scale, b_inverse_scale, /*bias=*/std::nullopt,
                        /*scale_result=*/std::nullopt, out_dtype, /*use_fast_accum=*/false);
}

// x [M, K] · weight [N, K]ᵀ -> [M, N] in x's dtype, in fp8 both ways.
class Fp8Matmul : public torch::autograd::Function<Fp8Matmul> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight) {
    const Fp8Operand x8 = ToFp8(Padded(x), kFp8Forward);       // [M', K']
    const Fp8Operand w8 = ToFp8(Padded(weight), kFp8Forward);  // [N', K']
    // The fp8 copies, not x and weight, are what backward keeps.
    ctx->save_for_backward({x8.data, x8.inverse_scale, w8.data, w8.inverse_scale});
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["w_dtype"] = weight.scalar_type();
    ctx->saved_data["m"] = x.size(0);
    ctx->saved_data["k"] = x.size(1);
    ctx->saved_data["n"] = weight.size(0);
    // w8.data row-major [N', K'] is its transpose column-major [K', N'].
    return ScaledMm(x8.data, x8.inverse_scale, w8.data.t(), w8.inverse_scale, x.scalar_type())
        .narrow(0, 0, x.size(0))
        .narrow(1, 0, weight.size(0));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x8 = saved[0], &x_inverse = saved[1], &w8 = saved[2],
                        &w_inverse = saved[3];
    const int64_t m = ctx->saved_data["m"].toInt(), k = ctx->saved_data["k"].toInt(),
                  n = ctx->saved_data["n"].toInt();
    const Fp8Operand g8 = ToFp8(Padded(grad[0].reshape({m, n})), kFp8Backward);  // [M', N']
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      dx = ScaledMm(g8.data, g8.inverse_scale, ColumnMajor(w8), w_inverse,
                    ctx->saved_data["x_dtype"].toScalarType())
               .narrow(0, 0, m)
               .narrow(1, 0, k);
    }
    if (ctx->needs_input_grad(1)) {
      dw = ScaledMm(g8.data.t().contiguous(), g8.inverse_scale, ColumnMajor(x8), x_inverse,
                    ctx->saved_data["w_dtype"].toScalarType())
               .narrow(0, 0, n)
               .narrow(1, 0, k);
    }
    return {dx, dw};
  }
};

}  // namespace

double Fp8Max(c10::ScalarType dtype) {
  TORCH_CHECK(dtype == kFp8Forward || dtype == kFp8Backward, "Fp8Max: ", dtype,
              " is not e4m3 (Float8_e4m3fn) or e5m2 (Float8_e5m2)");
  return dtype == kFp8Forward ? 448.0 : 57344.0;
}

torch::Tensor Fp8Scale(const torch::Tensor& x, c10::ScalarType dtype) {
  const double max = Fp8Max(dtype);
  const auto fp32 = torch::TensorOptions().dtype(torch::kFloat).device(x.device());
  if (x.numel() == 0) return torch::ones({}, fp32);
  const torch::Tensor amax = x.detach().abs().amax().to(torch::kFloat);
  return torch::where(amax > 0, max / amax, torch::ones({}, fp32));
}

torch::Tensor CastToFp8(const torch::Tensor& x, const torch::Tensor& scale, c10::ScalarType dtype) {
  const double max = Fp8Max(dtype);
  return (x.to(torch::kFloat) * scale).clamp(-max, max).to(dtype);
}

torch::Tensor Fp8Linear(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1),
              "Fp8Linear: input ", x.sizes(), " does not match weight ", weight.sizes());
  for (const torch::Tensor* t : {&x, &weight}) {
    const c10::ScalarType type = t->scalar_type();
    TORCH_CHECK(type == torch::kBFloat16 || type == torch::kHalf || type == torch::kFloat,
                "Fp8Linear: ", type, " operands (allowed: bf16, fp16, fp32)");
  }
  const int64_t in = x.size(-1);
  const torch::Tensor flat = x.reshape({-1, in});
  if (flat.size(0) == 0) return at::linear(x, weight, bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  torch::Tensor y = Fp8Matmul::apply(flat, weight).reshape(shape);
  return bias.defined() ? y + bias : y;
}

absl::Status CheckFp8ComputeCapability(const std::string& device, int major, int minor) {
  if (major > 8 || (major == 8 && minor >= 9)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("strategy.precision: fp8 needs compute capability "
                   "8.9 or newer; ",
                   device, " is ", major, ".", minor));
}

}  // namespace autoaccel
