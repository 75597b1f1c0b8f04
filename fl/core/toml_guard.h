// A guard run on every text before toml++ parses it (config files, --set values, presets).
// Debian's toml++ 3.3.0 has undefined behaviour (it reaches __builtin_unreachable in
// is_non_ascii_horizontal_whitespace) when it asks whether a non-ASCII character in some code-point
// ranges (e.g. U+00A7, U+0148) is whitespace: right after a value or key (`seed = 1ň`), and after a
// backslash in a basic string (a line-ending one, or an invalid escape `\ é`); upstream
// marzer/tomlplusplus#190, fixed after 3.3.0. Found by fuzz_config and fuzz_preset. Non-ASCII text is valid TOML only in comments and strings, so
// the guard rejects a non-ASCII byte anywhere else (toml++ would reject it too, after the UB), and the
// one valid trigger: a non-ASCII character right after a line-ending backslash in a """ string (write
// it as \uXXXX instead; the error says so).
#pragma once

#include <string>
#include <string_view>

namespace bastion {

// Throws bastion::Error naming `source` and the line when `text` holds the sequence above.
void check_toml_text(std::string_view text, const std::string& source);

// `text` without a leading UTF-8 byte-order mark: editors on some systems write one, TOML allows none, and
// check_toml_text would report it as non-ASCII outside a string (issue 42 item 10). Configs and presets.
std::string without_utf8_bom(std::string text);

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as toml++ demands of a file:
// a --set text value must pass it, or config_to_toml would write a config.toml that cannot be read back.
bool valid_utf8(std::string_view text);

// `text` with control bytes and non-ASCII shown as \xNN, so an error message shows what was given (a NUL
// would otherwise cut it short).
std::string printable(const std::string& text);

}  // namespace bastion
