// The docs' hand-kept tables against the code they describe (issue 37, docs from code): the config
// section tables of docs/config.md (every key, its type and default; the doc column may say more than
// the code's one line), and the unit names of fl/README.md and fl/attacks/README.md (every registered
// unit has its row, and no row names a unit that does not exist). `bastion list config --markdown` and
// `bastion list defenses --markdown` print what to paste when one fails.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fl/core/config.h"
#include "fl/registry.h"

namespace bastion {
namespace {

std::vector<std::string> lines_of(const std::string& relative) {
  std::ifstream in(std::string(BASTION_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << relative;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The cells of a Markdown table row, trimmed ("| a | b |" -> {"a", "b"}); escaped pipes stay in a cell.
std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '|' && row[i - 1] != '\\') {
      const size_t begin = cell.find_first_not_of(' '), end = cell.find_last_not_of(' ');
      cells.push_back(begin == std::string::npos ? "" : cell.substr(begin, end - begin + 1));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

std::string unquoted(const std::string& cell) {
  return cell.size() >= 2 && cell.front() == '`' && cell.back() == '`' ? cell.substr(1, cell.size() - 2) : cell;
}

// docs/config.md "## Sections": section name ("" for top level) -> key -> {type, default}.
std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> documented_sections() {
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> out;
  bool inside = false;
  std::string section;
  for (const std::string& line : lines_of("docs/config.md")) {
    if (line.rfind("## ", 0) == 0) inside = line == "## Sections";
    if (!inside) continue;
    if (line == "### Top level")
      section = "";
    else if (line.rfind("### [", 0) == 0)
      section = line.substr(5, line.size() - 6);
    if (line.rfind("| `", 0) != 0) continue;
    const std::vector<std::string> cells = cells_of(line);
    if (cells.size() >= 3) out[section][unquoted(cells[0])] = {cells[1], unquoted(cells[2])};
  }
  return out;
}

TEST(DocsFromCode, ConfigSectionTablesHaveEveryKeyWithItsTypeAndDefault) {
  const auto documented = documented_sections();
  std::set<std::string> code_sections;
  for (const auto& [section, specs] : config_sections()) {
    code_sections.insert(section);
    const auto found = documented.find(section);
    ASSERT_NE(found, documented.end()) << "docs/config.md has no table for [" << section << "]";
    std::set<std::string> keys;
    for (const ParamSpec& spec : specs) {
      keys.insert(spec.name);
      const auto row = found->second.find(spec.name);
      ASSERT_NE(row, found->second.end()) << "docs/config.md [" << section << "] lacks " << spec.name;
      EXPECT_EQ(row->second.first, param_type_name(spec.type)) << section << "." << spec.name;
      EXPECT_EQ(row->second.second, param_default_text(spec)) << section << "." << spec.name;
    }
    for (const auto& [key, row] : found->second)
      EXPECT_TRUE(keys.count(key)) << "docs/config.md [" << section << "] documents " << key << ", not in the code";
  }
  for (const auto& [section, rows] : documented)
    EXPECT_TRUE(code_sections.count(section))
        << "docs/config.md documents a section [" << section << "] the code lacks";
}

// The names in column `column` of the rows of `file` whose cells pass `row_is_unit`.
template <typename Predicate>
std::set<std::string> documented_names(const std::string& file, size_t column, Predicate row_is_unit) {
  std::set<std::string> names;
  for (const std::string& line : lines_of(file)) {
    if (line.rfind("| ", 0) != 0) continue;
    const std::vector<std::string> cells = cells_of(line);
    if (cells.size() <= column || !row_is_unit(cells)) continue;
    std::istringstream listed(cells[column]);  // one row may name several units: "`fedsam`, `mofedsam`"
    for (std::string name; std::getline(listed, name, ',');) {
      name.erase(0, name.find_first_not_of(' '));
      names.insert(unquoted(name));
    }
  }
  return names;
}

template <typename Entry>
std::set<std::string> registered(const std::vector<Entry>& table) {
  std::set<std::string> names;
  for (const Entry& entry : table) names.insert(entry.info.name);
  return names;
}

bool quoted(const std::string& cell) { return cell.size() > 2 && cell.front() == '`' && cell.back() == '`'; }

TEST(DocsFromCode, UnitTablesNameEveryRegisteredUnit) {
  EXPECT_EQ(documented_names("fl/README.md", 1, [](const auto& c) { return c[0] == "client rule"; }),
            registered(client_rule_registry()));
  // The server-rule table: rows whose first cell is a quoted name.
  EXPECT_EQ(documented_names("fl/README.md", 0, [](const auto& c) { return quoted(c[0]); }),
            registered(server_rule_registry()));
  EXPECT_EQ(documented_names("fl/attacks/README.md", 0, [](const auto& c) { return quoted(c[0]); }),
            registered(attack_registry()));
}

}  // namespace
}  // namespace bastion
