// The CPU's peak for MFU, measured: CPUs have no datasheet figure that
// matches what LibTorch's GEMM kernels reach (it depends on the ISA
// extensions present, the BLAS in use and the threads given), so the worker
// runs this once at start (`autoaccel-trial --probe-peak`) and uses the
// result as the CPU devices' peak.
#ifndef AUTOACCEL_ENGINE_PEAK_PROBE_H_
#define AUTOACCEL_ENGINE_PEAK_PROBE_H_

#include "spec/trial.h"

namespace autoaccel {

// Best TFLOP/s (2·n³ per n×n GEMM) that at::mm reaches on this CPU with
// `num_threads` intra-op threads, for fp32, bf16 and fp16 inputs, and that
// at::_scaled_mm reaches for e4m3 inputs (fp8, bf16 out: what fp8 linear
// layers compute; fp8 > 0 is how the worker tells that its CPU runs fp8
// trials): a measured achievable peak, not a datasheet number. Each precision grows n (128 up to
// 2048) until one GEMM takes ~20 ms and keeps the fastest of up to five
// calls at that size (fewer once it has spent 0.2 s): about 0.5 s in all,
// under 2 s where precisions have only slow kernels (fp8 on CPU is one). A precision whose
// GEMM throws reads 0 (unknown); nothing escapes.
// On CPUs without native bf16/fp16 arithmetic those figures can be orders
// of magnitude below fp32: that is what such a trial would compute at.
//
// Sets LibTorch's process-wide intra-op thread count to `num_threads`
// (values below 1 read as 1) and leaves it so. Not to be called while other
// threads run LibTorch work.
PeakTflops MeasureCpuPeakTflops(int num_threads);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_PEAK_PROBE_H_
