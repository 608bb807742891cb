#include "search/python_literal.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace autoaccel {
namespace {

using Json = nlohmann::json;

// Recursive descent over the Python literals that ATorch strategies are
// written in. Tuples and sets become JSON arrays, dict keys that are not
// strings their JSON text, bare dotted names strings.
class PyLiteralParser {
 public:
  explicit PyLiteralParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Json> ParseAll() {
    // Python reads source as UTF-8 (anything else is a SyntaxError), and a
    // JSON string must be UTF-8 to be printed.
    size_t bad = 0;
    if (!IsValidUtf8(text_, &bad)) return ErrorAt("invalid UTF-8", bad);
    ASSIGN_OR_RETURN(Json value, ParseValue(0));
    SkipSpace();
    if (pos_ < text_.size()) return Error("expected end of input");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 100;

  absl::Status Error(absl::string_view what) const { return ErrorAt(what, pos_); }
  absl::Status ErrorAt(absl::string_view what, size_t offset) const {
    return absl::InvalidArgumentError(absl::StrCat(what, " at offset ", offset));
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
      // 1e999 is inf in Python; JSON has no infinity (it would print as null).
      if (!std::isfinite(v)) return ErrorAt("number out of range", start);
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

}  // namespace

absl::StatusOr<nlohmann::json> ParsePythonLiteral(absl::string_view text) {
  return PyLiteralParser(text).ParseAll();
}

}  // namespace autoaccel
