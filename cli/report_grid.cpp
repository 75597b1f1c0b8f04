// `bastion report` of a defense grid folder (scripts/defense_grid.sh: RULE/ATTACK/summary.json): heatmaps
// of every rule against every attack, ByzFL-style, each with a worst-case column, and a ranking by the
// worst case. Accuracy: the reported `acc` of each cell (summary.json "mean"); the worst case is the
// lowest accuracy over the attacks (the "none" column is not an attack). Attack success: the cells whose
// run measured `asr` (backdoors); the worst case is the highest. Detection: the per-upload detection
// accuracy (summary.json runs[].detection.dacc, mean over seeds) of the rules that flag uploads. A cell
// whose summary.json is missing or damaged is drawn grey and named under the maps, and the rest renders.
#include "cli/report_grid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "cli/report_page.h"
#include "fl/metrics/heatmap.h"
#include "fl/metrics/results.h"
#include "fl/registry.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion::cli {

namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kNoAttack = "none";

struct GridCell {
  double acc = kNaN, asr = kNaN, dacc = kNaN;
  std::string problem;  // why the cell has no values (the file and the error), or ""
};

struct Grid {
  std::vector<std::string> rules, attacks;
  std::map<std::pair<std::string, std::string>, GridCell> cells;  // (rule, attack)
};

double summary_mean(const nlohmann::json& summary, const char* key) {
  const nlohmann::json mean = summary.value("mean", nlohmann::json::object());
  const nlohmann::json value = mean.value(key, nlohmann::json());
  return value.is_number() ? value.get<double>() : kNaN;
}

// The mean over the seeds' runs[].detection.dacc that are numbers; NaN for a rule that never flags.
double detection_accuracy(const nlohmann::json& summary) {
  double sum = 0.0;
  int64_t count = 0;
  for (const auto& run : summary.value("runs", nlohmann::json::array())) {
    const nlohmann::json value = run.value("detection", nlohmann::json::object()).value("dacc", nlohmann::json());
    if (value.is_number()) sum += value.get<double>(), ++count;
  }
  return count > 0 ? sum / static_cast<double>(count) : kNaN;
}

GridCell read_cell(const fs::path& dir) {
  GridCell cell;
  try {
    const nlohmann::json summary = read_summary(dir);
    cell.acc = summary_mean(summary, "acc");
    cell.asr = summary_mean(summary, "asr");
    cell.dacc = detection_accuracy(summary);
  } catch (const std::exception& e) {
    cell.problem = without_source_locations(e.what());
    if (fs::exists(dir / "log.txt")) cell.problem += " (the run's log: " + (dir / "log.txt").string() + ")";
  }
  return cell;
}

// Attacks in the registry's order with "none" first; names the registry does not know, alphabetically after.
std::vector<std::string> ordered_attacks(const std::vector<std::string>& found) {
  std::vector<std::string> order = {kNoAttack};
  for (const auto& entry : attack_registry()) order.push_back(entry.info.name);
  std::vector<std::string> attacks;
  for (const std::string& name : order)
    if (std::find(found.begin(), found.end(), name) != found.end()) attacks.push_back(name);
  std::vector<std::string> unknown;
  for (const std::string& name : found)
    if (std::find(order.begin(), order.end(), name) == order.end()) unknown.push_back(name);
  std::sort(unknown.begin(), unknown.end());
  attacks.insert(attacks.end(), unknown.begin(), unknown.end());
  return attacks;
}

Grid read_grid(const std::vector<GridFolderCell>& folders) {
  Grid grid;
  std::vector<std::string> attacks;
  for (const GridFolderCell& folder : folders) {
    if (std::find(grid.rules.begin(), grid.rules.end(), folder.rule) == grid.rules.end())
      grid.rules.push_back(folder.rule);
    if (std::find(attacks.begin(), attacks.end(), folder.attack) == attacks.end()) attacks.push_back(folder.attack);
    grid.cells[{folder.rule, folder.attack}] = read_cell(folder.dir);
  }
  grid.attacks = ordered_attacks(attacks);
  return grid;
}

const GridCell& cell_at(const Grid& grid, const std::string& rule, const std::string& attack) {
  static const GridCell kMissing{kNaN, kNaN, kNaN, "no run folder"};
  const auto found = grid.cells.find({rule, attack});
  return found == grid.cells.end() ? kMissing : found->second;
}

// The lowest accuracy over the attacks (every column when "none" is the only one); NaN when none measured.
double worst_accuracy(const Grid& grid, const std::string& rule, std::string* attack = nullptr) {
  double worst = kNaN;
  for (const std::string& a : grid.attacks) {
    if (a == kNoAttack && grid.attacks.size() > 1) continue;
    const double acc = cell_at(grid, rule, a).acc;
    if (!std::isnan(acc) && (std::isnan(worst) || acc < worst)) {
      worst = acc;
      if (attack != nullptr) *attack = a;
    }
  }
  return worst;
}

// The highest attack success rate over the attacks that measured it; NaN when none did.
double highest_success(const Grid& grid, const std::string& rule) {
  double worst = kNaN;
  for (const std::string& a : grid.attacks) {
    const double asr = cell_at(grid, rule, a).asr;
    if (!std::isnan(asr) && (std::isnan(worst) || asr > worst)) worst = asr;
  }
  return worst;
}

// Rules by worst-case accuracy, best first; rules without any value last; ties by name.
std::vector<std::string> ranked_rules(const Grid& grid) {
  std::vector<std::string> rules = grid.rules;
  std::map<std::string, double> worst;
  for (const std::string& rule : rules) worst[rule] = worst_accuracy(grid, rule);
  std::sort(rules.begin(), rules.end(), [&](const std::string& a, const std::string& b) {
    const double wa = worst.at(a), wb = worst.at(b);
    if (std::isnan(wa) != std::isnan(wb)) return std::isnan(wb);
    if (!std::isnan(wa) && wa != wb) return wa > wb;
    return a < b;
  });
  return rules;
}

std::vector<std::string> backdoor_attacks(const Grid& grid) {
  std::vector<std::string> attacks;
  for (const std::string& a : grid.attacks)
    for (const std::string& r : grid.rules)
      if (!std::isnan(cell_at(grid, r, a).asr)) {
        attacks.push_back(a);
        break;
      }
  return attacks;
}

Heatmap accuracy_map(const Grid& grid, const std::vector<std::string>& rules, const std::string& title) {
  Heatmap map{title + ": accuracy (%)", rules, grid.attacks, {}, false, grid.attacks.size()};
  map.columns.push_back("worst case");
  for (const std::string& rule : rules) {
    std::vector<double> row;
    for (const std::string& attack : grid.attacks) row.push_back(cell_at(grid, rule, attack).acc);
    row.push_back(worst_accuracy(grid, rule));
    map.values.push_back(row);
  }
  return map;
}

Heatmap success_map(const Grid& grid, const std::vector<std::string>& rules, const std::vector<std::string>& attacks,
                    const std::string& title) {
  Heatmap map{title + ": attack success rate (%)", rules, attacks, {}, true, attacks.size() > 1 ? attacks.size() : 0};
  if (attacks.size() > 1) map.columns.push_back("worst case");
  for (const std::string& rule : rules) {
    std::vector<double> row;
    for (const std::string& attack : attacks) row.push_back(cell_at(grid, rule, attack).asr);
    if (attacks.size() > 1) row.push_back(highest_success(grid, rule));
    map.values.push_back(row);
  }
  return map;
}

// The rules that flagged uploads in some cell, in `rules`' order, and their detection accuracy per attack.
Heatmap detection_map(const Grid& grid, const std::vector<std::string>& rules, const std::string& title) {
  Heatmap map{title + ": detection accuracy per upload (%)", {}, grid.attacks, {}, false, 0};
  for (const std::string& rule : rules) {
    std::vector<double> row;
    bool flags = false;
    for (const std::string& attack : grid.attacks) {
      row.push_back(cell_at(grid, rule, attack).dacc);
      flags = flags || !std::isnan(row.back());
    }
    if (!flags) continue;
    map.rows.push_back(rule);
    map.values.push_back(row);
  }
  return map;
}

std::string ranking_section(const Grid& grid, const std::vector<std::string>& rules,
                            const std::vector<std::string>& backdoors) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < rules.size(); ++i) {
    std::string attack = "-";
    const double worst = worst_accuracy(grid, rules[i], &attack);
    double sum = 0.0;
    int64_t count = 0;
    for (const std::string& a : grid.attacks) {
      const double acc = cell_at(grid, rules[i], a).acc;
      if (a != kNoAttack && !std::isnan(acc)) sum += acc, ++count;
    }
    rows.push_back({std::to_string(i + 1), rules[i], number_text(100.0 * worst, 1), std::isnan(worst) ? "-" : attack,
                    number_text(count > 0 ? 100.0 * sum / static_cast<double>(count) : kNaN, 1),
                    number_text(100.0 * cell_at(grid, rules[i], kNoAttack).acc, 1),
                    backdoors.empty() ? "-" : number_text(100.0 * highest_success(grid, rules[i]), 1)});
  }
  return table({"rank", "rule", "worst-case acc (%)", "worst attack", "mean acc over attacks (%)", "acc, no attack (%)",
                "worst ASR (%)"},
               rows);
}

std::string problems_section(const Grid& grid) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& rule : grid.rules)
    for (const std::string& attack : grid.attacks) {
      const GridCell& cell = cell_at(grid, rule, attack);
      if (!cell.problem.empty()) rows.push_back({rule, attack, cell.problem});
    }
  if (rows.empty()) return "<p>Every cell has its summary.json.</p>";
  return "<p class=\"missing\">" + std::to_string(rows.size()) + " cell(s) drawn grey:</p>" +
         table({"rule", "attack", "why"}, rows);
}

}  // namespace

std::vector<GridFolderCell> grid_folder_cells(const fs::path& dir) {
  std::vector<GridFolderCell> cells;
  if (fs::exists(dir / "config.toml") || fs::exists(dir / "rounds.csv") || fs::exists(dir / "table.csv")) return cells;
  bool any_summary = false;
  for (const auto& rule : fs::directory_iterator(dir)) {
    if (!rule.is_directory()) continue;
    for (const auto& attack : fs::directory_iterator(rule.path())) {
      if (!attack.is_directory()) continue;
      const bool summary = fs::exists(attack.path() / "summary.json");
      if (!summary && !fs::exists(attack.path() / "log.txt") && !fs::exists(attack.path() / "config.toml")) continue;
      any_summary = any_summary || summary;
      cells.push_back({rule.path().filename().string(), attack.path().filename().string(), attack.path()});
    }
  }
  if (!any_summary) cells.clear();
  std::sort(cells.begin(), cells.end(), [](const GridFolderCell& a, const GridFolderCell& b) { return a.dir < b.dir; });
  return cells;
}

GridReport grid_report(const fs::path& dir, const std::vector<GridFolderCell>& cells) {
  const Grid grid = read_grid(cells);
  const std::vector<std::string> rules = ranked_rules(grid), backdoors = backdoor_attacks(grid);
  const std::string name = fs::weakly_canonical(dir).filename().string();
  GridReport report;
  report.accuracy_svg = heatmap_svg(accuracy_map(grid, rules, name));
  if (!backdoors.empty()) report.success_svg = heatmap_svg(success_map(grid, rules, backdoors, name));
  const Heatmap detection = detection_map(grid, rules, name);
  if (!detection.rows.empty()) report.detection_svg = heatmap_svg(detection);
  std::string html = page_head(name) + "<h1>Defense grid " + xml_escape(name) + "</h1>\n<p>Folder: <code>" +
                     xml_escape(dir.string()) + "</code>; " + std::to_string(grid.rules.size()) + " rules × " +
                     std::to_string(grid.attacks.size()) + " attacks, " + std::to_string(cells.size()) +
                     " runs. Rules are ranked by their worst-case accuracy over the attacks. Made by <code>bastion "
                     "report</code>.</p>\n";
  html += section("accuracy", "Accuracy", [&] { return without_xml_declaration(report.accuracy_svg); });
  if (!backdoors.empty())
    html += section("success", "Attack success rate", [&] { return without_xml_declaration(report.success_svg); });
  if (!detection.rows.empty())
    html += section("detection", "Detection (rules that flag uploads)", [&] {
      return "<p>Correctly judged uploads / all uploads over every round (in the \"none\" column every flag is a "
             "false positive).</p>" +
             without_xml_declaration(report.detection_svg);
    });
  html += section("ranking", "Ranking", [&] { return ranking_section(grid, rules, backdoors); });
  html += section("cells", "Cells without values", [&] { return problems_section(grid); });
  html += section("settings", "Settings of one cell (" + cells.front().rule + " / " + cells.front().attack + ")",
                  [&] { return settings_section(cells.front().dir); });
  report.html = html + "</body></html>\n";
  return report;
}

}  // namespace bastion::cli
