#include "fl/reproduce/preset_sweep.h"

#include <toml++/toml.h>

#include <cctype>
#include <filesystem>
#include <sstream>

#include "tensor/error.h"

namespace bastion {

namespace {

constexpr size_t kMaxSweepRuns = 1000;  // a typo like --grid seed=1,...,10000 should not queue days of runs

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Splits on the commas outside brackets, braces and double quotes.
std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> parts(1);
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '\\' && i + 1 < text.size()) {
      parts.back() += c;
      parts.back() += text[++i];
      continue;
    }
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '[' || c == '{')) ++depth;
    if (!quoted && (c == ']' || c == '}')) --depth;
    if (c == ',' && depth == 0 && !quoted) {
      parts.emplace_back();
      continue;
    }
    parts.back() += c;
  }
  return parts;
}

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

toml::array text_array(const std::vector<std::string>& texts) {
  toml::array array;
  for (const std::string& text : texts) array.push_back(text);
  return array;
}

// Every combination of the axes' values, the first axis varying slowest: one list of "KEY=VALUE" and one
// list of the values per combination.
void combinations(const std::vector<SweepAxis>& axes, std::vector<std::vector<std::string>>& sets,
                  std::vector<std::vector<std::string>>& values) {
  sets.assign(1, {});
  values.assign(1, {});
  for (const SweepAxis& axis : axes) {
    std::vector<std::vector<std::string>> next_sets, next_values;
    for (size_t i = 0; i < sets.size(); ++i) {
      for (const std::string& value : axis.values) {
        next_sets.push_back(sets[i]);
        next_sets.back().push_back(axis.key + "=" + value);
        next_values.push_back(values[i]);
        next_values.back().push_back(value);
      }
    }
    sets = std::move(next_sets);
    values = std::move(next_values);
  }
}

toml::array sweep_columns(const std::vector<SweepAxis>& axes, const std::vector<std::string>& metrics) {
  toml::array columns;
  auto add = [&](const std::string& name, const std::string& metric, const std::vector<std::string>& set) {
    columns.push_back(toml::table{{"name", name}, {"metric", metric}, {"set", text_array(set)}});
  };
  if (axes.size() == 1) {
    for (const std::string& metric : metrics) add(metric, metric, {});
    return columns;
  }
  const SweepAxis& last = axes.back();
  for (const std::string& value : last.values)
    for (const std::string& metric : metrics)
      add(metrics.size() == 1 ? value : value + " " + metric, metric, {last.key + "=" + value});
  return columns;
}

// The generated preset exists only in memory: its "path:line: " would point the user to no file.
std::string without_location(const std::string& message, const std::string& path) {
  if (message.rfind(path + ":", 0) != 0) return message;
  size_t end = path.size() + 1;
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  return message.compare(end, 2, ": ") == 0 ? message.substr(end + 2) : message;
}

}  // namespace

SweepAxis parse_sweep_axis(const std::string& text) {
  const size_t equals = text.find('=');
  BASTION_CHECK(equals != std::string::npos, "--grid '", text,
                "': expected KEY=VALUE1,VALUE2,... (e.g. --grid server.rule=fedavg,krum)");
  SweepAxis axis;
  axis.key = trimmed(text.substr(0, equals));
  BASTION_CHECK(!axis.key.empty(), "--grid '", text, "': the key before '=' is empty");
  for (const std::string& part : split_top_level(text.substr(equals + 1))) {
    const std::string value = trimmed(part);
    BASTION_CHECK(!value.empty(), "--grid '", text, "': an empty value (two commas in a row, or one at an end)");
    axis.values.push_back(value);
  }
  return axis;
}

Preset sweep_preset(const std::string& base_path, const std::vector<SweepAxis>& axes,
                    const std::vector<std::string>& metrics, const PresetCellCheck& check_cell) {
  BASTION_CHECK(!axes.empty(), "a sweep needs at least one --grid KEY=VALUE1,VALUE2,...");
  BASTION_CHECK(!metrics.empty(), "a sweep needs at least one metric");
  const std::filesystem::path base(base_path);
  const std::vector<SweepAxis> row_axes(axes.begin(), axes.end() - (axes.size() > 1 ? 1 : 0));
  std::vector<std::vector<std::string>> row_sets, row_values;
  combinations(row_axes, row_sets, row_values);
  const toml::array columns = sweep_columns(axes, metrics);
  const size_t runs = row_sets.size() * (axes.size() > 1 ? axes.back().values.size() : 1);
  BASTION_CHECK(runs <= kMaxSweepRuns, "the sweep has ", runs, " runs per seed, more than ", kMaxSweepRuns,
                ": split it into several sweeps");
  toml::array rows;
  for (size_t r = 0; r < row_sets.size(); ++r) {
    toml::array paper;
    for (size_t c = 0; c < columns.size(); ++c) paper.push_back("-");
    rows.push_back(
        toml::table{{"name", joined(row_values[r], ", ")}, {"set", text_array(row_sets[r])}, {"paper", paper}});
  }
  std::vector<std::string> keys;
  for (const SweepAxis& axis : axes) keys.push_back(axis.key);
  const std::string rows_by = joined(std::vector<std::string>(keys.begin(), keys.begin() + row_axes.size()), " x ");
  std::string title = "Sweep on " + base.filename().string() + ": rows " + rows_by;
  if (axes.size() > 1) title += ", columns " + axes.back().key;
  const toml::table root{
      {"title", title}, {"base", base.filename().string()}, {"seeds", 1}, {"columns", columns}, {"rows", rows}};
  std::ostringstream text;
  text << root;
  // The preset's path only names it (results/reproduce/<stem>-sweep) and resolves the base beside it.
  const std::string path = (base.parent_path() / (base.stem().string() + "-sweep.toml")).string();
  try {
    return parse_preset(text.str(), path, check_cell);
  } catch (const Error& e) {
    BASTION_FAIL("the --grid sweep on ", base_path, ": ", without_location(e.what(), path));
  }
}

}  // namespace bastion
