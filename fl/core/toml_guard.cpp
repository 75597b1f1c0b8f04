// See toml_guard.h for the toml++ 3.3.0 bug this guards against. A small lexer follows the TOML states
// that may hold non-ASCII text (comments and the four string kinds). It must never think "in a string"
// where toml++ does not: toml++ stops at an error inside a string, but it reads an invalid bare word on
// to its terminator for the message, quotes included (fuzz_config's second find), hence opens_token.
#include "fl/core/toml_guard.h"

#include <algorithm>

#include "tensor/error.h"

namespace bastion {

namespace {

enum class State { Outside, Comment, Basic, Literal, MultiBasic, MultiLiteral };

[[noreturn]] void reject(std::string_view text, size_t at, const std::string& source, const char* what) {
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  BASTION_FAIL(source, ":", line, ": ", what, " (toml++ 3.3.0 mishandles it); write the character as a \\uXXXX escape");
}

bool starts(std::string_view text, size_t at, std::string_view prefix) { return text.substr(at, prefix.size()) == prefix; }

// A quote starts a string only where a token can start (line start, after whitespace, '=', '[', ',', '{'
// or a key's '.'); glued to a bare word (`4St5"ö`) toml++ reads it as part of that invalid word and
// asks of each following character whether it ends the word, so the lexer must not skip it either.
bool opens_token(std::string_view text, size_t at) {
  if (at == 0) return true;
  const char previous = text[at - 1];
  return previous == ' ' || previous == '\t' || previous == '\n' || previous == '\r' || previous == '=' ||
         previous == '[' || previous == ',' || previous == '{' || previous == '.';
}

// In a multi-line basic string at a backslash: true when it ends the line and the first character after
// the whitespace it trims is non-ASCII (the case of marzer/tomlplusplus#190); returns that character's
// position, or npos.
size_t trims_into_non_ascii(std::string_view text, size_t at) {
  size_t i = at + 1;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i >= text.size() || (text[i] != '\n' && text[i] != '\r')) return std::string_view::npos;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  return i < text.size() && static_cast<unsigned char>(text[i]) >= 0x80 ? i : std::string_view::npos;
}

}  // namespace

void check_toml_text(std::string_view text, const std::string& source) {
  State state = State::Outside;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (state) {
      case State::Outside:
        if (static_cast<unsigned char>(c) >= 0x80)
          reject(text, i, source, "a non-ASCII character outside a string or comment is not valid TOML");
        if (c == '#') state = State::Comment;
        if (c == '"' && opens_token(text, i)) state = starts(text, i, "\"\"\"") ? State::MultiBasic : State::Basic;
        if (c == '\'' && opens_token(text, i)) state = starts(text, i, "'''") ? State::MultiLiteral : State::Literal;
        if (state == State::MultiBasic || state == State::MultiLiteral) i += 2;
        break;
      case State::Comment:
        if (c == '\n') state = State::Outside;
        break;
      case State::Basic:
        if (c == '\\') ++i;  // an escape: the next character never ends the string
        else if (c == '"' || c == '\n') state = State::Outside;
        break;
      case State::Literal:
        if (c == '\'' || c == '\n') state = State::Outside;
        break;
      case State::MultiBasic:
        if (const size_t bad = c == '\\' ? trims_into_non_ascii(text, i) : std::string_view::npos;
            bad != std::string_view::npos)
          reject(text, bad, source, "a non-ASCII character right after a line-ending backslash is not supported");
        if (c == '\\') ++i;
        else if (starts(text, i, "\"\"\"")) state = State::Outside, i += 2;
        break;
      case State::MultiLiteral:
        if (starts(text, i, "'''")) state = State::Outside, i += 2;
        break;
    }
  }
}

}  // namespace bastion
