#include "spec/input_spec.h"

#include <cassert>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/enum_names.h"

namespace autoaccel {
namespace {

constexpr std::pair<InputDtype, absl::string_view> kDtypes[] = {
    {InputDtype::kInt64, "int64"},     {InputDtype::kInt32, "int32"},
    {InputDtype::kFloat32, "float32"}, {InputDtype::kBfloat16, "bfloat16"},
    {InputDtype::kFloat16, "float16"}, {InputDtype::kBool, "bool"},
};

constexpr absl::string_view kExample = "input_ids:int64[B,T]<50257; labels=input_ids";

bool IsIdentStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsIdentChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// Reads one item left to right; whitespace between tokens is skipped.
class Cursor {
 public:
  explicit Cursor(absl::string_view text) : text_(text) {}

  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  // The next non-space character, or '\0' at the end.
  char Peek() { return AtEnd() ? '\0' : text_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  // [A-Za-z_][A-Za-z0-9_]*, or empty when the next token is not one.
  absl::string_view Identifier() {
    SkipSpace();
    size_t start = pos_;
    if (pos_ < text_.size() && IsIdentStart(text_[pos_])) {
      while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }
  // Everything up to the next space or one of `stops` (possibly empty).
  absl::string_view Word(absl::string_view stops) {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() && !absl::ascii_isspace(text_[pos_]) &&
           stops.find(text_[pos_]) == absl::string_view::npos) {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }
  // What is left, for error messages.
  absl::string_view Rest() {
    SkipSpace();
    return text_.substr(pos_);
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::Status ItemError(int index, absl::string_view item, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("input_spec: item ", index, " '", item, "': ", what));
}

// Describes the next token for "expected X, got Y" messages.
std::string Got(Cursor& c) {
  if (c.AtEnd()) return "the end of the item";
  return absl::StrCat("'", c.Rest(), "'");
}

absl::StatusOr<InputTensorSpec> ParseItem(int index, absl::string_view item) {
  auto error = [&](absl::string_view what) { return ItemError(index, item, what); };
  Cursor c(item);
  InputTensorSpec input;
  input.name = std::string(c.Identifier());
  if (input.name.empty()) {
    return error(absl::StrCat("expected a name ([A-Za-z_][A-Za-z0-9_]*), got ", Got(c)));
  }
  if (c.Consume('=')) {
    input.alias_of = std::string(c.Identifier());
    if (input.alias_of.empty()) {
      return error(absl::StrCat("expected the name of an earlier input after '=', got ", Got(c)));
    }
    if (!c.AtEnd()) return error(absl::StrCat("unexpected ", Got(c), " after the alias"));
    return input;
  }
  if (!c.Consume(':')) {
    return error(absl::StrCat("expected ':' (a new tensor) or '=' (an alias) after the name '",
                              input.name, "', got ", Got(c)));
  }
  absl::string_view dtype_name = c.Identifier();
  if (dtype_name.empty()) return error(absl::StrCat("expected a dtype after ':', got ", Got(c)));
  absl::StatusOr<InputDtype> dtype = ParseInputDtype(dtype_name);
  if (!dtype.ok()) return error(dtype.status().message());
  input.dtype = *dtype;

  if (!c.Consume('[')) {
    return error(absl::StrCat("expected '[' and the shape after the dtype, got ", Got(c)));
  }
  do {
    absl::string_view dim = c.Word(",]<;");
    if (dim == "B") {
      input.dims.push_back(InputDim::Batch());
    } else if (dim == "T") {
      input.dims.push_back(InputDim::SeqLen());
    } else {
      int64_t v = 0;
      if (dim.empty()) {
        return error(absl::StrCat(
            "expected a dimension (a positive integer, B or T) in the shape, got ", Got(c)));
      }
      if (!absl::SimpleAtoi(dim, &v) || v < 1) {
        return error(absl::StrCat("dimension '", dim,
                                  "' is not a positive integer, B (micro-batch size) or T "
                                  "(sequence length)"));
      }
      input.dims.push_back(InputDim::Fixed(v));
    }
  } while (c.Consume(','));
  if (!c.Consume(']')) {
    return error(absl::StrCat("expected ',' or ']' in the shape, got ", Got(c)));
  }

  if (c.Consume('<')) {
    if (!IsIntegerDtype(input.dtype)) {
      return error(absl::StrCat(
          "'<N' is only for integer dtypes (int64, int32); ", InputDtypeName(input.dtype),
          IsFloatingDtype(input.dtype) ? " values are standard normal" : " values are 0 or 1"));
    }
    absl::string_view bound = c.Word("");
    if (!absl::SimpleAtoi(bound, &input.high) || input.high < 1) {
      return error(absl::StrCat("the bound after '<' must be a positive integer, got ",
                                bound.empty() ? Got(c) : absl::StrCat("'", bound, "'")));
    }
    if (input.dtype == InputDtype::kInt32 && input.high > (int64_t{1} << 31)) {
      return error(absl::StrCat("int32 values cannot reach the bound ", input.high,
                                " (at most 2147483648)"));
    }
  } else if (IsIntegerDtype(input.dtype)) {
    return error(absl::StrCat("integer dtype ", InputDtypeName(input.dtype),
                              " needs an exclusive upper bound '<N' after the shape (values are "
                              "uniform in [0, N)), e.g. '",
                              input.name, ":", InputDtypeName(input.dtype), "[B,T]<50257'"));
  }
  if (!c.AtEnd()) return error(absl::StrCat("unexpected ", Got(c), " after the shape"));
  return input;
}

std::string DimText(const InputDim& d) {
  switch (d.kind) {
    case InputDim::Kind::kBatch:
      return "B";
    case InputDim::Kind::kSeqLen:
      return "T";
    case InputDim::Kind::kFixed:
      break;
  }
  return absl::StrCat(d.value);
}

}  // namespace

absl::string_view InputDtypeName(InputDtype dtype) { return EnumName(kDtypes, dtype, "?"); }

absl::StatusOr<InputDtype> ParseInputDtype(absl::string_view name) {
  if (std::optional<InputDtype> d = EnumFromName(kDtypes, name)) return *d;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (allowed: ", EnumNameList(kDtypes), ")"));
}

bool IsIntegerDtype(InputDtype dtype) {
  return dtype == InputDtype::kInt64 || dtype == InputDtype::kInt32;
}

bool IsFloatingDtype(InputDtype dtype) {
  return dtype == InputDtype::kFloat32 || dtype == InputDtype::kBfloat16 ||
         dtype == InputDtype::kFloat16;
}

absl::StatusOr<InputSpec> ParseInputSpec(absl::string_view text) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input_spec: empty; describe each argument of forward, e.g. '", kExample, "'"));
  }
  InputSpec spec;
  int index = 0;
  for (absl::string_view raw : absl::StrSplit(text, ';')) {
    ++index;
    absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input_spec: item ", index, " is empty (stray ';')"));
    }
    absl::StatusOr<InputTensorSpec> input = ParseItem(index, item);
    if (!input.ok()) return input.status();
    bool alias_found = false;
    for (const InputTensorSpec& earlier : spec.inputs) {
      if (earlier.name == input->name) {
        return ItemError(index, item, absl::StrCat("duplicate name '", input->name, "'"));
      }
      if (earlier.name == input->alias_of) alias_found = true;
    }
    if (input->is_alias() && !alias_found) {
      return ItemError(index, item,
                       absl::StrCat("alias to '", input->alias_of,
                                    "', which is not an earlier input (aliases refer back)"));
    }
    spec.inputs.push_back(*std::move(input));
  }
  bool uses_batch = false;
  for (const InputTensorSpec& input : spec.inputs) {
    for (const InputDim& d : input.dims) uses_batch |= d.kind == InputDim::Kind::kBatch;
  }
  if (!uses_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("input_spec: no input has the micro-batch dimension B in its shape; at "
                     "least one must, e.g. '",
                     kExample, "'"));
  }
  return spec;
}

std::string InputSpecToText(const InputSpec& spec) {
  std::vector<std::string> items;
  for (const InputTensorSpec& input : spec.inputs) {
    if (input.is_alias()) {
      items.push_back(absl::StrCat(input.name, "=", input.alias_of));
      continue;
    }
    std::string item = absl::StrCat(
        input.name, ":", InputDtypeName(input.dtype), "[",
        absl::StrJoin(input.dims, ",",
                      [](std::string* out, const InputDim& d) { out->append(DimText(d)); }),
        "]");
    if (IsIntegerDtype(input.dtype)) absl::StrAppend(&item, "<", input.high);
    items.push_back(std::move(item));
  }
  return absl::StrJoin(items, "; ");
}

std::vector<int64_t> ResolveShape(const InputTensorSpec& input, int64_t batch, int64_t seq_len) {
  assert(!input.is_alias());
  std::vector<int64_t> shape;
  shape.reserve(input.dims.size());
  for (const InputDim& d : input.dims) {
    switch (d.kind) {
      case InputDim::Kind::kBatch:
        shape.push_back(batch);
        break;
      case InputDim::Kind::kSeqLen:
        shape.push_back(seq_len);
        break;
      case InputDim::Kind::kFixed:
        shape.push_back(d.value);
        break;
    }
  }
  return shape;
}

int64_t TokensPerSample(const InputSpec& spec, int64_t seq_len) {
  for (const InputTensorSpec& input : spec.inputs) {
    for (const InputDim& d : input.dims) {
      if (d.kind == InputDim::Kind::kSeqLen) return seq_len;
    }
  }
  return 1;
}

}  // namespace autoaccel
