// See toml_guard.h for the toml++ 3.3.0 bug this guards against. A small lexer follows the TOML states
// that may hold non-ASCII text (comments and the four string kinds). It must never think "in a string"
// where toml++ does not: toml++ stops at an error inside a string, but it reads an invalid bare word on
// to its terminator for the message, quotes included, hence BareWord.
#include "fl/core/toml_guard.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "tensor/error.h"

namespace bastion {

namespace {

enum class State { Outside, Comment, Basic, Literal, MultiBasic, MultiLiteral };

[[noreturn]] void reject(std::string_view text, size_t at, const std::string& source, const char* what) {
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  BASTION_FAIL(source, ":", line, ": ", what, " (toml++ 3.3.0 mishandles it); write the character as a \\uXXXX escape");
}

bool starts(std::string_view text, size_t at, std::string_view prefix) {
  return text.substr(at, prefix.size()) == prefix;
}

// Outside strings and comments: whether the current character continues a bare word (a number, a
// bool, an invalid word), and whether the line is past its '='. toml++ reads a bare value on to a
// terminator (whitespace, ',', ']', '}', '#') for its messages, quotes and '[' included, and asks of
// each character whether it is one (fuzz_config's second and fourth finds: `4St5ctype"fedaöln`,
// `0man_[[["Zürich"`), so a quote glued to such a word must not open a string here either. In key
// position '=', '.' and '[' end a word too (`key="value"`, `a."b"`, `[a."b"]`).
// A value word shaped like a date, ten characters (toml++ does not count '_') with '-' at 4 and 7 and a
// digit first, is read on through a space and a digit (a date-time with ' ' for 'T'), and then through
// one more character whatever it is, terminator or not: fuzz_config's seventh find,
// `v = 6870-57-0" 6 '§`, where the guard took `'` for the start of a string holding the `§`.
// Inside an inline table a key follows '{' and ',' (fuzz_preset's find, `4= {"e{a" ={"eva "= ͮc`: the
// guard, still in value position after the first '=', took `={"eva` for one bare word and its second
// quote for the start of a string), so `open` keeps the inline tables and arrays around the token.
struct BareWord {
  bool bare = false, value = false;
  std::string open;         // '{' and '[' of the inline tables and arrays around the token, innermost last
  int length = 0;           // characters of the current word, '_' not counted
  bool date_shape = false;  // the word so far may be the date of a date-time
  int swallowed = 0;        // characters toml++ still takes into the word whatever they are
  bool swallowing() const { return swallowed > 0; }
  void step(std::string_view text, size_t at) {  // text[at] is not a quote that opened a string
    const char c = text[at];
    if (swallowing()) {
      --swallowed;
      return;
    }
    if (value && bare && c == ' ' && length == 10 && date_shape && at + 1 < text.size() && text[at + 1] >= '0' &&
        text[at + 1] <= '9') {
      swallowed = 2;  // the digit and the character after it; the space continues the word
      return;
    }
    if (c == '\n' && open.empty()) value = false;  // arrays may span lines
    const bool ends = c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',' || c == ']' || c == '}' || c == '#' ||
                      (!value && (c == '=' || c == '.' || c == '['));
    if (!value && c == '=') value = true;
    if (ends) {
      bare = false;
      if ((c == ']' || c == '}') && !open.empty()) open.pop_back(), value = true;  // after a value
      if (c == ',' && !open.empty() && open.back() == '{') value = false;          // the next key
    } else if (bare || (c != '[' && c != '{')) {
      extend(c);
    } else if (value) {  // '[' or '{' opening a value is structure
      open.push_back(c);
      if (c == '{') value = false;
    }
  }
  void extend(char c) {
    if (!bare) length = 0, date_shape = true;
    bare = true;
    if (c == '_') return;
    if ((length == 0 && (c < '0' || c > '9')) || ((length == 4 || length == 7) && c != '-')) date_shape = false;
    ++length;
  }
};

// In a basic string at a backslash: the position of a non-ASCII character that follows it, directly or
// after whitespace and newlines, else npos. toml++ asks whether that character is whitespace while it
// decides between an escape and a line-ending backslash (marzer/tomlplusplus#190; fuzz_config also
// found `\ é` with no newline, an invalid escape that still reaches the question).
size_t trims_into_non_ascii(std::string_view text, size_t at) {
  size_t i = at + 1;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  return i < text.size() && static_cast<unsigned char>(text[i]) >= 0x80 ? i : std::string_view::npos;
}

// At a multi-line string's closing delimiter (`at`: its first quote): how many quotes belong to the end.
// TOML lets one or two quotes sit right before the delimiter (`''''` is a quote and then the end), so a
// run of 3 to 5 quotes ends the string after all of them, as toml++ reads it. fuzz_config's sixth find,
// `n= '''§7A7''''§7A7''`: ending after the first three quotes put the second `§` inside a new literal
// string here, but right after the value for toml++. A sixth quote is an error toml++ reports (ASCII).
size_t closing_quotes(std::string_view text, size_t at, char quote) {
  size_t n = 0;
  while (n < 5 && at + n < text.size() && text[at + n] == quote) ++n;
  return n;
}

}  // namespace

void check_toml_text(std::string_view text, const std::string& source) {
  State state = State::Outside;
  BareWord word;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (state) {
      case State::Outside:
        if (static_cast<unsigned char>(c) >= 0x80)
          reject(text, i, source, "a non-ASCII character outside a string or comment is not valid TOML");
        if (word.swallowing()) {  // even '#' is part of the word then
          word.step(text, i);
          break;
        }
        if (c == '#') state = State::Comment;
        if (c == '"' && !word.bare) state = starts(text, i, "\"\"\"") ? State::MultiBasic : State::Basic;
        if (c == '\'' && !word.bare) state = starts(text, i, "'''") ? State::MultiLiteral : State::Literal;
        if (state == State::MultiBasic || state == State::MultiLiteral) i += 2;
        if (state == State::Outside) word.step(text, i);
        break;
      case State::Comment:
        if (c == '\n') state = State::Outside, word.step(text, i);
        break;
      case State::Basic:
        if (const size_t bad = c == '\\' ? trims_into_non_ascii(text, i) : std::string_view::npos;
            bad != std::string_view::npos)
          reject(text, bad, source, "a non-ASCII character right after a backslash is not supported");
        if (c == '\\')
          ++i;  // an escape: the next character never ends the string
        else if (c == '"' || c == '\n')
          state = State::Outside;
        break;
      case State::Literal:
        if (c == '\'' || c == '\n') state = State::Outside;
        break;
      case State::MultiBasic:
        if (const size_t bad = c == '\\' ? trims_into_non_ascii(text, i) : std::string_view::npos;
            bad != std::string_view::npos)
          reject(text, bad, source, "a non-ASCII character right after a backslash is not supported");
        if (c == '\\')
          ++i;
        else if (starts(text, i, "\"\"\""))
          state = State::Outside, i += closing_quotes(text, i, '"') - 1;
        break;
      case State::MultiLiteral:
        if (starts(text, i, "'''")) state = State::Outside, i += closing_quotes(text, i, '\'') - 1;
        break;
    }
  }
}

std::string without_utf8_bom(std::string text) {
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  return text;
}

std::string printable(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : text) {
    if (ch >= 0x20 && ch < 0x7f)
      out += static_cast<char>(ch);
    else
      out += std::string("\\x") + hex[ch >> 4] + hex[ch & 15];
  }
  return out;
}

bool valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < smallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace bastion
