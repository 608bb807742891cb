// The inputs a user's TorchScript model takes, as text on the command line:
//
//   spec := item (';' item)*
//   item := NAME ':' DTYPE '[' DIM (',' DIM)* ']' ['<' INT]   a random tensor
//         | NAME '=' OTHER_NAME                               the same tensor again
//   DIM  := positive integer | 'B' (micro-batch size) | 'T' (sequence length)
//
// e.g. "input_ids:int64[B,T]<50257; labels=input_ids". Items are the
// forward's arguments in order. Integer dtypes need '<N' (values uniform in
// [0, N)); float dtypes must not have it (standard normal values); bool must
// not either (values 0 or 1). Whitespace around tokens is ignored.
//
// Pure value type: no I/O, no LibTorch (engine/scripted_model.h makes the
// tensors).
#ifndef AUTOACCEL_SPEC_INPUT_SPEC_H_
#define AUTOACCEL_SPEC_INPUT_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace autoaccel {

enum class InputDtype {
  kInt64,     // "int64"
  kInt32,     // "int32"
  kFloat32,   // "float32"
  kBfloat16,  // "bfloat16"
  kFloat16,   // "float16"
  kBool,      // "bool"
};
absl::string_view InputDtypeName(InputDtype dtype);
// INVALID_ARGUMENT listing the allowed names for anything else.
absl::StatusOr<InputDtype> ParseInputDtype(absl::string_view name);
bool IsIntegerDtype(InputDtype dtype);   // int64, int32
bool IsFloatingDtype(InputDtype dtype);  // float32, bfloat16, float16

// One dimension of a shape: a fixed size or a symbol resolved per trial.
struct InputDim {
  enum class Kind { kFixed, kBatch, kSeqLen };
  Kind kind = Kind::kFixed;
  int64_t value = 0;  // the size when kind is kFixed (>= 1), else 0

  static InputDim Fixed(int64_t v) { return {Kind::kFixed, v}; }
  static InputDim Batch() { return {Kind::kBatch, 0}; }
  static InputDim SeqLen() { return {Kind::kSeqLen, 0}; }

  friend bool operator==(const InputDim& a, const InputDim& b) {
    return a.kind == b.kind && a.value == b.value;
  }
  friend bool operator!=(const InputDim& a, const InputDim& b) { return !(a == b); }
};

struct InputTensorSpec {
  std::string name;
  // Non-empty: this argument is the same tensor as the earlier input of that
  // name (which may itself be an alias); dtype, dims and high are then unused
  // and left at their defaults.
  std::string alias_of;
  InputDtype dtype = InputDtype::kInt64;
  std::vector<InputDim> dims;
  int64_t high = 0;  // integer dtypes: values in [0, high), high >= 1; else 0

  bool is_alias() const { return !alias_of.empty(); }

  friend bool operator==(const InputTensorSpec& a, const InputTensorSpec& b) {
    return a.name == b.name && a.alias_of == b.alias_of && a.dtype == b.dtype && a.dims == b.dims &&
           a.high == b.high;
  }
  friend bool operator!=(const InputTensorSpec& a, const InputTensorSpec& b) { return !(a == b); }
};

struct InputSpec {
  std::vector<InputTensorSpec> inputs;  // in the order of forward's arguments

  friend bool operator==(const InputSpec& a, const InputSpec& b) { return a.inputs == b.inputs; }
  friend bool operator!=(const InputSpec& a, const InputSpec& b) { return !(a == b); }
};

// Parses the text form. Errors are INVALID_ARGUMENT starting with
// "input_spec: " and naming the item and what is wrong with it: syntax,
// unknown dtype (listing the allowed ones), a dimension that is not a positive
// integer, B or T, '<N' missing (integer dtypes) or present (float, bool),
// int32 bounds above 2^31, duplicate names, an alias to an unknown or later
// name, an empty spec, or no input using B.
absl::StatusOr<InputSpec> ParseInputSpec(absl::string_view text);

// The canonical text form, e.g. "input_ids:int64[B,T]<50257; labels=input_ids".
// ParseInputSpec(InputSpecToText(s)) == s for every spec that parsed.
std::string InputSpecToText(const InputSpec& spec);

// The concrete shape of a non-alias input: B becomes `batch`, T `seq_len`.
// REQUIRES: !input.is_alias().
std::vector<int64_t> ResolveShape(const InputTensorSpec& input, int64_t batch, int64_t seq_len);

// Tokens one sample counts for in tokens/s: seq_len if any input's shape uses
// T, else 1.
int64_t TokensPerSample(const InputSpec& spec, int64_t seq_len);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_INPUT_SPEC_H_
