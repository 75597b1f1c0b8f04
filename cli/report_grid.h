// `bastion report` of a defense grid folder: RULE/ATTACK/ run folders (scripts/defense_grid.sh), drawn as
// heatmaps with worst-case columns and a ranking (cli/report_grid.cpp).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace bastion::cli {

struct GridFolderCell {
  std::string rule, attack;
  std::filesystem::path dir;
};

// The cells of a grid folder: every DIR/RULE/ATTACK/ that holds a summary.json, a config.toml or a
// failed run's log.txt. Empty when DIR is not a grid (a run or reproduce folder, or no summary.json at all).
std::vector<GridFolderCell> grid_folder_cells(const std::filesystem::path& dir);

struct GridReport {
  std::string html;           // the whole page
  std::string accuracy_svg;   // the accuracy heatmap (also inline in the page)
  std::string success_svg;    // the attack-success heatmap, "" when no cell measured asr
  std::string detection_svg;  // the detection heatmap of the rules that flag uploads, "" when none does
};

GridReport grid_report(const std::filesystem::path& dir, const std::vector<GridFolderCell>& cells);

}  // namespace bastion::cli
