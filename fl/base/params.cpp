// Params: validation of one section's or one unit's parameters against its ParamSpec table, and the
// TOML / `bastion list` spelling of values. Every error names the dotted key (`scope.name`) and the
// offending value, because the user has to find the line in their config file from the message alone.
#include "fl/base/params.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "tensor/error.h"

namespace bastion {

namespace {

std::string full_key(const std::string& scope, const std::string& name) {
  return scope.empty() ? name : scope + "." + name;
}

// The kind of value a user wrote, for "expected int, got text" messages.
const char* value_kind_name(const ParamValue& value) {
  switch (value.index()) {
    case 0:
      return "int";
    case 1:
      return "real";
    case 2:
      return "bool";
    case 3:
      return "text";
    default:
      return "list";
  }
}

std::string valid_keys(const std::vector<ParamSpec>& specs) {
  std::string keys;
  for (const ParamSpec& spec : specs) keys += (keys.empty() ? "" : ", ") + spec.name;
  return keys.empty() ? "(none)" : keys;
}

std::string join_choices(const std::vector<std::string>& choices) {
  std::string joined;
  for (const std::string& choice : choices) joined += (joined.empty() ? "" : ", ") + choice;
  return joined;
}

// Shortest decimal text that parses back to the same double (C++17 to_chars round-trip guarantee).
std::string shortest_real(double v) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), v);
  return std::string(buffer, result.ptr);
}

// A bound for messages and `bastion list`: integers print without exponent ("1000000000000").
std::string bound_text(double bound, ParamType type) {
  if (type == ParamType::Integer && std::abs(bound) < 9.3e18) return std::to_string(static_cast<int64_t>(bound));
  return shortest_real(bound);
}

// Converts `value` to the spec's type: Integer -> Real is widened, an integral Real -> Integer is
// narrowed; anything else must already have the right type. Non-finite numbers are rejected.
ParamValue coerce(const ParamSpec& spec, const ParamValue& value, const std::string& key) {
  const std::string got = param_value_to_toml(value);
  switch (spec.type) {
    case ParamType::Integer: {
      if (const auto* i = std::get_if<int64_t>(&value)) return *i;
      const auto* r = std::get_if<double>(&value);
      BASTION_CHECK(r != nullptr, key, ": expected int, got ", value_kind_name(value), " ", got);
      BASTION_CHECK(std::isfinite(*r), key, ": expected a finite int, got ", got);
      // 2^63 is exactly representable; values at or beyond it do not fit in int64.
      BASTION_CHECK(*r == std::trunc(*r) && std::abs(*r) < 9223372036854775808.0, key,
                    ": expected an integral value, got ", got);
      return static_cast<int64_t>(*r);
    }
    case ParamType::Real: {
      if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
      const auto* r = std::get_if<double>(&value);
      BASTION_CHECK(r != nullptr, key, ": expected real, got ", value_kind_name(value), " ", got);
      BASTION_CHECK(std::isfinite(*r), key, ": expected a finite real, got ", got);
      return *r;
    }
    case ParamType::Boolean:
      BASTION_CHECK(std::holds_alternative<bool>(value), key, ": expected bool, got ", value_kind_name(value), " ",
                    got);
      return value;
    case ParamType::Text:
      BASTION_CHECK(std::holds_alternative<std::string>(value), key, ": expected text, got ", value_kind_name(value),
                    " ", got);
      return value;
    case ParamType::TextList:
      // One text is a list of one, so `--set attack.names=lie` and `--grid attack.names=lie,ipm` need no
      // TOML brackets on the command line.
      if (const auto* one = std::get_if<std::string>(&value)) return std::vector<std::string>{*one};
      BASTION_CHECK(std::holds_alternative<std::vector<std::string>>(value), key, ": expected a list of text, got ",
                    value_kind_name(value), " ", got);
      return value;
  }
  BASTION_FAIL(key, ": unknown parameter type");
}

void check_choice(const ParamSpec& spec, const std::string& text, const std::string& key) {
  if (spec.choices.empty()) return;
  const bool ok = std::find(spec.choices.begin(), spec.choices.end(), text) != spec.choices.end();
  BASTION_CHECK(ok, key, ": '", text, "' is not one of ", join_choices(spec.choices));
}

// value within [min, max] compared as integers where the bounds are integers int64 can hold.
bool within_integer_bounds(int64_t value, double min, double max) {
  constexpr double kInt64Limit = 9.2e18;
  if (std::isfinite(min) && std::abs(min) < kInt64Limit && min == std::trunc(min) && value < static_cast<int64_t>(min))
    return false;
  if (std::isfinite(max) && std::abs(max) < kInt64Limit && max == std::trunc(max) && value > static_cast<int64_t>(max))
    return false;
  return true;
}

// Range and choices of an already coerced value.
void check_bounds(const ParamSpec& spec, const ParamValue& value, const std::string& key) {
  if (spec.type == ParamType::Integer || spec.type == ParamType::Real) {
    const double v =
        spec.type == ParamType::Integer ? static_cast<double>(std::get<int64_t>(value)) : std::get<double>(value);
    // An integer is also compared exactly: as a double, 2^53 + 1 rounds to 2^53 and passed a bound of 2^53.
    const bool exact_ok =
        spec.type != ParamType::Integer || within_integer_bounds(std::get<int64_t>(value), spec.min, spec.max);
    BASTION_CHECK(v >= spec.min && v <= spec.max && exact_ok, key, " = ", param_value_to_toml(value), " is outside [",
                  bound_text(spec.min, spec.type), ", ", bound_text(spec.max, spec.type), "]");
  } else if (spec.type == ParamType::Text) {
    check_choice(spec, std::get<std::string>(value), key);
  } else if (spec.type == ParamType::TextList) {
    for (const std::string& element : std::get<std::vector<std::string>>(value)) check_choice(spec, element, key);
  }
}

void append_escaped(std::string& out, const std::string& text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char code[8];
          std::snprintf(code, sizeof(code), "\\u%04X", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += code;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string real_to_toml(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string text = shortest_real(v);
  // TOML reads "1" as an integer; a real must keep a fraction or an exponent to stay a real.
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

Params::Params(std::string scope, const std::vector<ParamSpec>& specs, const std::map<std::string, ParamValue>& given)
    : scope_(std::move(scope)) {
  for (const auto& [given_name, value] : given) {
    // A named copy: clang 14 cannot capture a structured binding in a lambda.
    const std::string& name = given_name;
    const std::string key = full_key(scope_, name);
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const ParamSpec& s) { return s.name == name; });
    BASTION_CHECK(spec != specs.end(), "unknown key '", key, "'; valid keys",
                  scope_.empty() ? "" : " in [" + scope_ + "]", ": ", valid_keys(specs));
    ParamValue coerced = coerce(*spec, value, key);
    check_bounds(*spec, coerced, key);
    values_[name] = std::move(coerced);
  }
  // Defaults are trusted (they are code, checked by the registry sweep tests) but still widened, so a
  // table may write `int64_t{0}` for a Real default.
  for (const ParamSpec& spec : specs) {
    if (values_.count(spec.name) == 0)
      values_[spec.name] = coerce(spec, spec.default_value, full_key(scope_, spec.name));
  }
}

const ParamValue& Params::at(const std::string& name) const {
  const auto it = values_.find(name);
  BASTION_CHECK(it != values_.end(), "no parameter '", full_key(scope_, name), "'");
  return it->second;
}

int64_t Params::integer(const std::string& name) const {
  const auto* v = std::get_if<int64_t>(&at(name));
  BASTION_CHECK(v != nullptr, "parameter '", full_key(scope_, name), "' is ", value_kind_name(at(name)), ", not int");
  return *v;
}

double Params::real(const std::string& name) const {
  const ParamValue& value = at(name);
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  const auto* v = std::get_if<double>(&value);
  BASTION_CHECK(v != nullptr, "parameter '", full_key(scope_, name), "' is ", value_kind_name(value), ", not real");
  return *v;
}

bool Params::boolean(const std::string& name) const {
  const auto* v = std::get_if<bool>(&at(name));
  BASTION_CHECK(v != nullptr, "parameter '", full_key(scope_, name), "' is ", value_kind_name(at(name)), ", not bool");
  return *v;
}

const std::string& Params::text(const std::string& name) const {
  const auto* v = std::get_if<std::string>(&at(name));
  BASTION_CHECK(v != nullptr, "parameter '", full_key(scope_, name), "' is ", value_kind_name(at(name)), ", not text");
  return *v;
}

const std::vector<std::string>& Params::list(const std::string& name) const {
  const auto* v = std::get_if<std::vector<std::string>>(&at(name));
  BASTION_CHECK(v != nullptr, "parameter '", full_key(scope_, name), "' is ", value_kind_name(at(name)), ", not list");
  return *v;
}

const char* param_type_name(ParamType type) {
  switch (type) {
    case ParamType::Integer:
      return "int";
    case ParamType::Real:
      return "real";
    case ParamType::Boolean:
      return "bool";
    case ParamType::Text:
      return "text";
    case ParamType::TextList:
      return "list";
  }
  return "?";
}

std::string param_value_to_toml(const ParamValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* r = std::get_if<double>(&value)) return real_to_toml(*r);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  std::string out;
  if (const auto* s = std::get_if<std::string>(&value)) {
    append_escaped(out, *s);
    return out;
  }
  out = "[";
  const auto& list = std::get<std::vector<std::string>>(value);
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += ", ";
    append_escaped(out, list[i]);
  }
  return out + "]";
}

namespace {
// "[0, 1]", ">= 0", "<= 5", "one of: a, b", or "" when anything goes.
std::string constraint_text(const ParamSpec& spec) {
  if (spec.type == ParamType::Integer || spec.type == ParamType::Real) {
    const bool low = std::isfinite(spec.min), high = std::isfinite(spec.max);
    if (low && high)
      return std::string("[")
          .append(bound_text(spec.min, spec.type))
          .append(", ")
          .append(bound_text(spec.max, spec.type))
          .append("]");
    // Appending (not "literal" + string&&) sidesteps a GCC 12 -Wrestrict false positive.
    if (low) return std::string(">= ").append(bound_text(spec.min, spec.type));
    if (high) return std::string("<= ").append(bound_text(spec.max, spec.type));
    return "";
  }
  if (spec.type == ParamType::Text || spec.type == ParamType::TextList) {
    return spec.choices.empty() ? "" : "one of: " + join_choices(spec.choices);
  }
  return "";
}
}  // namespace

std::string param_default_text(const ParamSpec& spec) {
  // A Real default written as an int literal still shows as a real ("0.0").
  const auto* int_default = std::get_if<int64_t>(&spec.default_value);
  const ParamValue shown =
      spec.type == ParamType::Real && int_default ? ParamValue(static_cast<double>(*int_default)) : spec.default_value;
  return param_value_to_toml(shown);
}

std::string describe_params(const std::vector<ParamSpec>& specs, const std::string& indent) {
  std::vector<std::array<std::string, 4>> rows;
  std::array<size_t, 4> width{};
  for (const ParamSpec& spec : specs) {
    std::array<std::string, 4> row = {spec.name, param_type_name(spec.type), param_default_text(spec),
                                      constraint_text(spec)};
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    rows.push_back(std::move(row));
  }
  std::ostringstream out;
  for (size_t r = 0; r < rows.size(); ++r) {
    out << indent;
    for (size_t c = 0; c < rows[r].size(); ++c) out << rows[r][c] << std::string(width[c] - rows[r][c].size() + 2, ' ');
    out << specs[r].doc << "\n";
  }
  return out.str();
}

std::string describe_params_markdown(const std::vector<ParamSpec>& specs) {
  std::ostringstream out;
  out << "| key | type | default | range / choices | doc |\n| --- | --- | --- | --- | --- |\n";
  for (const ParamSpec& spec : specs) {
    std::string constraint = constraint_text(spec);
    if (constraint.rfind("one of: ", 0) == 0) constraint = constraint.substr(8);
    out << "| `" << spec.name << "` | " << param_type_name(spec.type) << " | `" << param_default_text(spec) << "` | "
        << constraint << " | " << spec.doc << " |\n";
  }
  return out.str();
}

}  // namespace bastion
