#include "fl/reproduce/preset.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "fl/core/config.h"
#include "fl/core/toml_guard.h"
#include "fl/metrics/results.h"
#include "tensor/error.h"

namespace bastion {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "file:line: " for errors about a node.
std::string where(const std::string& path, const toml::node& node) {
  return path + ":" + std::to_string(node.source().begin.line) + ": ";
}

std::string required_text(const toml::table& table, const char* key, const std::string& path,
                          const std::string& scope) {
  const toml::node* node = table.get(key);
  BASTION_CHECK(node != nullptr, path, ":", table.source().begin.line, ": ", scope, " needs '", key, "'");
  BASTION_CHECK(node->is_string(), where(path, *node), scope, ".", key, ": expected text");
  return node->as_string()->get();
}

std::string optional_text(const toml::table& table, const char* key, const std::string& path) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return "";
  BASTION_CHECK(node->is_string(), where(path, *node), key, ": expected text");
  return node->as_string()->get();
}

double optional_number(const toml::table& table, const char* key, double fallback, const std::string& path) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return fallback;
  BASTION_CHECK(node->is_number(), where(path, *node), key, ": expected a number");
  return node->is_integer() ? static_cast<double>(node->as_integer()->get()) : node->as_floating_point()->get();
}

std::vector<std::string> text_list(const toml::table& table, const char* key, const std::string& path) {
  std::vector<std::string> items;
  const toml::node* node = table.get(key);
  if (node == nullptr) return items;
  BASTION_CHECK(node->is_array(), where(path, *node), key, ": expected a list of \"key=value\" texts");
  for (const toml::node& item : *node->as_array()) {
    BASTION_CHECK(item.is_string(), where(path, item), key, ": expected a list of \"key=value\" texts");
    const std::string text = item.as_string()->get();
    BASTION_CHECK(text.find('=') != std::string::npos, where(path, item), key, ": '", text, "' is not key=value");
    items.push_back(text);
  }
  return items;
}

void check_keys(const toml::table& table, const std::set<std::string>& known, const std::string& path,
                const std::string& scope) {
  for (const auto& [key, node] : table) {
    if (known.count(std::string(key.str()))) continue;
    std::string valid;
    for (const std::string& k : known) valid += (valid.empty() ? "" : ", ") + k;
    BASTION_FAIL(where(path, node), "unknown key '", key.str(), "' in ", scope, "; valid: ", valid);
  }
}

const toml::array& table_array(const toml::table& root, const char* key, const std::string& path) {
  const toml::node* node = root.get(key);
  BASTION_CHECK(node != nullptr && node->is_array_of_tables(), path, ": needs at least one [[", key, "]] table");
  return *node->as_array();
}

std::vector<PresetColumn> read_columns(const toml::table& root, const std::string& path) {
  std::vector<PresetColumn> columns;
  for (const toml::node& node : table_array(root, "columns", path)) {
    const toml::table& t = *node.as_table();
    check_keys(t, {"name", "metric", "scale", "tolerance", "set"}, path, "[[columns]]");
    PresetColumn column;
    column.name = required_text(t, "name", path, "[[columns]]");
    column.metric = required_text(t, "metric", path, "[[columns]]");
    const auto& metrics = preset_metrics();
    BASTION_CHECK(std::find(metrics.begin(), metrics.end(), column.metric) != metrics.end(), where(path, t), "column '",
                  column.name, "': unknown metric '", column.metric, "'");
    column.scale = optional_number(t, "scale", 100.0, path);
    column.tolerance = optional_number(t, "tolerance", 0.0, path);
    column.set = text_list(t, "set", path);
    columns.push_back(column);
  }
  return columns;
}

// [cost]: core_hours > 0 with the CPU it was measured on, the seeds it covers (1 to 100; default the
// preset's) and its basis; no table, no cost.
PresetCost read_cost(const toml::table& root, int64_t preset_seeds, const std::string& path) {
  PresetCost cost;
  const toml::node* node = root.get("cost");
  if (node == nullptr) return cost;
  BASTION_CHECK(node->is_table(), where(path, *node), "cost: expected a [cost] table");
  const toml::table& t = *node->as_table();
  check_keys(t, {"core_hours", "wall_hours", "seeds", "cpu", "basis", "date", "note"}, path, "[cost]");
  cost.core_hours = optional_number(t, "core_hours", 0.0, path);
  BASTION_CHECK(cost.core_hours > 0 && cost.core_hours < 1e6, path, ": [cost] core_hours must be in (0, 1e6), not ",
                cost.core_hours);
  cost.wall_hours = optional_number(t, "wall_hours", 0.0, path);
  BASTION_CHECK(cost.wall_hours >= 0 && cost.wall_hours < 1e6, path, ": [cost] wall_hours must be in [0, 1e6)");
  const double seeds = optional_number(t, "seeds", static_cast<double>(preset_seeds), path);
  BASTION_CHECK(seeds >= 1 && seeds <= 100 && seeds == std::trunc(seeds), path,
                ": [cost] seeds must be an integer in [1, 100]");
  cost.seeds = static_cast<int64_t>(seeds);
  cost.cpu = required_text(t, "cpu", path, "[cost]");
  cost.basis = optional_text(t, "basis", path);
  if (cost.basis.empty()) cost.basis = "measured";
  BASTION_CHECK(cost.basis == "measured" || cost.basis == "estimated", path, ": [cost] basis '", cost.basis,
                "': valid: measured, estimated");
  cost.date = optional_text(t, "date", path);
  cost.note = optional_text(t, "note", path);
  return cost;
}

std::vector<double> read_paper_numbers(const toml::table& row, size_t columns, const std::string& path,
                                       const std::string& name) {
  const toml::node* node = row.get("paper");
  BASTION_CHECK(node != nullptr, where(path, row), "row '", name,
                "' needs 'paper' (one number per column, \"-\" for none)");
  BASTION_CHECK(node->is_array(), where(path, *node), "row '", name, "': paper must be a list of numbers");
  const toml::array& numbers = *node->as_array();
  BASTION_CHECK(numbers.size() == columns, where(path, *node), "row '", name, "': paper has ", numbers.size(),
                " numbers for ", columns, " columns");
  std::vector<double> paper;
  for (const toml::node& item : numbers) {
    if (item.is_string() && item.as_string()->get() == "-") {
      paper.push_back(kNaN);
      continue;
    }
    BASTION_CHECK(item.is_number(), where(path, item), "row '", name, "': paper numbers must be numbers or \"-\"");
    paper.push_back(item.is_integer() ? static_cast<double>(item.as_integer()->get())
                                      : item.as_floating_point()->get());
  }
  return paper;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BASTION_CHECK(in.is_open(), "cannot open preset '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every cell's experiment must parse: a bad method, key or value fails here, naming the row's line.
void validate_cells(const Preset& preset, const PresetCellCheck& check_cell) {
  const PresetGrid grid = preset_grid(preset);
  for (size_t r = 0; r < preset.rows.size(); ++r) {
    for (size_t c = 0; c < preset.columns.size(); ++c) {
      std::vector<std::string> quick = grid.runs[grid.cell_run[r][c]].overrides;
      quick.insert(quick.end(), preset.quick.begin(), preset.quick.end());
      try {
        check_cell(preset.base, grid.runs[grid.cell_run[r][c]].overrides);
        check_cell(preset.base, quick);  // --quick must load too: it is checked now, not when first used
      } catch (const Error& e) {
        BASTION_FAIL(preset.path, ":", preset.rows[r].line, ": row '", preset.rows[r].name, "', column '",
                     preset.columns[c].name, "': ", e.what());
      }
    }
  }
}

}  // namespace

std::string results_folder_slug(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "cell" : out;
}

const std::vector<std::string>& preset_metrics() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"acc",      "asr",         "bfr",        "v",         "local_acc", "final_acc",
                                  "best_acc", "client_dacc", "client_fpr", "client_fnr"};  // per-client detection
    for (const char* figure : {"p_acc", "p_gacc", "p_asr", "p_racc"})
      for (const char* suffix : {"", "_w", "_min", "_med", "_max"}) n.push_back(std::string(figure) + suffix);
    n.push_back("p_tacc");  // FedCAP's TAcc: the better of p_acc_w and p_racc_w (fl/metrics/results.h)
    return n;
  }();
  return names;
}

Preset load_preset(const std::string& path) {
  return parse_preset(
      without_utf8_bom(read_file(path)), path,
      [](const std::string& base, const std::vector<std::string>& overrides) { load_config(base, overrides); });
}

Preset parse_preset(std::string_view text, const std::string& path, const PresetCellCheck& check_cell) {
  check_toml_text(text, path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    BASTION_FAIL(path, ":", e.source().begin.line, ":", e.source().begin.column, ": ", e.description());
  }
  static const std::set<std::string> known = {"title", "paper", "base",    "set", "seeds",
                                              "quick", "cost",  "columns", "rows"};
  for (const auto& [key, node] : root) {
    BASTION_CHECK(key.str() != "estimated_minutes", where(path, node),
                  "estimated_minutes was replaced by a [cost] table (core_hours, seeds, cpu, basis; docs/presets.md)");
    BASTION_CHECK(known.count(std::string(key.str())), where(path, node), "unknown preset key '", key.str(),
                  "'; valid: title, paper, base, set, seeds, quick, [cost], [[columns]], [[rows]]");
  }
  Preset preset;
  preset.path = path;
  preset.name = std::filesystem::path(path).stem().string();
  preset.title = required_text(root, "title", path, "the preset");
  preset.paper = optional_text(root, "paper", path);
  preset.base = (std::filesystem::path(path).parent_path() / required_text(root, "base", path, "the preset")).string();
  preset.set = text_list(root, "set", path);
  preset.quick = text_list(root, "quick", path);
  // Checked as a double: casting 1e300 (or NaN) to int64 first would be undefined behaviour.
  const double seeds = optional_number(root, "seeds", 3, path);
  BASTION_CHECK(seeds >= 1 && seeds <= 100 && seeds == std::trunc(seeds), path,
                ": seeds must be an integer in [1, 100]");
  preset.seeds = static_cast<int64_t>(seeds);
  preset.cost = read_cost(root, preset.seeds, path);
  preset.columns = read_columns(root, path);
  std::set<std::string> names;
  for (const toml::node& node : table_array(root, "rows", path)) {
    const toml::table& t = *node.as_table();
    check_keys(t, {"name", "set", "paper"}, path, "[[rows]]");
    PresetRow row;
    row.name = required_text(t, "name", path, "[[rows]]");
    BASTION_CHECK(names.insert(row.name).second, where(path, t), "row '", row.name, "' appears twice");
    // The row's results folder is its slug: two names with one slug would write into one folder.
    const std::string folder = results_folder_slug(row.name);
    const auto other = std::find_if(preset.rows.begin(), preset.rows.end(),
                                    [&](const PresetRow& r) { return results_folder_slug(r.name) == folder; });
    BASTION_CHECK(other == preset.rows.end(), where(path, t), "rows '", other->name, "' and '", row.name,
                  "' both get the results folder '", folder, "': rename one");
    row.set = text_list(t, "set", path);
    row.paper = read_paper_numbers(t, preset.columns.size(), path, row.name);
    row.line = t.source().begin.line;
    preset.rows.push_back(row);
  }
  validate_cells(preset, check_cell);
  return preset;
}

std::string preset_cost_text(const PresetCost& cost, int64_t seeds) {
  if (cost.core_hours <= 0) return "cost not measured";
  // fixed_text, not printf: a process locale that writes "4,5" must not change the listing.
  auto hours = [](double h) { return fixed_text(h, h < 10 ? 1 : 0); };
  std::string text =
      hours(cost.core_hours) + " core-hours for " + std::to_string(cost.seeds) + (cost.seeds == 1 ? " seed" : " seeds");
  if (seeds != cost.seeds)  // the grid's runs are alike across seeds: the cost scales with their number
    text += " (about " + hours(cost.core_hours * static_cast<double>(seeds) / static_cast<double>(cost.seeds)) +
            " for " + std::to_string(seeds) + ")";
  text += ", " + cost.basis + " on " + cost.cpu;
  if (!cost.date.empty()) text += ", " + cost.date;
  return text;
}

PresetGrid preset_grid(const Preset& preset, const std::vector<std::string>& extra) {
  PresetGrid grid;
  for (const PresetRow& row : preset.rows) {
    std::vector<size_t> runs_of_row;
    for (const PresetColumn& column : preset.columns) {
      std::vector<std::string> overrides = preset.set;
      overrides.insert(overrides.end(), row.set.begin(), row.set.end());
      overrides.insert(overrides.end(), column.set.begin(), column.set.end());
      overrides.insert(overrides.end(), extra.begin(), extra.end());
      const auto same = std::find_if(grid.runs.begin(), grid.runs.end(),
                                     [&](const PresetRun& run) { return run.overrides == overrides; });
      if (same != grid.runs.end()) {
        runs_of_row.push_back(static_cast<size_t>(same - grid.runs.begin()));
        continue;
      }
      const std::string row_folder = results_folder_slug(row.name);
      const std::string folder = column.set.empty() ? row_folder : row_folder + "--" + results_folder_slug(column.name);
      grid.runs.push_back({folder, overrides});
      runs_of_row.push_back(grid.runs.size() - 1);
    }
    grid.cell_run.push_back(runs_of_row);
  }
  return grid;
}

namespace {
// The rows `name` selects: the row of that name or slug; else the one row whose slug starts with
// "<name>-" (`--row fedavg` for "FedAvg (no defense)"). Two or more such rows are ambiguous.
std::vector<std::string> rows_named(const Preset& preset, const std::string& name) {
  for (const PresetRow& row : preset.rows)
    if (row.name == name || results_folder_slug(row.name) == name) return {row.name};
  std::vector<std::string> prefixed;
  for (const PresetRow& row : preset.rows)
    if (results_folder_slug(row.name).rfind(name + "-", 0) == 0) prefixed.push_back(row.name);
  return prefixed;
}
}  // namespace

Preset select_rows(const Preset& preset, const std::vector<std::string>& names) {
  std::string valid;
  for (const PresetRow& row : preset.rows) valid += "\n  '" + row.name + "' (" + results_folder_slug(row.name) + ")";
  std::vector<std::string> chosen;
  for (const std::string& name : names) {
    const std::vector<std::string> rows = rows_named(preset, name);
    BASTION_CHECK(!rows.empty(), preset.path, ": no row '", name, "'; the rows are:", valid);
    BASTION_CHECK(rows.size() == 1, preset.path, ": --row '", name, "' could be any of ", rows.size(),
                  " rows; give the name or slug of one:", valid);
    chosen.push_back(rows.front());
  }
  Preset out = preset;
  std::erase_if(out.rows, [&](const PresetRow& row) {
    return std::find(chosen.begin(), chosen.end(), row.name) == chosen.end();
  });
  return out;
}

std::vector<std::string> find_presets(const std::string& folder) {
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    if (entry.path().extension() != ".toml") continue;
    if (read_file(entry.path().string()).find("[[rows]]") != std::string::npos) paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace bastion
