#include "search/load_strategy.h"

#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "search/atorch_strategy.h"
#include "spec/strategy_fields.h"

namespace autoaccel {
namespace {

using Json = nlohmann::json;

// "unknown key 'x' (allowed: dp, tp, ...)", the keys in the spelling of `form`.
absl::Status UnknownKey(absl::string_view key, StrategyForm form) {
  std::vector<absl::string_view> keys;
  ForEachRow(kStrategyFields, [&](const auto& field) { keys.push_back(FieldKey(field, form)); });
  return absl::InvalidArgumentError(
      absl::StrCat("unknown key '", key, "' (allowed: ", absl::StrJoin(keys, ", "), ")"));
}

// Canonical text with some keys: "dp=2,sharding=zero1".
absl::StatusOr<PartialStrategy> ParsePartialText(absl::string_view text) {
  PartialStrategyBuilder b(StrategyForm::kText);
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("expected key=value, got '", item, "'"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(item.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(item.substr(eq + 1));
    const std::string origin = absl::StrCat("'", key, "=", value, "'");
    absl::Status status = UnknownKey(key, StrategyForm::kText);
    AnyRow(kStrategyFields, [&](const auto& field) {
      if (field.text_key != key) return false;
      using T = RowValue<decltype(field)>;
      if constexpr (std::is_same_v<T, int>) {
        // Not a number reads as 0: refused as out of range.
        int64_t v = 0;
        if (!absl::SimpleAtoi(value, &v)) v = 0;
        status = b.SetCount(field.name, v, absl::StrCat("'", value, "'"), origin);
      } else if constexpr (std::is_same_v<T, bool>) {
        status = value == "0" || value == "1"
                     ? b.SetFlag(field.name, value == "1", origin)
                     : absl::InvalidArgumentError(absl::StrCat(
                           "strategy.", field.text_key, ": expected 0 or 1, got '", value, "'"));
      } else {
        status = b.SetChoice(field.name, value, origin);
      }
      return true;
    });
    RETURN_IF_ERROR(status);
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

// A JSON object with some of the strategy's JSON keys.
absl::StatusOr<PartialStrategy> ParsePartialJson(absl::string_view text) {
  JsonErrorCatcher catcher(text.size());
  if (!Json::sax_parse(text, &catcher)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON at offset ", catcher.end_of_input ? text.size() : catcher.offset,
                     ": ", catcher.detail));
  }
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("expected a JSON object");
  PartialStrategyBuilder b(StrategyForm::kJson);
  for (const auto& [key, value] : j.items()) {
    const std::string origin = absl::StrCat("'", key, "'");
    absl::Status status = UnknownKey(key, StrategyForm::kJson);
    AnyRow(kStrategyFields, [&, &key = key, &value = value](const auto& field) {
      if (field.name != key) return false;
      using T = RowValue<decltype(field)>;
      if constexpr (std::is_same_v<T, int>) {
        // Not an integer, or one above INT64_MAX, reads as 0: refused as out of range.
        const bool integer = value.is_number_integer() &&
                             !(value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX);
        status = b.SetCount(field.name, integer ? value.get<int64_t>() : 0, value.dump(), origin);
      } else if constexpr (std::is_same_v<T, bool>) {
        status = value.is_boolean()
                     ? b.SetFlag(field.name, value.get<bool>(), origin)
                     : absl::InvalidArgumentError(absl::StrCat(
                           "strategy.", key, ": expected true or false, got ", value.dump()));
      } else {
        status = value.is_string()
                     ? b.SetChoice(field.name, value.get<std::string>(), origin)
                     : absl::InvalidArgumentError(absl::StrCat(
                           "strategy.", key, ": expected a string, got ", value.dump()));
      }
      return true;
    });
    RETURN_IF_ERROR(status);
  }
  return b.Finish();
}

absl::StatusOr<PartialStrategy> ParseAnyForm(absl::string_view text) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(text);
  if (stripped.empty()) {
    return absl::InvalidArgumentError(
        "empty (expected key=value pairs, a JSON object or an ATorch method list)");
  }
  if (stripped.front() == '[' || stripped.front() == '(') return ParseAtorchStrategy(text);
  if (stripped.front() == '{') return ParsePartialJson(text);
  return ParsePartialText(stripped);
}

}  // namespace

absl::StatusOr<PartialStrategy> ParseLoadStrategy(absl::string_view text) {
  absl::StatusOr<PartialStrategy> p = ParseAnyForm(text);
  if (!p.ok()) {
    return absl::Status(p.status().code(), absl::StrCat("load_strategy: ", p.status().message()));
  }
  return p;
}

}  // namespace autoaccel
