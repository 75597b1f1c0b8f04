// Params: the validated parameters of one config section or one FL unit (client rule, server rule,
// attack). Every unit declares a table of ParamSpec (name, type, default, range or choices, one-line
// doc); `bastion list` prints these tables, the config loader checks every key against them, and the
// unit reads its values back through the typed getters. Unknown keys, wrong types and out-of-range
// values are errors that name the key as `scope.key` (e.g. "attack.badnets.per_batch").
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace bastion {

enum class ParamType { Integer, Real, Boolean, Text, TextList };

using ParamValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>>;

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::Real;
  ParamValue default_value;
  std::string doc;
  // Integer/Real: inclusive range. Text/TextList: allowed values (empty = any text).
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices = {};
};

class Params {
 public:
  Params() = default;
  // Validates `given` against `specs` and fills in defaults. An Integer given for a Real is widened; a
  // Real given for an Integer must be integral. Throws bastion::Error naming `scope.key` for an
  // unknown key (listing the valid ones), a wrong type, a value outside [min, max] or not in choices.
  Params(std::string scope, const std::vector<ParamSpec>& specs, const std::map<std::string, ParamValue>& given = {});

  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;  // Integer values are widened
  bool boolean(const std::string& name) const;
  const std::string& text(const std::string& name) const;
  const std::vector<std::string>& list(const std::string& name) const;

  const std::string& scope() const { return scope_; }
  const std::map<std::string, ParamValue>& values() const { return values_; }  // every key, defaults included

 private:
  std::string scope_;
  std::map<std::string, ParamValue> values_;
  const ParamValue& at(const std::string& name) const;
};

// "int", "real", "bool", "text", "list" for docs and `bastion list`.
const char* param_type_name(ParamType type);
// The value as TOML writes it: 3, 0.01, true, "spmc", ["badnets", "scale"]. Reals round-trip exactly
// (shortest representation that parses back to the same double).
std::string param_value_to_toml(const ParamValue& value);
// One line per parameter: "  name  type  default  [range|choices]  doc", for `bastion list`.
std::string describe_params(const std::vector<ParamSpec>& specs, const std::string& indent = "    ");
// The same table as Markdown, the form of docs/config.md's section tables: | key | type | default |
// range / choices | doc |, keys and defaults in backticks (`bastion list config --markdown`).
std::string describe_params_markdown(const std::vector<ParamSpec>& specs);
// The default as describe_params shows it (a Real default written as an int literal shows as a real).
std::string param_default_text(const ParamSpec& spec);

}  // namespace bastion
