// fp8 linear layers: y = x · Wᵀ with the matrix products computed from fp8
// copies of their operands (precision "fp8", spec/strategy.h), as NVIDIA's
// Transformer Engine and torchtitan's float8 training do with per-tensor
// current scaling:
//
//   forward    y  = x · Wᵀ   x, W in e4m3
//   backward   dx = g · W    g (the output gradient) in e5m2, W in e4m3
//              dW = gᵀ · x   g in e5m2, x in e4m3
//
// Each operand gets one scale from its own absolute maximum as it is now
// (Fp8Scale), is multiplied by it, saturated to the format's range and
// rounded (CastToFp8); at::_scaled_mm multiplies the fp8 operands with fp32
// accumulation and undoes both scales with their inverses. e5m2 is never
// multiplied by e5m2 (CUDA refuses it). Only the fp8 copies of x and W (and
// their scales) are kept for backward: half of bf16's activation memory.
//
// CUDA's rules for _scaled_mm (first operand row-major, second column-major,
// every dimension a multiple of 16) are met here, so any shape works: rows,
// input and output features are padded with zeros to multiples of 16 and the
// result sliced back. They are checked on every device (LibTorch's CPU
// kernel would accept more), so CPU runs catch what CUDA would refuse. CPU
// runs compute the same fp8 numerics as a GPU (LibTorch implements
// _scaled_mm on CPU), only slowly.
//
// Functions throw c10::Error like any LibTorch code; they keep no state and
// may run on any thread.
#ifndef AUTOACCEL_ENGINE_FP8_LINEAR_H_
#define AUTOACCEL_ENGINE_FP8_LINEAR_H_

#include <torch/types.h>

#include <string>

#include "absl/status/status.h"

namespace autoaccel {

// Inputs and weights: 4 exponent bits, 3 mantissa bits, finite max 448.
inline constexpr c10::ScalarType kFp8Forward = c10::ScalarType::Float8_e4m3fn;
// Output gradients: 5 exponent bits, 2 mantissa bits, finite max 57344.
inline constexpr c10::ScalarType kFp8Backward = c10::ScalarType::Float8_e5m2;

// The largest finite value of `dtype`: 448 for e4m3 (kFloat8_e4m3fn), 57344
// for e5m2. REQUIRES: one of the two; otherwise throws c10::Error.
double Fp8Max(c10::ScalarType dtype);

// Per-tensor current scaling: Fp8Max(dtype) / max|x|, the absolute maximum
// taken in fp32 from `x` as it is now; 1 when x is all zeros (or empty). A
// 0-dim fp32 tensor on x's device (no host synchronisation). A non-finite x
// gives NaNs in its cast, and so downstream: the loss shows it.
torch::Tensor Fp8Scale(const torch::Tensor& x, c10::ScalarType dtype);

// x.float() * scale, saturated to ±Fp8Max(dtype) (never inf), rounded to
// `dtype`; x ≈ result.float() / scale. `scale`: a 0-dim fp32 tensor on x's
// device (Fp8Scale's).
torch::Tensor CastToFp8(const torch::Tensor& x, const torch::Tensor& scale, c10::ScalarType dtype);

// x · weightᵀ (+ bias) with the products in fp8, as described above.
// x [..., in] (any leading dimensions), weight [out, in], bias [out] or
// undefined (added after the product, in its own dtype). The output and the
// gradients of x and weight come out in x's and weight's dtypes (bf16 under
// precision fp8); REQUIRES: both bf16, fp16 or fp32 and on one device. An
// input with no rows (an expert no token chose) is computed by at::linear:
// there is nothing to scale. Differentiable in x, weight and bias; its
// backward node's name() contains "Fp8Matmul".
torch::Tensor Fp8Linear(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias = {});

// OK when CUDA compute capability major.minor has fp8 matrix units (8.9,
// Ada, or newer); otherwise INVALID_ARGUMENT "strategy.precision: fp8 needs
// compute capability 8.9 or newer; <device> is <major>.<minor>".
absl::Status CheckFp8ComputeCapability(const std::string& device, int major, int minor);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_FP8_LINEAR_H_
