#include "search/methods.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace autoaccel {
namespace {

using Json = nlohmann::json;

// ------------------------------------------------------------ methods

struct Method {
  absl::string_view name;
  // The strategy field it reads; two methods of one dimension that no value
  // satisfies together "cannot both be used (one <dimension> per strategy)".
  absl::string_view dimension;
  bool (*uses)(const Strategy&);
};

constexpr Method kMethods[] = {
    {"zero1", "sharding", [](const Strategy& s) { return s.sharding == Sharding::kZero1; }},
    {"zero2", "sharding", [](const Strategy& s) { return s.sharding == Sharding::kZero2; }},
    {"fsdp", "sharding", [](const Strategy& s) { return s.sharding == Sharding::kFsdp; }},
    {"data_parallel", "data_parallel", [](const Strategy& s) { return s.data_parallel > 1; }},
    {"tensor_parallel", "tensor_parallel", [](const Strategy& s) { return s.tensor_parallel > 1; }},
    {"pipeline_parallel", "pipeline_parallel",
     [](const Strategy& s) { return s.pipeline_parallel > 1; }},
    {"sequence_parallel", "sequence_parallel",
     [](const Strategy& s) { return s.sequence_parallel; }},
    {"interleaved", "pipeline_schedule",
     [](const Strategy& s) { return s.pipeline_schedule == PipelineSchedule::kInterleaved; }},
    {"amp_native", "precision",
     [](const Strategy& s) {
       return s.precision == Precision::kBf16 || s.precision == Precision::kFp16;
     }},
    {"bf16", "precision", [](const Strategy& s) { return s.precision == Precision::kBf16; }},
    {"fp16", "precision", [](const Strategy& s) { return s.precision == Precision::kFp16; }},
    {"pure_bf16", "precision",
     [](const Strategy& s) { return s.precision == Precision::kPureBf16; }},
    {"fp32", "precision", [](const Strategy& s) { return s.precision == Precision::kFp32; }},
    {"checkpoint", "checkpointing",
     [](const Strategy& s) { return s.checkpointing != Checkpointing::kNone; }},
    {"selective_checkpoint", "checkpointing",
     [](const Strategy& s) { return s.checkpointing == Checkpointing::kSelective; }},
    {"full_checkpoint", "checkpointing",
     [](const Strategy& s) { return s.checkpointing == Checkpointing::kFull; }},
    {"sdpa", "attention", [](const Strategy& s) { return s.attention == Attention::kSdpa; }},
    {"fused_optimizer", "optimizer",
     [](const Strategy& s) { return s.optimizer == Optimizer::kFusedAdamW; }},
    {"offload", "offload", [](const Strategy& s) { return s.offload == Offload::kCpu; }},
};
constexpr int kNumMethods = sizeof(kMethods) / sizeof(kMethods[0]);
static_assert(kNumMethods <= 32, "usage patterns are 32-bit masks");

constexpr std::pair<absl::string_view, absl::string_view> kMethodAliases[] = {
    {"half", "pure_bf16"},
    {"module_replace", "sdpa"},
    {"fused_adamw", "fused_optimizer"},
    {"cpu_offload", "offload"}};

// Index into kMethods of a canonical name or alias (exact spelling), or -1.
int MethodIndex(absl::string_view name) {
  for (const auto& [alias, canonical] : kMethodAliases) {
    if (name == alias) name = canonical;
  }
  for (int i = 0; i < kNumMethods; ++i) {
    if (kMethods[i].name == name) return i;
  }
  return -1;
}

uint32_t UsageMask(const Strategy& s) {
  uint32_t mask = 0;
  for (int i = 0; i < kNumMethods; ++i) {
    if (kMethods[i].uses(s)) mask |= uint32_t{1} << i;
  }
  return mask;
}

// Every set of methods that some strategy of a valid layout uses together.
// Degrees of 1 and 2 cover every method's condition (each only asks "> 1").
const std::vector<uint32_t>& UsagePatterns() {
  static const auto* patterns = [] {
    std::set<uint32_t> masks;
    Strategy s;
    for (int dp : {1, 2}) {
      for (int tp : {1, 2}) {
        for (int pp : {1, 2}) {
          for (Sharding sharding : AllShardings()) {
            for (bool sp : {false, true}) {
              for (PipelineSchedule schedule : AllPipelineSchedules()) {
                s.data_parallel = dp;
                s.tensor_parallel = tp;
                s.pipeline_parallel = pp;
                s.sharding = sharding;
                s.sequence_parallel = sp;
                s.pipeline_schedule = schedule;
                s.virtual_stages = schedule == PipelineSchedule::kInterleaved ? 2 : 1;
                if (!CheckLayout(s).ok()) continue;
                for (Precision p : AllPrecisions()) {
                  for (Checkpointing c : AllCheckpointings()) {
                    for (Attention a : AllAttentions()) {
                      for (Optimizer o : AllOptimizers()) {
                        for (Offload off : AllOffloads()) {
                          s.precision = p;
                          s.checkpointing = c;
                          s.attention = a;
                          s.optimizer = o;
                          s.offload = off;
                          masks.insert(UsageMask(s));
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
    return new std::vector<uint32_t>(masks.begin(), masks.end());
  }();
  return *patterns;
}

std::string AllowedMethodsText() {
  return absl::StrCat("allowed: ", absl::StrJoin(KnownMethods(), ", "), "; aliases: ",
                      absl::StrJoin(kMethodAliases, ", ", [](std::string* out, const auto& alias) {
                        absl::StrAppend(out, alias.first, " = ", alias.second);
                      }));
}

// One flag's list: split, trimmed, lower-cased, canonical, each name once.
absl::StatusOr<std::vector<std::string>> ParseMethodList(absl::string_view flag,
                                                         const std::vector<std::string>& list) {
  std::vector<std::string> out;
  for (const std::string& element : list) {
    for (absl::string_view piece : absl::StrSplit(element, ',')) {
      const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(piece));
      if (name.empty()) continue;
      const int index = MethodIndex(name);
      if (index < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": unknown method '", name, "' (", AllowedMethodsText(), ")"));
      }
      const std::string canonical(kMethods[index].name);
      if (std::find(out.begin(), out.end(), canonical) == out.end()) out.push_back(canonical);
    }
  }
  return out;
}

// ------------------------------------------------------------ partial strategy fields

// The strategy's fields, in the canonical text's key order.
enum class Field {
  kDp,
  kTp,
  kPp,
  kSharding,
  kSp,
  kSchedule,
  kVpp,
  kMbs,
  kGa,
  kPrecision,
  kCheckpoint,
  kCkptPct,
  kAttention,
  kOptimizer,
  kOffload,
};
struct FieldKeys {
  Field field;
  absl::string_view text_key, json_key;
};
constexpr FieldKeys kFields[] = {
    {Field::kDp, "dp", "data_parallel"},
    {Field::kTp, "tp", "tensor_parallel"},
    {Field::kPp, "pp", "pipeline_parallel"},
    {Field::kSharding, "sharding", "sharding"},
    {Field::kSp, "sp", "sequence_parallel"},
    {Field::kSchedule, "pp_schedule", "pipeline_schedule"},
    {Field::kVpp, "vpp", "virtual_stages"},
    {Field::kMbs, "mbs", "micro_batch_size"},
    {Field::kGa, "ga", "grad_accum_steps"},
    {Field::kPrecision, "precision", "precision"},
    {Field::kCheckpoint, "checkpoint", "checkpointing"},
    {Field::kCkptPct, "ckpt_pct", "checkpoint_percent"},
    {Field::kAttention, "attention", "attention"},
    {Field::kOptimizer, "optimizer", "optimizer"},
    {Field::kOffload, "offload", "offload"},
};
constexpr int kNumFields = sizeof(kFields) / sizeof(kFields[0]);

std::string KeyList(bool text_keys) {
  return absl::StrJoin(kFields, ", ", [text_keys](std::string* out, const FieldKeys& f) {
    absl::StrAppend(out, text_keys ? f.text_key : f.json_key);
  });
}

std::string ValueText(int v) { return absl::StrCat(v); }
std::string ValueText(bool v) { return v ? "true" : "false"; }
std::string ValueText(Sharding v) { return std::string(ShardingName(v)); }
std::string ValueText(PipelineSchedule v) { return std::string(PipelineScheduleName(v)); }
std::string ValueText(Precision v) { return std::string(PrecisionName(v)); }
std::string ValueText(Checkpointing v) { return std::string(CheckpointingName(v)); }
std::string ValueText(Attention v) { return std::string(AttentionName(v)); }
std::string ValueText(Optimizer v) { return std::string(OptimizerName(v)); }
std::string ValueText(Offload v) { return std::string(OffloadName(v)); }

absl::Status LoadError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("load_strategy: ", message));
}

template <typename Enum>
absl::StatusOr<Enum> EnumValue(absl::string_view key, absl::string_view value,
                               const std::vector<Enum>& all, absl::string_view (*name)(Enum)) {
  std::vector<absl::string_view> names;
  for (Enum e : all) {
    if (name(e) == value) return e;
    names.push_back(name(e));
  }
  return LoadError(absl::StrCat("strategy.", key, ": unknown value '", value,
                                "' (allowed: ", absl::StrJoin(names, ", "), ")"));
}

// Collects the fields of one --load-strategy, refusing a field set twice to
// different values. `text_keys`: messages use the canonical text's keys
// ("dp") rather than the JSON form's ("data_parallel").
class PartialBuilder {
 public:
  explicit PartialBuilder(bool text_keys) : text_keys_(text_keys) {}

  absl::string_view Key(Field f) const {
    const FieldKeys& keys = kFields[static_cast<int>(f)];
    return text_keys_ ? keys.text_key : keys.json_key;
  }

  // A size or percent: `v` as read, range checked here; `shown` is how the
  // input spelled it, for the message.
  absl::Status SetInt(Field f, int64_t v, absl::string_view shown, absl::string_view origin) {
    const bool percent = f == Field::kCkptPct;
    if (v < 1 || v > (percent ? 100 : std::numeric_limits<int>::max())) {
      return LoadError(absl::StrCat("strategy.", Key(f), ": expected ",
                                    percent ? "a percentage in 1..100" : "a positive integer",
                                    ", got ", shown));
    }
    const int i = static_cast<int>(v);
    switch (f) {
      case Field::kDp:
        return Set(f, p_.data_parallel, i, origin);
      case Field::kTp:
        return Set(f, p_.tensor_parallel, i, origin);
      case Field::kPp:
        return Set(f, p_.pipeline_parallel, i, origin);
      case Field::kVpp:
        return Set(f, p_.virtual_stages, i, origin);
      case Field::kMbs:
        return Set(f, p_.micro_batch_size, i, origin);
      case Field::kGa:
        return Set(f, p_.grad_accum_steps, i, origin);
      case Field::kCkptPct:
        return Set(f, p_.checkpoint_percent, i, origin);
      default:
        return absl::InternalError(absl::StrCat("load_strategy: ", Key(f), " is not a number"));
    }
  }

  // An enumerator by its name.
  absl::Status SetName(Field f, absl::string_view name, absl::string_view origin) {
    switch (f) {
      case Field::kSharding: {
        ASSIGN_OR_RETURN(Sharding v, EnumValue(Key(f), name, AllShardings(), ShardingName));
        return Set(f, p_.sharding, v, origin);
      }
      case Field::kSchedule: {
        ASSIGN_OR_RETURN(PipelineSchedule v,
                         EnumValue(Key(f), name, AllPipelineSchedules(), PipelineScheduleName));
        return Set(f, p_.pipeline_schedule, v, origin);
      }
      case Field::kPrecision: {
        ASSIGN_OR_RETURN(Precision v, EnumValue(Key(f), name, AllPrecisions(), PrecisionName));
        return Set(f, p_.precision, v, origin);
      }
      case Field::kCheckpoint: {
        ASSIGN_OR_RETURN(Checkpointing v,
                         EnumValue(Key(f), name, AllCheckpointings(), CheckpointingName));
        return Set(f, p_.checkpointing, v, origin);
      }
      case Field::kAttention: {
        ASSIGN_OR_RETURN(Attention v, EnumValue(Key(f), name, AllAttentions(), AttentionName));
        return Set(f, p_.attention, v, origin);
      }
      case Field::kOptimizer: {
        ASSIGN_OR_RETURN(Optimizer v, EnumValue(Key(f), name, AllOptimizers(), OptimizerName));
        return Set(f, p_.optimizer, v, origin);
      }
      case Field::kOffload: {
        ASSIGN_OR_RETURN(Offload v, EnumValue(Key(f), name, AllOffloads(), OffloadName));
        return Set(f, p_.offload, v, origin);
      }
      default:
        return absl::InternalError(absl::StrCat("load_strategy: ", Key(f), " is not a name"));
    }
  }

  absl::Status SetSequenceParallel(bool v, absl::string_view origin) {
    return Set(Field::kSp, p_.sequence_parallel, v, origin);
  }

  // The set fields must leave room for a valid strategy: fill the unset ones
  // with values that suit the set ones and apply the strategy's own checks,
  // so an error can only name a set field.
  absl::StatusOr<PartialStrategy> Finish() const {
    const PartialStrategy& p = p_;
    Strategy s;
    s.sharding = p.sharding.value_or(Sharding::kNone);
    s.data_parallel = p.data_parallel.value_or(s.sharding == Sharding::kNone ? 1 : 2);
    s.sequence_parallel = p.sequence_parallel.value_or(false);
    s.tensor_parallel = p.tensor_parallel.value_or(s.sequence_parallel ? 2 : 1);
    s.pipeline_schedule = p.pipeline_schedule.value_or(p.virtual_stages.value_or(1) > 1
                                                           ? PipelineSchedule::kInterleaved
                                                           : PipelineSchedule::k1F1B);
    const bool interleaved = s.pipeline_schedule == PipelineSchedule::kInterleaved;
    s.pipeline_parallel = p.pipeline_parallel.value_or(interleaved ? 2 : 1);
    s.virtual_stages = p.virtual_stages.value_or(interleaved ? 2 : 1);
    s.checkpoint_percent = p.checkpoint_percent.value_or(100);
    s.checkpointing = p.checkpointing.value_or(s.checkpoint_percent == 100 ? Checkpointing::kNone
                                                                           : Checkpointing::kFull);
    const absl::Status layout =
        CheckLayout(s, text_keys_ ? StrategyForm::kText : StrategyForm::kJson);
    if (!layout.ok()) return LoadError(layout.message());
    const absl::Status percent = CheckCheckpointPercent(s, Key(Field::kCkptPct));
    if (!percent.ok()) return LoadError(percent.message());
    return p;
  }

 private:
  template <typename T>
  absl::Status Set(Field f, std::optional<T>& slot, T v, absl::string_view origin) {
    std::string& first = origins_[static_cast<int>(f)];
    if (slot.has_value() && *slot != v) {
      return LoadError(absl::StrCat("conflicting settings of ", Key(f), ": ", first, " sets ",
                                    ValueText(*slot), ", ", origin, " sets ", ValueText(v)));
    }
    if (!slot.has_value()) first = std::string(origin);
    slot = v;
    return absl::OkStatus();
  }

  bool text_keys_;
  PartialStrategy p_;
  std::string origins_[kNumFields];  // what set each field first, for conflict messages
};

// ------------------------------------------------------------ canonical text and JSON forms

absl::StatusOr<PartialStrategy> ParsePartialText(absl::string_view text) {
  PartialBuilder b(/*text_keys=*/true);
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return LoadError(absl::StrCat("expected key=value, got '", item, "'"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(item.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(item.substr(eq + 1));
    const std::string origin = absl::StrCat("'", key, "=", value, "'");
    const FieldKeys* field = nullptr;
    for (const FieldKeys& f : kFields) {
      if (f.text_key == key) field = &f;
    }
    if (field == nullptr) {
      return LoadError(
          absl::StrCat("unknown key '", key, "' (allowed: ", KeyList(/*text_keys=*/true), ")"));
    }
    switch (field->field) {
      case Field::kDp:
      case Field::kTp:
      case Field::kPp:
      case Field::kVpp:
      case Field::kMbs:
      case Field::kGa:
      case Field::kCkptPct: {
        // Not a number reads as 0: refused as out of range.
        int64_t v = 0;
        if (!absl::SimpleAtoi(value, &v)) v = 0;
        RETURN_IF_ERROR(b.SetInt(field->field, v, absl::StrCat("'", value, "'"), origin));
        break;
      }
      case Field::kSp:
        if (value != "0" && value != "1") {
          return LoadError(absl::StrCat("strategy.sp: expected 0 or 1, got '", value, "'"));
        }
        RETURN_IF_ERROR(b.SetSequenceParallel(value == "1", origin));
        break;
      default:
        RETURN_IF_ERROR(b.SetName(field->field, value, origin));
    }
  }
  return b.Finish();
}

// Records where and why nlohmann's parser stopped; accepts everything else.
class JsonErrorCatcher : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    // `position` counts the characters read, the offending one included; a
    // whole string token is read before it is found out of place, so show
    // where it starts.
    const bool string_token = last_token.size() >= 2 && last_token.front() == '"' &&
                              last_token.back() == '"' && last_token.size() <= position;
    offset = string_token ? position - last_token.size() : position > 0 ? position - 1 : 0;
    end_of_input = position > text_size_;
    // "[json.exception.parse_error.101] parse error at line 1, column 5: <why>"
    detail = ex.what();
    const size_t column = detail.find(", column ");
    const size_t colon = column == std::string::npos ? column : detail.find(": ", column);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
    return false;
  }

  explicit JsonErrorCatcher(size_t text_size) : text_size_(text_size) {}

  size_t offset = 0;
  bool end_of_input = false;
  std::string detail;

 private:
  size_t text_size_;
};

absl::StatusOr<PartialStrategy> ParsePartialJson(absl::string_view text) {
  JsonErrorCatcher catcher(text.size());
  if (!Json::sax_parse(text, &catcher)) {
    return LoadError(absl::StrCat("invalid JSON at offset ",
                                  catcher.end_of_input ? text.size() : catcher.offset, ": ",
                                  catcher.detail));
  }
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return LoadError("expected a JSON object");
  PartialBuilder b(/*text_keys=*/false);
  for (const auto& [key, value] : j.items()) {
    const FieldKeys* field = nullptr;
    for (const FieldKeys& f : kFields) {
      if (f.json_key == key) field = &f;
    }
    if (field == nullptr) {
      return LoadError(
          absl::StrCat("unknown key '", key, "' (allowed: ", KeyList(/*text_keys=*/false), ")"));
    }
    const std::string origin = absl::StrCat("'", key, "'");
    switch (field->field) {
      case Field::kDp:
      case Field::kTp:
      case Field::kPp:
      case Field::kVpp:
      case Field::kMbs:
      case Field::kGa:
      case Field::kCkptPct:
        // Not an integer, or one above INT64_MAX, reads as 0: refused as out of range.
        RETURN_IF_ERROR(b.SetInt(field->field,
                                 !value.is_number_integer() || (value.is_number_unsigned() &&
                                                                value.get<uint64_t>() > INT64_MAX)
                                     ? 0
                                     : value.get<int64_t>(),
                                 value.dump(), origin));
        break;
      case Field::kSp:
        if (!value.is_boolean()) {
          return LoadError(
              absl::StrCat("strategy.", key, ": expected true or false, got ", value.dump()));
        }
        RETURN_IF_ERROR(b.SetSequenceParallel(value.get<bool>(), origin));
        break;
      default:
        if (!value.is_string()) {
          return LoadError(
              absl::StrCat("strategy.", key, ": expected a string, got ", value.dump()));
        }
        RETURN_IF_ERROR(b.SetName(field->field, value.get<std::string>(), origin));
    }
  }
  return b.Finish();
}

// ------------------------------------------------------------ Python literals

// Recursive descent over the Python literals that ATorch strategies are
// written in. Tuples and sets become JSON arrays, dict keys that are not
// strings their JSON text, bare dotted names strings.
class PyLiteralParser {
 public:
  explicit PyLiteralParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Json> ParseAll() {
    ASSIGN_OR_RETURN(Json value, ParseValue(0));
    SkipSpace();
    if (pos_ < text_.size()) return Error("expected end of input");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 100;

  absl::Status Error(absl::string_view what) const { return ErrorAt(what, pos_); }
  absl::Status ErrorAt(absl::string_view what, size_t offset) const {
    return LoadError(absl::StrCat(what, " at offset ", offset));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (!AtEnd() && text_[pos_] != '\n') ++pos_;
      } else if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  absl::StatusOr<Json> ParseValue(int depth) {
    SkipSpace();
    if (AtEnd()) return Error("unexpected end of input");
    if (depth >= kMaxDepth) return Error(absl::StrCat("nesting deeper than ", kMaxDepth));
    const char c = Peek();
    if (c == '[') return ParseList(depth);
    if (c == '(') return ParseTuple(depth);
    if (c == '{') return ParseDictOrSet(depth);
    if (c == '\'' || c == '"') return ParseString();
    if (absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
      return ParseNumber();
    }
    if (absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_') return ParseName();
    return Error(absl::StrCat("unexpected '", absl::string_view(&text_[pos_], 1), "'"));
  }

  // Items up to `close`, with an optional trailing comma, appended to `out`;
  // `pos_` just past the opening bracket or past the items already in `out`.
  absl::Status ParseItems(char close, int depth, Json& out) {
    while (true) {
      SkipSpace();
      if (Peek() == close) {
        ++pos_;
        return absl::OkStatus();
      }
      if (!out.empty()) {
        if (Peek() != ',') return Error(absl::StrCat("expected '", std::string(1, close), "'"));
        ++pos_;
        SkipSpace();
        if (Peek() == close) {
          ++pos_;
          return absl::OkStatus();
        }
      }
      ASSIGN_OR_RETURN(Json item, ParseValue(depth + 1));
      out.push_back(std::move(item));
    }
  }

  absl::StatusOr<Json> ParseList(int depth) {
    ++pos_;  // '['
    Json out = Json::array();
    RETURN_IF_ERROR(ParseItems(']', depth, out));
    return out;
  }

  // "()" is an empty tuple, "(x)" is x, "(x,)" and "(x, y)" are tuples.
  absl::StatusOr<Json> ParseTuple(int depth) {
    ++pos_;  // '('
    SkipSpace();
    Json out = Json::array();
    if (Peek() == ')') {
      ++pos_;
      return out;
    }
    ASSIGN_OR_RETURN(Json first, ParseValue(depth + 1));
    SkipSpace();
    if (Peek() == ')') {
      ++pos_;
      return first;
    }
    if (Peek() != ',') return Error("expected ')'");
    out.push_back(std::move(first));
    RETURN_IF_ERROR(ParseItems(')', depth, out));
    return out;
  }

  // "{}" is an empty dict; "{k: v, ...}" a dict; "{x, ...}" a set.
  absl::StatusOr<Json> ParseDictOrSet(int depth) {
    ++pos_;  // '{'
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return Json::object();
    }
    ASSIGN_OR_RETURN(Json first, ParseValue(depth + 1));
    SkipSpace();
    if (Peek() != ':') {
      if (Peek() != ',' && Peek() != '}') return Error("expected ':'");
      Json out = Json::array();
      out.push_back(std::move(first));
      RETURN_IF_ERROR(ParseItems('}', depth, out));
      return out;
    }
    Json out = Json::object();
    Json key = std::move(first);
    while (true) {
      ++pos_;  // ':'
      ASSIGN_OR_RETURN(Json value, ParseValue(depth + 1));
      out[key.is_string() ? key.get<std::string>() : key.dump()] = std::move(value);
      SkipSpace();
      if (Peek() == '}') {
        ++pos_;
        return out;
      }
      if (Peek() != ',') return Error("expected '}'");
      ++pos_;
      SkipSpace();
      if (Peek() == '}') {
        ++pos_;
        return out;
      }
      ASSIGN_OR_RETURN(key, ParseValue(depth + 1));
      SkipSpace();
      if (Peek() != ':') return Error("expected ':'");
    }
  }

  static void AppendUtf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Python's escapes; an unknown one keeps its backslash, as Python does.
  absl::StatusOr<Json> ParseString() {
    const size_t start = pos_;
    const char quote = text_[pos_++];
    std::string out;
    while (true) {
      if (AtEnd() || text_[pos_] == '\n') return ErrorAt("unterminated string", start);
      const char c = text_[pos_];
      if (c == quote) {
        ++pos_;
        return Json(std::move(out));
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      const size_t escape = pos_++;
      if (AtEnd()) return ErrorAt("unterminated string", start);
      const char e = text_[pos_++];
      switch (e) {
        case '\n':  // line continuation
          break;
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t i = 0; i < digits; ++i, ++pos_) {
            const char h = Peek();
            if (!absl::ascii_isxdigit(static_cast<unsigned char>(h))) {
              return ErrorAt(absl::StrCat("invalid \\", std::string(1, e), " escape"), escape);
            }
            cp = cp * 16 + (absl::ascii_isdigit(static_cast<unsigned char>(h))
                                ? h - '0'
                                : absl::ascii_tolower(static_cast<unsigned char>(h)) - 'a' + 10);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return ErrorAt(absl::StrCat("invalid \\", std::string(1, e), " escape"), escape);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = e - '0';
            for (int i = 0; i < 2 && Peek() >= '0' && Peek() <= '7'; ++i) {
              cp = cp * 8 + (text_[pos_++] - '0');
            }
            AppendUtf8(cp, out);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
  }

  absl::StatusOr<Json> ParseNumber() {
    const size_t start = pos_;
    if (Peek() == '-' || Peek() == '+') ++pos_;
    const auto digits = [this] {
      size_t n = 0;
      while (absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) ++pos_, ++n;
      return n;
    };
    size_t mantissa = digits();
    bool is_float = false;
    if (Peek() == '.') {
      ++pos_;
      is_float = true;
      mantissa += digits();
    }
    if (mantissa == 0) return ErrorAt("expected a number", start);
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      is_float = true;
      if (Peek() == '-' || Peek() == '+') ++pos_;
      if (digits() == 0) return Error("expected exponent digits");
    }
    const std::string literal(text_.substr(start, pos_ - start));
    if (is_float) {
      double v = 0;
      if (!absl::SimpleAtod(literal, &v)) return ErrorAt("invalid number", start);
      return Json(v);
    }
    int64_t v = 0;
    if (!absl::SimpleAtoi(literal, &v)) return ErrorAt("integer out of range", start);
    return Json(v);
  }

  // True, False, None, or a dotted name ("torch.bfloat16") read as a string.
  absl::StatusOr<Json> ParseName() {
    const size_t start = pos_;
    const auto ident = [this] {
      const size_t begin = pos_;
      if (absl::ascii_isalpha(static_cast<unsigned char>(Peek())) || Peek() == '_') {
        ++pos_;
        while (absl::ascii_isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_') ++pos_;
      }
      return pos_ > begin;
    };
    ident();
    while (Peek() == '.') {
      ++pos_;
      if (!ident()) return Error("expected a name after '.'");
    }
    const absl::string_view name = text_.substr(start, pos_ - start);
    if (name == "True") return Json(true);
    if (name == "False") return Json(false);
    if (name == "None") return Json(nullptr);
    return Json(std::string(name));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// ------------------------------------------------------------ ATorch's list

constexpr absl::string_view kAtorchMethods =
    "zero1, zero2, fsdp, amp_native, half, checkpoint, module_replace, fused_optimizer, "
    "fused_adamw, offload, cpu_offload, sequence_parallel, parallel_mode, tensor_parallel, "
    "pipeline_parallel";

// "bf16" or "fp16" for a dtype config of amp_native / half.
absl::StatusOr<Precision> DtypeOf(absl::string_view method, const Json& config) {
  const Json* dtype = &config;
  if (config.is_object()) {
    if (!config.contains("dtype")) return Precision::kBf16;
    dtype = &config["dtype"];
  }
  if (dtype->is_null()) return Precision::kBf16;
  if (!dtype->is_string()) {
    return LoadError(
        absl::StrCat(method, ": expected a dtype or {\"dtype\": ...}, got ", config.dump()));
  }
  const std::string name = absl::AsciiStrToLower(dtype->get<std::string>());
  if (name == "bf16" || name == "bfloat16" || name == "torch.bfloat16") return Precision::kBf16;
  if (name == "fp16" || name == "float16" || name == "torch.float16" || name == "torch.half") {
    return Precision::kFp16;
  }
  return LoadError(absl::StrCat(method, ": unknown dtype '", dtype->get<std::string>(),
                                "' (allowed: bf16, bfloat16, torch.bfloat16, fp16, float16, "
                                "torch.float16, torch.half)"));
}

absl::StatusOr<int64_t> SizeOf(absl::string_view what, const Json& v) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) ||
      v.get<int64_t>() < 1 || v.get<int64_t>() > std::numeric_limits<int>::max()) {
    return LoadError(absl::StrCat(what, ": expected a positive integer size, got ", v.dump()));
  }
  return v.get<int64_t>();
}

absl::Status ApplyParallelMode(const Json& config, PartialBuilder& b) {
  constexpr absl::string_view kUsage =
      "parallel_mode: expected ([(\"data\", n), (\"tensor\", n), (\"pipeline\", n)], None)";
  if (!config.is_array()) return LoadError(absl::StrCat(kUsage, ", got ", config.dump()));
  // Either (pairs, ranks) or the bare list of pairs.
  const bool wrapped =
      !config.empty() && config[0].is_array() && (config[0].empty() || config[0][0].is_array());
  const Json& pairs = wrapped ? config[0] : config;
  const std::string origin = "'parallel_mode'";
  for (const Json& pair : pairs) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
      return LoadError(absl::StrCat(kUsage, ", got ", pair.dump(), " in the list"));
    }
    const std::string group = absl::AsciiStrToLower(pair[0].get<std::string>());
    Field field;
    if (group == "data") {
      field = Field::kDp;
    } else if (group == "tensor") {
      field = Field::kTp;
    } else if (group == "pipeline" || group == "pipe") {
      field = Field::kPp;
    } else {
      return LoadError(absl::StrCat("parallel_mode: unknown group '", pair[0].get<std::string>(),
                                    "' (allowed: data, tensor, pipeline, pipe)"));
    }
    ASSIGN_OR_RETURN(int64_t size, SizeOf(absl::StrCat("parallel_mode ", group), pair[1]));
    RETURN_IF_ERROR(b.SetInt(field, size, pair[1].dump(), origin));
  }
  return absl::OkStatus();
}

absl::Status ApplyAtorchMethod(absl::string_view name, const Json& config, PartialBuilder& b) {
  const std::string origin = absl::StrCat("'", name, "'");
  if (name == "zero1" || name == "zero2" || name == "fsdp") {
    return b.SetName(Field::kSharding, name, origin);
  }
  if (name == "amp_native") {
    ASSIGN_OR_RETURN(Precision p, DtypeOf(name, config));
    return b.SetName(Field::kPrecision, PrecisionName(p), origin);
  }
  if (name == "half") {
    ASSIGN_OR_RETURN(Precision p, DtypeOf(name, config));
    if (p == Precision::kFp16) {
      return LoadError(
          "half with float16 is not supported (pure fp16 training); use amp_native with fp16");
    }
    return b.SetName(Field::kPrecision, PrecisionName(Precision::kPureBf16), origin);
  }
  if (name == "checkpoint") return b.SetName(Field::kCheckpoint, "full", origin);
  if (name == "module_replace") return b.SetName(Field::kAttention, "sdpa", origin);
  if (name == "fused_optimizer" || name == "fused_adamw") {
    return b.SetName(Field::kOptimizer, "fused_adamw", origin);
  }
  if (name == "offload" || name == "cpu_offload") return b.SetName(Field::kOffload, "cpu", origin);
  if (name == "sequence_parallel") return b.SetSequenceParallel(true, origin);
  if (name == "parallel_mode") return ApplyParallelMode(config, b);
  if (name == "tensor_parallel" || name == "pipeline_parallel") {
    const Json* size = &config;
    if (config.is_object() && config.contains("size")) size = &config["size"];
    if (size->is_null() || size->is_object()) {
      return LoadError(absl::StrCat(name, " needs a size: (\"", name, "\", 2) or (\"", name,
                                    "\", {\"size\": 2})"));
    }
    ASSIGN_OR_RETURN(int64_t n, SizeOf(name, *size));
    return b.SetInt(name == "tensor_parallel" ? Field::kTp : Field::kPp, n, size->dump(), origin);
  }
  return LoadError(absl::StrCat("unknown method '", name, "' (allowed: ", kAtorchMethods, ")"));
}

absl::StatusOr<PartialStrategy> ParseAtorchList(absl::string_view text) {
  ASSIGN_OR_RETURN(const Json list, PyLiteralParser(text).ParseAll());
  if (!list.is_array()) {
    return LoadError(absl::StrCat("expected a list of methods, got ", list.dump()));
  }
  PartialBuilder b(/*text_keys=*/false);
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& element = list[i];
    const Json* name = &element;
    Json config;  // null: no config
    if (element.is_array() && !element.empty() && element.size() <= 3) {
      name = &element[0];
      if (element.size() >= 2) config = element[1];
      // ATorch's third item says whether the method is tunable; nothing to take from it.
      if (element.size() == 3 && !element[2].is_boolean()) name = &element;
    }
    if (!name->is_string()) {
      return LoadError(absl::StrCat("element ", i + 1,
                                    ": expected a method name or a (name, config) tuple, got ",
                                    element.dump()));
    }
    const std::string method =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(name->get<std::string>()));
    RETURN_IF_ERROR(ApplyAtorchMethod(method, config, b));
  }
  return b.Finish();
}

}  // namespace

// ------------------------------------------------------------ public API

const std::vector<std::string>& KnownMethods() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const Method& m : kMethods) v->emplace_back(m.name);
    return v;
  }();
  return *names;
}

bool UsesMethod(const Strategy& s, absl::string_view name) {
  const int index = MethodIndex(name);
  return index >= 0 && kMethods[index].uses(s);
}

std::string MethodFilter::Refusal(const Strategy& s) const {
  for (const std::string& name : exclude) {
    if (UsesMethod(s, name)) return absl::StrCat("excluded method '", name, "' (--exclude)");
  }
  for (const std::string& name : include) {
    if (!UsesMethod(s, name)) return absl::StrCat("lacks included method '", name, "' (--include)");
  }
  return "";
}

absl::StatusOr<MethodFilter> ParseMethodFilter(const std::vector<std::string>& include,
                                               const std::vector<std::string>& exclude) {
  MethodFilter f;
  ASSIGN_OR_RETURN(f.include, ParseMethodList("include", include));
  ASSIGN_OR_RETURN(f.exclude, ParseMethodList("exclude", exclude));
  for (const std::string& name : f.include) {
    if (std::find(f.exclude.begin(), f.exclude.end(), name) != f.exclude.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("include, exclude: '", name, "' is both included and excluded"));
    }
  }

  // Satisfiability, against the sets of methods real strategies use together.
  const std::vector<uint32_t>& patterns = UsagePatterns();
  const auto bit = [](const std::string& name) { return uint32_t{1} << MethodIndex(name); };
  const auto some = [&](uint32_t all_of, uint32_t none_of) {
    for (uint32_t p : patterns) {
      if ((p & all_of) == all_of && (p & none_of) == 0) return true;
    }
    return false;
  };
  for (size_t i = 0; i < f.include.size(); ++i) {
    for (size_t j = i + 1; j < f.include.size(); ++j) {
      const std::string& a = f.include[i];
      const std::string& b = f.include[j];
      if (some(bit(a) | bit(b), 0)) continue;
      const absl::string_view dim_a = kMethods[MethodIndex(a)].dimension;
      const absl::string_view dim_b = kMethods[MethodIndex(b)].dimension;
      return absl::InvalidArgumentError(absl::StrCat(
          "include: '", a, "' and '", b, "' cannot both be used (",
          dim_a == dim_b ? absl::StrCat("one ", dim_a, " per strategy") : "no strategy uses both",
          ")"));
    }
  }
  for (const std::string& a : f.include) {
    for (const std::string& b : f.exclude) {
      if (!some(bit(a), bit(b))) {
        return absl::InvalidArgumentError(
            absl::StrCat("include, exclude: '", a, "' needs '", b, "', which is excluded"));
      }
    }
  }
  uint32_t all_of = 0, none_of = 0;
  for (const std::string& name : f.include) all_of |= bit(name);
  for (const std::string& name : f.exclude) none_of |= bit(name);
  if (!some(all_of, none_of)) {
    if (f.exclude.empty()) {
      return absl::InvalidArgumentError("include: no strategy uses every included method");
    }
    if (f.include.empty()) {
      return absl::InvalidArgumentError("exclude: every strategy uses one of the excluded methods");
    }
    return absl::InvalidArgumentError(
        "include, exclude: no strategy uses every included method and none of the excluded ones");
  }
  return f;
}

int PartialStrategy::CountSet() const {
  return data_parallel.has_value() + tensor_parallel.has_value() + pipeline_parallel.has_value() +
         virtual_stages.has_value() + micro_batch_size.has_value() + grad_accum_steps.has_value() +
         checkpoint_percent.has_value() + sharding.has_value() + pipeline_schedule.has_value() +
         sequence_parallel.has_value() + precision.has_value() + checkpointing.has_value() +
         attention.has_value() + optimizer.has_value() + offload.has_value();
}

bool PartialStrategy::Matches(const Strategy& s) const {
  const auto ok = [](const auto& field, const auto& value) {
    return !field.has_value() || *field == value;
  };
  return ok(data_parallel, s.data_parallel) && ok(tensor_parallel, s.tensor_parallel) &&
         ok(pipeline_parallel, s.pipeline_parallel) && ok(virtual_stages, s.virtual_stages) &&
         ok(micro_batch_size, s.micro_batch_size) && ok(grad_accum_steps, s.grad_accum_steps) &&
         ok(checkpoint_percent, s.checkpoint_percent) && ok(sharding, s.sharding) &&
         ok(pipeline_schedule, s.pipeline_schedule) && ok(sequence_parallel, s.sequence_parallel) &&
         ok(precision, s.precision) && ok(checkpointing, s.checkpointing) &&
         ok(attention, s.attention) && ok(optimizer, s.optimizer) && ok(offload, s.offload);
}

std::string PartialStrategy::ToText() const {
  std::vector<std::string> items;
  const auto add = [&](absl::string_view key, const auto& field) {
    if (field.has_value()) items.push_back(absl::StrCat(key, "=", ValueText(*field)));
  };
  add("dp", data_parallel);
  add("tp", tensor_parallel);
  add("pp", pipeline_parallel);
  add("sharding", sharding);
  if (sequence_parallel.has_value()) items.push_back(*sequence_parallel ? "sp=1" : "sp=0");
  add("pp_schedule", pipeline_schedule);
  add("vpp", virtual_stages);
  add("mbs", micro_batch_size);
  add("ga", grad_accum_steps);
  add("precision", precision);
  add("checkpoint", checkpointing);
  add("ckpt_pct", checkpoint_percent);
  add("attention", attention);
  add("optimizer", optimizer);
  add("offload", offload);
  return absl::StrJoin(items, ",");
}

bool operator==(const PartialStrategy& a, const PartialStrategy& b) {
  return a.data_parallel == b.data_parallel && a.tensor_parallel == b.tensor_parallel &&
         a.pipeline_parallel == b.pipeline_parallel && a.virtual_stages == b.virtual_stages &&
         a.micro_batch_size == b.micro_batch_size && a.grad_accum_steps == b.grad_accum_steps &&
         a.checkpoint_percent == b.checkpoint_percent && a.sharding == b.sharding &&
         a.pipeline_schedule == b.pipeline_schedule && a.sequence_parallel == b.sequence_parallel &&
         a.precision == b.precision && a.checkpointing == b.checkpointing &&
         a.attention == b.attention && a.optimizer == b.optimizer && a.offload == b.offload;
}

absl::StatusOr<PartialStrategy> ParseLoadStrategy(absl::string_view text) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(text);
  if (stripped.empty()) {
    return LoadError("empty (expected key=value pairs, a JSON object or an ATorch method list)");
  }
  if (stripped.front() == '[' || stripped.front() == '(') return ParseAtorchList(text);
  if (stripped.front() == '{') return ParsePartialJson(text);
  return ParsePartialText(stripped);
}

}  // namespace autoaccel
