// `bastion report RUN_DIR` (issue 40, run folders): one self-contained HTML page whose elements nest
// (checked by a small tag parser, not by matching the layout), with every section and the values the run
// derived; a missing or damaged file is named in its section and the others still render; a resume of
// the run accepts the page in its folder. A reproduce folder links each row to its run; a defense grid
// gets heatmaps whose every cell is found by its rule and attack and holds its run's value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fl_test_support.h"
#include "reproduce_test_support.h"
#include "data/idx.h"
#include "tensor/file_io.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;
using CliReport = testing::FlRunTest;

// The tags of an HTML/SVG text nest: every opened element is closed in order, void elements and
// self-closing tags aside. Returns the ids of the <section> elements, or fails the test.
std::vector<std::string> nested_sections(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "link", "input", "!DOCTYPE"};
  std::vector<std::string> open, sections;
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    const size_t end = html.find('>', at);
    if (end == std::string::npos) {
      ADD_FAILURE() << "a tag is not closed at " << at;
      return sections;
    }
    const std::string tag = html.substr(at + 1, end - at - 1);
    if (tag.empty() || tag[0] == '?' || tag.rfind("!--", 0) == 0) continue;
    const std::string name =
        tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" \t\n/", 1) - (tag[0] == '/' ? 1 : 0));
    if (tag[0] == '/') {
      if (open.empty() || open.back() != name) {
        ADD_FAILURE() << "</" << name << "> closes <" << (open.empty() ? "nothing" : open.back()) << "> at " << at;
        return sections;
      }
      open.pop_back();
    } else if (tag.back() != '/' && !kVoid.count(name)) {
      open.push_back(name);
      if (name == "section") {
        const size_t id = tag.find("id=\"");
        sections.push_back(id == std::string::npos ? "" : tag.substr(id + 4, tag.find('"', id + 4) - id - 4));
      }
    }
    at = end;
  }
  EXPECT_TRUE(open.empty()) << "unclosed <" << (open.empty() ? "" : open.back()) << ">";
  return sections;
}

const testing::TinyRun kAttackedPersonalRun{
    {"rounds=3", "clients.rule=fedavg-ft", "eval.personalized=true", "data.local_test=like-train",
     "attack.names=[\"lie\"]", "attack.malicious_count=2", "server.rule=multi-krum", "clients.per_round=6"}};

TEST_F(CliReport, ARunsPageNestsAndHoldsEverySectionAndWhatTheRunDerived) {
  run(kAttackedPersonalRun, "a", 1);
  const testing::RunResult result = testing::run_bastion("report " + (dir_ / "a").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string html = read_text_file((dir_ / "a" / "report.html").string());
  EXPECT_EQ(nested_sections(html), (std::vector<std::string>{"settings", "summary", "curves", "clients", "detection",
                                                             "timing", "data", "provenance"}));
  EXPECT_EQ(html.find("class=\"missing\""), std::string::npos) << "every file of a whole run is there";
  for (const char* expected : {"server.rule", "multi-krum", "server.multi-krum.f", "attack.lie.z", "p_acc (", "<svg"})
    EXPECT_NE(html.find(expected), std::string::npos) << expected;
  EXPECT_NE(html.find(": p_acc"), std::string::npos) << "a measured metric gets its plot";
  EXPECT_EQ(html.find(": p_asr"), std::string::npos) << "no backdoor: no empty p_asr plot";
  EXPECT_EQ(html.find(": local_acc"), std::string::npos) << "not measured: no empty plot";
  EXPECT_NE(html.find("<th>round</th><th>CPU</th>"), std::string::npos) << "timing.csv's cpu_s, beside wall times";
  // The page stays in the folder; a resume of the run accepts it.
  run(kAttackedPersonalRun.with({"rounds=4"}), "a", 1, {}, /*resume=*/true);
}

TEST_F(CliReport, AMissingOrDamagedFileIsNamedAndTheOtherSectionsRender) {
  run(kAttackedPersonalRun, "b", 1);
  fs::remove(dir_ / "b" / "clients.csv");
  std::ofstream(dir_ / "b" / "timing.csv") << "not a timing file\n";
  const testing::RunResult result =
      testing::run_bastion("report " + (dir_ / "b").string() + " --out " + (dir_ / "b.html").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string html = read_text_file((dir_ / "b.html").string());
  EXPECT_EQ(nested_sections(html).size(), 8u);
  EXPECT_NE(html.find((dir_ / "b" / "clients.csv").string()), std::string::npos) << "the missing file, by path";
  EXPECT_NE(html.find("timing.csv: no header"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos) << "the curves still render";
  const testing::RunResult not_a_run = testing::run_bastion("report " + dir_.string());
  EXPECT_EQ(not_a_run.exit_code, 1);
  EXPECT_NE(not_a_run.output.find("not a run, reproduce or grid folder"), std::string::npos) << not_a_run.output;
}

// A reproduce folder (a two-by-two sweep): the table section, one section per run, and every link in the
// table names a run section of the page.
TEST_F(CliReport, AReproduceFoldersPageLinksEveryRowToItsRunsSection) {
  testing::write_text(dir_ / "base.toml", testing::kReproduceBase);
  const std::string out = (dir_ / "grid").string();
  const testing::RunResult grid = testing::run_bastion("reproduce " + (dir_ / "base.toml").string() +
                                                       " --grid server.rule=fedavg,median --grid clients.per_round=3,4"
                                                       " --set rounds=1 --out " +
                                                       out);
  ASSERT_EQ(grid.exit_code, 0) << grid.output;
  const testing::RunResult result = testing::run_bastion("report " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string html = read_text_file(out + "/report.html");
  const std::vector<std::string> sections = nested_sections(html);
  ASSERT_FALSE(sections.empty());
  EXPECT_EQ(sections.front(), "table");
  size_t runs = 0;
  for (const auto& entry : fs::directory_iterator(out + "/runs")) {
    ++runs;
    EXPECT_NE(std::find(sections.begin(), sections.end(), "run-" + entry.path().filename().string()), sections.end())
        << entry.path();
  }
  EXPECT_EQ(runs, 4u);
  EXPECT_EQ(sections.size(), runs + 1);
  size_t links = 0;
  for (size_t at = html.find("href=\"#"); at != std::string::npos; at = html.find("href=\"#", at + 1), ++links) {
    const std::string target = html.substr(at + 7, html.find('"', at + 7) - at - 7);
    EXPECT_NE(std::find(sections.begin(), sections.end(), target), sections.end()) << target;
  }
  EXPECT_GT(links, 0u);
  EXPECT_EQ(html.find("class=\"missing\""), std::string::npos);
  // A run's own page: provenance.tsv has no header line, so the page names its columns (it showed the
  // first invocation as the header).
  const std::string run_folder = out + "/runs/" + fs::directory_iterator(out + "/runs")->path().filename().string();
  ASSERT_EQ(testing::run_bastion("report " + run_folder).exit_code, 0);
  const std::string run_page = read_text_file(run_folder + "/report.html");
  EXPECT_NE(run_page.find("<th>date</th><th>commit</th><th>machine</th><th>threads</th>"), std::string::npos);

  // The published layout (scripts/publish_table.sh: NAME.csv/.md/.svg beside NAME-runs/) reads the same.
  fs::create_directories(dir_ / "docs");
  for (const char* ext : {"csv", "md", "svg"})
    fs::copy_file(out + "/table." + ext, dir_ / "docs" / (std::string("grid.") + ext));
  fs::copy(out + "/runs", dir_ / "docs" / "grid-runs", fs::copy_options::recursive);
  const testing::RunResult published = testing::run_bastion("report " + (dir_ / "docs" / "grid-runs").string());
  ASSERT_EQ(published.exit_code, 0) << published.output;
  const std::string page = read_text_file((dir_ / "docs" / "grid-runs" / "report.html").string());
  EXPECT_EQ(nested_sections(page), sections);
  EXPECT_NE(page.find("The table (grid.csv)"), std::string::npos);
}

// The text of the heatmap cell whose tooltip is "RULE / ATTACK" (its <title>, then its <text>).
std::string heatmap_cell(const std::string& svg, const std::string& rule, const std::string& attack) {
  const size_t title = svg.find("<title>" + rule + " / " + attack + "</title>");
  if (title == std::string::npos) return "(no cell)";
  const size_t text = svg.find("<text", title);
  const size_t start = svg.find('>', text) + 1;
  return svg.substr(start, svg.find("</text>", start) - start);
}

// A defense grid folder (RULE/ATTACK/ runs, as scripts/defense_grid.sh writes them): the accuracy and
// attack-success heatmaps (also written beside the page), each cell holding its run's reported figure, a
// worst-case column, the ranking; a damaged summary.json is named, its cell grey, and the rest renders.
TEST_F(CliReport, AGridsPageDrawsEveryCellWithItsRunsFigureAndRanksTheRules) {
  const std::vector<std::string> rules = {"fedavg", "norm-bound"}, attacks = {"none", "sign-flip", "badnets"};
  std::map<std::string, RunSummary> summaries;
  for (const std::string& rule : rules)
    for (const std::string& attack : attacks) {
      std::vector<std::string> settings = {"rounds=2", "server.rule=" + rule};
      if (attack == "none")
        settings.push_back("attack.names=[]");
      else
        settings.insert(settings.end(), {"attack.names=[\"" + attack + "\"]", "attack.malicious_count=3"});
      if (attack == "badnets")
        settings.insert(settings.end(), {"attack.badnets.trigger=fedcpa", "attack.badnets.target=1"});
      summaries[rule + "/" + attack] = run(testing::TinyRun{settings}, "grid/" + rule + "/" + attack, 1).front();
    }
  std::ofstream(dir_ / "grid" / "norm-bound" / "sign-flip" / "summary.json") << "{ \"runs\": [";  // damaged
  const testing::RunResult result =
      testing::run_bastion("report " + (dir_ / "grid").string() + " --out " + (dir_ / "page" / "grid.html").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string html = read_text_file((dir_ / "page" / "grid.html").string());
  EXPECT_EQ(nested_sections(html),
            (std::vector<std::string>{"accuracy", "success", "detection", "ranking", "cells", "settings"}));
  const std::string accuracy = read_text_file((dir_ / "page" / "grid-accuracy.svg").string());
  const std::string success = read_text_file((dir_ / "page" / "grid-asr.svg").string());
  EXPECT_TRUE(nested_sections(accuracy).empty() && nested_sections(success).empty());  // both nest
  char expected[32];
  for (const std::string& rule : rules) {
    for (const std::string& attack : attacks) {
      if (rule + "/" + attack == "norm-bound/sign-flip") continue;
      std::snprintf(expected, sizeof expected, "%.1f", 100.0 * summaries[rule + "/" + attack].acc);
      EXPECT_EQ(heatmap_cell(accuracy, rule, attack), expected) << rule << " / " << attack;
    }
    std::snprintf(expected, sizeof expected, "%.1f", 100.0 * summaries[rule + "/badnets"].asr);
    EXPECT_EQ(heatmap_cell(success, rule, "badnets"), expected) << rule;
    EXPECT_EQ(heatmap_cell(success, rule, "none"), "(no cell)") << "only the attacks that measured asr";
  }
  EXPECT_EQ(heatmap_cell(accuracy, "norm-bound", "sign-flip"), "–") << "the damaged cell is drawn without a value";
  // Detection: only the rule that flags uploads gets a row, with its runs' per-upload detection accuracy.
  std::snprintf(expected, sizeof expected, "%.1f", 100.0 * summaries["norm-bound/badnets"].detection.dacc);
  EXPECT_EQ(heatmap_cell(html, "norm-bound", "badnets"), heatmap_cell(accuracy, "norm-bound", "badnets"))
      << "the page's first map is the accuracy map";
  const std::string detection = html.substr(html.find("<section id=\"detection\""));
  EXPECT_EQ(heatmap_cell(detection, "norm-bound", "badnets"), expected);
  EXPECT_EQ(heatmap_cell(detection, "fedavg", "none"), "(no cell)") << "fedavg flags nothing";
  EXPECT_EQ(heatmap_cell(read_text_file((dir_ / "page" / "grid-detection.svg").string()), "norm-bound", "badnets"),
            expected);
  // The worst case is the lowest accuracy over the attacks, "none" aside.
  const double fedavg_worst = std::min(summaries["fedavg/sign-flip"].acc, summaries["fedavg/badnets"].acc);
  std::snprintf(expected, sizeof expected, "%.1f", 100.0 * fedavg_worst);
  EXPECT_EQ(heatmap_cell(accuracy, "fedavg", "worst case"), expected);
  EXPECT_NE(html.find((dir_ / "grid" / "norm-bound" / "sign-flip" / "summary.json").string()), std::string::npos)
      << "the damaged file, by path";
  EXPECT_NE(html.find("<td>1</td>"), std::string::npos) << "a ranking";
}

}  // namespace
}  // namespace bastion
