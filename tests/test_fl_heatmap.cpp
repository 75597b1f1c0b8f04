// heatmap_svg (fl/metrics/heatmap.h): every cell drawn with its percentage, NaN as "–" on grey, the viridis
// ends, a reversed scale for lower-is-better maps, the separated worst-case column, and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fl/metrics/heatmap.h"
#include "test_support.h"

namespace bastion {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(Heatmap, EveryCellCarriesItsValueAndTooltip) {
  const Heatmap map{
      "grid", {"fedavg", "krum"}, {"none", "lie", "worst case"}, {{0.675, 0.622, 0.622}, {0.589, kNaN, 0.591}}, false,
      2};
  const std::string svg = heatmap_svg(map);
  EXPECT_EQ(count_of(svg, "<rect x="), 6u + 11u);  // the cells and the key's eleven steps
  for (const char* text : {">67.5<", ">62.2<", ">58.9<", ">59.1<", ">–<", "<title>krum / lie</title>",
                           "<title>fedavg / worst case</title>", "higher is better"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  EXPECT_NE(svg.find("fill=\"#dddddd\""), std::string::npos) << "the NaN cell is grey";
  EXPECT_EQ(svg.find("<svg"), svg.find("<svg xmlns"));
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}

TEST(Heatmap, ViridisEndsAndTheReversedScale) {
  EXPECT_EQ(viridis_color(0.0), "#440154");
  EXPECT_EQ(viridis_color(1.0), "#fde725");
  EXPECT_EQ(viridis_color(2.0), "#fde725") << "clamped";
  EXPECT_FALSE(viridis_is_light(0.1));
  EXPECT_TRUE(viridis_is_light(0.9));
  const Heatmap asr{"asr", {"fedavg"}, {"badnets"}, {{0.0}}, true, 0};
  const std::string svg = heatmap_svg(asr);
  // A 0 % success rate is the good end: drawn yellow, with dark text.
  EXPECT_NE(svg.find("fill=\"#fde725\"/><text"), std::string::npos) << svg;
  EXPECT_NE(svg.find("lower is better"), std::string::npos);
}

TEST(Heatmap, ShapesMustAgree) {
  testing::expect_error(
      [] {
        heatmap_svg({"bad", {"a", "b"}, {"x"}, {{0.5}}, false, 0});
      },
      {"heatmap 'bad'", "1 rows of values for 2"});
  testing::expect_error(
      [] {
        heatmap_svg({"bad", {"a"}, {"x"}, {{0.5, 0.1}}, false, 0});
      },
      {"a row has 2 values for 1 columns"});
}

}  // namespace
}  // namespace bastion
