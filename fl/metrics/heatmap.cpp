// heatmap_svg: see heatmap.h. Layout: the title, column labels (rotated when long) above, row labels
// left, one 62 x 22 px cell per value with its percentage centred, and a colour key below.
#include "fl/metrics/heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "fl/metrics/results.h"  // xml_escape, fixed_text
#include "tensor/error.h"

namespace bastion {

namespace {

constexpr double kCellWidth = 62, kCellHeight = 22, kGap = 12, kTitleHeight = 34, kKeyHeight = 44;
constexpr double kCharWidth = 6.6;  // Helvetica 12 px, a wide average: labels must never overlap cells

// Five stops of matplotlib's viridis, interpolated linearly (close enough for cells that print their value).
constexpr double kViridis[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};

// One decimal: the cells' percentages, and a tenth of a pixel for coordinates.
std::string number(double value) { return fixed_text(value, 1); }

double label_width(const std::vector<std::string>& labels) {
  size_t longest = 0;
  for (const std::string& label : labels) longest = std::max(longest, label.size());
  return static_cast<double>(longest) * kCharWidth;
}

double cell_x(const Heatmap& map, double left, size_t column) {
  const bool apart = map.separated_from > 0 && column >= map.separated_from;
  return left + static_cast<double>(column) * kCellWidth + (apart ? kGap : 0.0);
}

void append_cell(std::string& out, const Heatmap& map, double x, double y, double value, const std::string& tip) {
  const bool missing = std::isnan(value);
  const double t = map.lower_is_better ? 1.0 - value : value;
  const std::string fill = missing ? "#dddddd" : viridis_color(t);
  out += "<g><title>" + xml_escape(tip) + "</title><rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" +
         number(kCellWidth - 1) + "\" height=\"" + number(kCellHeight - 1) + "\" fill=\"" + fill + "\"/>";
  out += "<text x=\"" + number(x + kCellWidth / 2) + "\" y=\"" + number(y + kCellHeight / 2) +
         "\" dy=\"0.35em\" text-anchor=\"middle\" fill=\"" + (missing || viridis_is_light(t) ? "#111111" : "#ffffff") +
         "\">" + (missing ? "–" : number(100.0 * value)) + "</text></g>\n";
}

void append_key(std::string& out, const Heatmap& map, double left, double y) {
  constexpr int kSteps = 10;
  for (int i = 0; i <= kSteps; ++i) {
    const double value = static_cast<double>(i) / kSteps;
    const double t = map.lower_is_better ? 1.0 - value : value;
    out += "<rect x=\"" + number(left + i * 24.0) + "\" y=\"" + number(y) + "\" width=\"24\" height=\"10\" fill=\"" +
           viridis_color(t) + "\"/>";
    if (i % 5 == 0)
      out += "<text x=\"" + number(left + i * 24.0 + 12) + "\" y=\"" + number(y + 24) + "\" text-anchor=\"middle\">" +
             std::to_string(i * 100 / kSteps) + " %</text>";
  }
  out += "<text x=\"" + number(left + 11 * 24.0 + 10) + "\" y=\"" + number(y + 9) + "\">" +
         (map.lower_is_better ? "lower is better" : "higher is better") + "</text>\n";
}

}  // namespace

std::string viridis_color(double t) {
  const double x = std::clamp(std::isnan(t) ? 0.0 : t, 0.0, 1.0) * 4.0;
  const int i = std::min(static_cast<int>(x), 3);
  const double f = x - i;
  const auto channel = [&](int c) {
    return static_cast<int>(std::lround(kViridis[i][c] + f * (kViridis[i + 1][c] - kViridis[i][c])));
  };
  char text[8];
  std::snprintf(text, sizeof text, "#%02x%02x%02x", channel(0), channel(1), channel(2));
  return text;
}

bool viridis_is_light(double t) { return !std::isnan(t) && t >= 0.55; }  // from the green stop on

std::string heatmap_svg(const Heatmap& map) {
  BASTION_CHECK(map.values.size() == map.rows.size(), "heatmap '", map.title, "': ", map.values.size(),
                " rows of values for ", map.rows.size(), " row labels");
  for (const auto& row : map.values)
    BASTION_CHECK(row.size() == map.columns.size(), "heatmap '", map.title, "': a row has ", row.size(), " values for ",
                  map.columns.size(), " columns");
  const double left = 16 + label_width(map.rows);
  const double header = std::min(label_width(map.columns), 140.0) * 0.75 + 16;  // labels at -45 degrees
  const double top = kTitleHeight + header;
  // Wide enough for the cells, the title and the colour key (eleven 24 px steps and its label).
  const double title_width = 16 + static_cast<double>(map.title.size()) * 8.0, key_width = left + 11 * 24.0 + 120;
  const double width = std::max({cell_x(map, left, map.columns.size()) + 24, title_width, key_width});
  const double height = top + static_cast<double>(map.rows.size()) * kCellHeight + kKeyHeight;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + number(width) + "\" height=\"" +
         number(height) + "\" viewBox=\"0 0 " + number(width) + " " + number(height) +
         "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\" fill=\"#222222\">\n";
  out += "<title>" + xml_escape(map.title) + "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out += "<text x=\"16\" y=\"22\" font-size=\"14\" font-weight=\"bold\">" + xml_escape(map.title) + "</text>\n";
  for (size_t c = 0; c < map.columns.size(); ++c) {
    const double x = cell_x(map, left, c) + kCellWidth / 2, y = top - 6;
    out += "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\" transform=\"rotate(-45 " + number(x) + " " +
           number(y) + ")\">" + xml_escape(map.columns[c]) + "</text>\n";
  }
  for (size_t r = 0; r < map.rows.size(); ++r) {
    const double y = top + static_cast<double>(r) * kCellHeight;
    out += "<text x=\"" + number(left - 8) + "\" y=\"" + number(y + kCellHeight / 2) +
           "\" dy=\"0.35em\" text-anchor=\"end\">" + xml_escape(map.rows[r]) + "</text>\n";
    for (size_t c = 0; c < map.columns.size(); ++c)
      append_cell(out, map, cell_x(map, left, c), y, map.values[r][c], map.rows[r] + " / " + map.columns[c]);
  }
  append_key(out, map, left, top + static_cast<double>(map.rows.size()) * kCellHeight + 12);
  return out + "</svg>\n";
}

}  // namespace bastion
