// heatmap_svg: a rule x attack grid as coloured cells with their values (bastion report of a defense grid,
// docs/defenses.md). Values are fractions in [0, 1], printed in percent with one decimal; NaN is a cell
// that has no value ("–", grey). Colours follow viridis (dark purple = 0 % -> yellow = 100 %), which reads
// the same to colour-blind readers and in grey print; with lower_is_better (an attack's success rate) the
// scale is reversed, so yellow is always the good end. Columns after `separated_from` (e.g. a worst-case
// column) stand apart by a gap. Self-contained SVG 1.1, white background.
#pragma once

#include <string>
#include <vector>

namespace bastion {

struct Heatmap {
  std::string title;
  std::vector<std::string> rows, columns;
  std::vector<std::vector<double>> values;  // rows.size() x columns.size(), fractions or NaN
  bool lower_is_better = false;
  size_t separated_from = 0;  // columns from this index on are drawn after a gap (0 = none)
};

std::string heatmap_svg(const Heatmap& map);

// The viridis colour at t in [0, 1] ("#rrggbb"), and whether text on it should be dark.
std::string viridis_color(double t);
bool viridis_is_light(double t);

}  // namespace bastion
