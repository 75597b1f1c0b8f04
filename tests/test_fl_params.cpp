// Params (fl/base/params.h): defaults, type coercion (int -> real widening, integral real -> int),
// range / choices / unknown-key errors that name the dotted key, and the TOML spelling of values
// (reals must read back as the same double and still look like reals).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "fl/base/params.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<ParamSpec>& specs() {
  static const std::vector<ParamSpec> table = {
      {"steps", ParamType::Integer, int64_t{5}, "local steps", 0, 100, {}},
      {"lr", ParamType::Real, 0.01, "learning rate", 0, 10, {}},
      {"z", ParamType::Real, int64_t{0}, "a real with an int literal default", 0, 1, {}},
      {"nesterov", ParamType::Boolean, false, "Nesterov momentum", -kInf, kInf, {}},
      {"mode", ParamType::Text, std::string("shift"), "relabel mode", -kInf, kInf, {"shift", "reverse"}},
      {"any", ParamType::Text, std::string("x"), "free text", -kInf, kInf, {}},
      {"names", ParamType::TextList, std::vector<std::string>{"a"}, "a list", -kInf, kInf, {"a", "b", "c"}},
  };
  return table;
}

TEST(FlParams, DefaultsFillEveryKey) {
  const Params p("clients.sgd", specs());
  EXPECT_EQ(p.scope(), "clients.sgd");
  EXPECT_EQ(p.values().size(), specs().size());
  EXPECT_EQ(p.integer("steps"), 5);
  EXPECT_DOUBLE_EQ(p.real("lr"), 0.01);
  EXPECT_FALSE(p.boolean("nesterov"));
  EXPECT_EQ(p.text("mode"), "shift");
  EXPECT_EQ(p.list("names"), std::vector<std::string>{"a"});
  // An int literal default of a Real parameter is stored as a real.
  EXPECT_TRUE(std::holds_alternative<double>(p.values().at("z")));
}

TEST(FlParams, GivenValuesReplaceDefaults) {
  const Params p("s", specs(),
                 {{"steps", int64_t{7}},
                  {"mode", std::string("reverse")},
                  {"nesterov", true},
                  {"names", std::vector<std::string>{"b", "c"}}});
  EXPECT_EQ(p.integer("steps"), 7);
  EXPECT_EQ(p.text("mode"), "reverse");
  EXPECT_TRUE(p.boolean("nesterov"));
  EXPECT_EQ(p.list("names"), (std::vector<std::string>{"b", "c"}));
}

TEST(FlParams, IntegerIsWidenedToReal) {
  const Params p("s", specs(), {{"lr", int64_t{2}}});
  EXPECT_TRUE(std::holds_alternative<double>(p.values().at("lr")));
  EXPECT_EQ(p.real("lr"), 2.0);
  EXPECT_EQ(p.real("steps"), 5.0);  // the real getter also widens Integer parameters
}

TEST(FlParams, IntegralRealIsAcceptedForInteger) {
  const Params p("s", specs(), {{"steps", 3.0}});
  EXPECT_EQ(p.integer("steps"), 3);
  expect_error([] { Params("clients.sgd", specs(), {{"steps", 2.5}}); }, {"clients.sgd.steps", "2.5", "integral"});
}

// Integer bounds are compared exactly: the seed's bound 2^53 let 2^53 + 1 through as a double (issue 42
// item 10).
TEST(FlParams, IntegerBoundsAreExactBeyondDoublePrecision) {
  const std::vector<ParamSpec> seed = {{"seed", ParamType::Integer, int64_t{1}, "seed", 0, 9007199254740992.0, {}}};
  EXPECT_EQ(Params("s", seed, {{"seed", int64_t{9007199254740992}}}).integer("seed"), int64_t{9007199254740992});
  expect_error(
      [&] {
        Params("s", seed, {{"seed", int64_t{9007199254740993}}});
      },
      {"s.seed", "9007199254740993", "outside"});
}

TEST(FlParams, NonFiniteNumbersAreRejected) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { Params("s", specs(), {{"lr", nan}}); }, {"s.lr", "nan"});
  expect_error([] { Params("s", specs(), {{"lr", kInf}}); }, {"s.lr", "inf"});
  expect_error([] { Params("s", specs(), {{"steps", -kInf}}); }, {"s.steps", "-inf"});
}

TEST(FlParams, WrongTypeNamesKeyAndValue) {
  expect_error(
      [] {
        Params("attack.scale", specs(), {{"nesterov", int64_t{1}}});
      },
      {"attack.scale.nesterov", "bool", "1"});
  expect_error([] { Params("s", specs(), {{"mode", int64_t{3}}}); }, {"s.mode", "text"});
  expect_error([] { Params("s", specs(), {{"lr", std::string("fast")}}); }, {"s.lr", "\"fast\""});
  expect_error([] { Params("s", specs(), {{"names", int64_t{2}}}); }, {"s.names", "list"});
}

// `--set attack.names=lie` (and --grid) give one text where a list is expected: it is the list of one,
// still checked against the choices.
TEST(FlParams, OneTextIsAListOfOne) {
  EXPECT_EQ(Params("s", specs(), {{"names", std::string("b")}}).list("names"), std::vector<std::string>{"b"});
  expect_error([] { Params("s", specs(), {{"names", std::string("zz")}}); }, {"s.names", "zz"});
}

TEST(FlParams, RangeErrorNamesKeyValueAndBounds) {
  expect_error(
      [] {
        Params("attack.badnets", specs(), {{"steps", int64_t{-1}}});
      },
      {"attack.badnets.steps", "-1", "[0, 100]"});
  expect_error([] { Params("s", specs(), {{"lr", 10.5}}); }, {"s.lr", "10.5", "[0, 10]"});
  // Bounds are inclusive.
  EXPECT_EQ(Params("s", specs(), {{"steps", int64_t{100}}}).integer("steps"), 100);
}

TEST(FlParams, ChoicesErrorListsChoices) {
  expect_error(
      [] {
        Params("attack.label-flip", specs(), {{"mode", std::string("sideways")}});
      },
      {"attack.label-flip.mode", "sideways", "shift, reverse"});
  // Every list element is checked.
  expect_error([] { Params("s", specs(), {{"names", std::vector<std::string>{"a", "zz"}}}); }, {"s.names", "zz"});
  EXPECT_EQ(Params("s", specs(), {{"any", std::string("whatever")}}).text("any"), "whatever");
}

TEST(FlParams, UnknownKeyListsValidKeys) {
  expect_error(
      [] {
        Params("server.fedavg", specs(), {{"learning_rate", 0.1}});
      },
      {"server.fedavg.learning_rate", "steps, lr, z, nesterov, mode, any, names"});
  // Top-level scope: the key is not prefixed with a dot.
  try {
    Params("", specs(), {{"sed", int64_t{1}}});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'sed'"), std::string::npos) << e.what();
  }
}

TEST(FlParams, GetterOfWrongTypeOrMissingNameFails) {
  const Params p("s", specs());
  expect_error([&] { p.integer("lr"); }, {"s.lr"});
  expect_error([&] { p.text("nope"); }, {"s.nope"});
}

// Reads a written real back as strtod does (toml++ is only included by config.cpp; the TOML round trip
// of whole configs is tested in test_fl_config.cpp). A TOML float needs a '.' or an exponent, or it
// would read back as an integer.
double read_real(const std::string& text) {
  EXPECT_NE(text.find_first_of(".e"), std::string::npos) << text << " would read as a TOML integer";
  return std::strtod(text.c_str(), nullptr);
}

TEST(FlParams, RealsRoundTripThroughToml) {
  EXPECT_EQ(param_value_to_toml(0.1), "0.1");
  EXPECT_EQ(param_value_to_toml(1e-05), "1e-05");
  EXPECT_EQ(param_value_to_toml(3.0), "3.0");
  EXPECT_EQ(param_value_to_toml(0.0), "0.0");
  EXPECT_EQ(param_value_to_toml(-2.0), "-2.0");
  for (const double v : {0.1, 1e-05, 3.0, 0.0, -2.0, 1.0 / 3.0, 123456789012.0, 1e20, 2.5e-300, 0.999999}) {
    EXPECT_EQ(read_real(param_value_to_toml(v)), v) << param_value_to_toml(v);
  }
}

TEST(FlParams, OtherValuesAsToml) {
  EXPECT_EQ(param_value_to_toml(int64_t{-3}), "-3");
  EXPECT_EQ(param_value_to_toml(true), "true");
  EXPECT_EQ(param_value_to_toml(std::string("spmc")), "\"spmc\"");
  EXPECT_EQ(param_value_to_toml(std::vector<std::string>{}), "[]");
  EXPECT_EQ(param_value_to_toml(std::vector<std::string>{"badnets", "scale"}), "[\"badnets\", \"scale\"]");
  const std::string written = param_value_to_toml(std::string("a \"quoted\" back\\slash\ttab\nline\x01"));
  EXPECT_EQ(written, "\"a \\\"quoted\\\" back\\\\slash\\ttab\\nline\\u0001\"");
}

TEST(FlParams, DescribeAlignsOneLinePerParam) {
  const std::string text = describe_params(specs(), "  ");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), static_cast<long>(specs().size()));
  EXPECT_NE(text.find("  steps "), std::string::npos) << text;
  EXPECT_NE(text.find("[0, 100]"), std::string::npos) << text;
  EXPECT_NE(text.find("one of: shift, reverse"), std::string::npos) << text;
  EXPECT_NE(text.find("0.0 "), std::string::npos) << text;  // z's int literal default shown as a real
  EXPECT_NE(text.find("learning rate"), std::string::npos) << text;
  // Aligned: every doc column starts at the same offset.
  std::vector<size_t> doc_columns;
  size_t line_start = 0;
  for (const ParamSpec& spec : specs()) {
    const size_t line_end = text.find('\n', line_start);
    doc_columns.push_back(text.find(spec.doc, line_start) - line_start);
    line_start = line_end + 1;
  }
  for (const size_t column : doc_columns) EXPECT_EQ(column, doc_columns.front()) << text;
  EXPECT_STREQ(param_type_name(ParamType::TextList), "list");
}

}  // namespace
}  // namespace bastion
