// `bastion reproduce`'s writers (fl/reproduce/reproduce.h): table.md (ours, paper, Δ, †, the scale sentence,
// provenance), table.csv and table.svg, from a preset and a finished report.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fl/reproduce/reproduce.h"
#include "fl/reproduce/reproduce_text.h"
#include "fl/metrics/results.h"

namespace bastion {

namespace {

using namespace reproduce_text;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string cell_text(const CellResult& cell) {
  if (cell.failed) return "error";
  if (std::isnan(cell.mean)) return "–";
  return fixed(cell.mean, 2) + (cell.seeds > 1 ? " ± " + fixed(cell.std, 2) : "");
}

std::string svg_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// True for an override of the [run] table (threads, checkpoint_every): it changes how the rounds are
// computed, not what they compute (docs/config.md), so it does not reduce the scale.
bool is_run_setting(const std::string& override_text) { return override_text.compare(0, 4, "run.") == 0; }

// True for an override that only shrinks the experiment (fewer rounds, clients or samples): the table is
// the paper's at a smaller scale. Any other key (clients.sgd.epochs, a rule's option) is another setting.
bool is_scale_setting(const std::string& override_text) {
  static const char* const kScaleKeys[] = {"rounds",
                                           "repeat",
                                           "data.clients",
                                           "data.max_per_client",
                                           "clients.per_round",
                                           "eval.every",
                                           "eval.personal_clients"};
  const std::string key = override_text.substr(0, override_text.find('='));
  for (const char* scale_key : kScaleKeys)
    if (key == scale_key) return true;
  return false;
}

// Backquoted, space-separated overrides.
std::string quoted_overrides(const std::vector<std::string>& overrides) {
  std::string text;
  for (size_t i = 0; i < overrides.size(); ++i) text += (i ? " `" : "`") + overrides[i] + "`";
  return text;
}

// "full scale", "**quick** (smoke-test) scale" or "**reduced** (`rounds=20`) scale", then any other
// override as "with **changed settings** (...)" (", not the paper's" when the preset has paper numbers): a table run with overrides says so where the reader
// compares the numbers, and a changed setting is not mistaken for a smaller scale. [run] overrides are
// listed apart and change nothing.
std::string scale_description(const ReproduceOptions& options, bool paper) {
  std::vector<std::string> reducing, changing, run_settings;
  for (const std::string& o : options.overrides) {
    if (is_run_setting(o))
      run_settings.push_back(o);
    else if (is_scale_setting(o))
      reducing.push_back(o);
    else
      changing.push_back(o);
  }
  std::string scale = options.quick ? "**quick** (smoke-test)" : "full";
  if (!reducing.empty())
    scale = (options.quick ? scale + ", further **reduced** (" : "**reduced** (") + quoted_overrides(reducing) + ")";
  if (!run_settings.empty()) scale += " (run settings, results unchanged: " + quoted_overrides(run_settings) + ")";
  scale += " scale";
  // A sweep (no paper numbers) has no paper setting to differ from: its base config's is the reference.
  if (!changing.empty())
    scale += " with **changed settings** (" + quoted_overrides(changing) + ")" + (paper ? ", not the paper's" : "");
  return scale;
}

// "Runs made by: `A`: x, y; `B` then `C`: z" when some run of the table was made by other code than this
// invocation's (finished earlier and skipped, or resumed); empty otherwise.
std::string runs_by_commit(const ReproduceReport& report, const ReproduceOptions& options) {
  std::string current = "`";  // appended: GCC 12's -Wrestrict false positive on "`" + std::string
  current.append(or_unknown(options.commit)).append("`");
  std::vector<std::pair<std::string, std::string>> groups;  // commits, folders; first-seen order
  for (const auto& entry : report.provenance) {
    // Plain references, not structured bindings: clang 14 (the fuzz build) cannot capture bindings in lambdas.
    const std::string& folder = entry.first;
    const std::string& commits = entry.second;
    if (folder.empty()) continue;  // a failed run: no cells to attribute
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == commits; });
    if (group == groups.end())
      groups.push_back({commits, folder});
    else
      group->second.append(", ").append(folder);
  }
  if (groups.empty() || (groups.size() == 1 && groups[0].first == current)) return "";
  std::string text = "Runs made by:";
  for (size_t g = 0; g < groups.size(); ++g)
    text.append(g == 0 ? " " : "; ").append(groups[g].first).append(": ").append(groups[g].second);
  return text + "  \n";
}

// What the Cost line adds up: CPU time (timing.csv's cpu_s) where the rounds measured it, else round time x
// threads (runs made before cpu_s; their tables keep the wording they were published with).
std::string cost_basis(const ReproduceReport& report) {
  if (report.cpu_rounds == 0) return "every run's round times, timing.csv, times its threads";
  if (report.cpu_rounds == report.rounds) return "the CPU time of every run's rounds, timing.csv's cpu_s";
  return "the CPU time of " + std::to_string(report.cpu_rounds) + " of the " + std::to_string(report.rounds) +
         " rounds, timing.csv's cpu_s; the round time x threads of the others, recorded without it";
}

}  // namespace

bool has_paper_numbers(const Preset& preset) {
  for (const PresetRow& row : preset.rows)
    for (double value : row.paper)
      if (!std::isnan(value)) return true;
  return false;
}

std::string table_markdown(const Preset& preset, const ReproduceReport& report, const ReproduceOptions& options) {
  std::string md = "# " + preset.title + "\n\n";
  if (!preset.paper.empty()) md += "Paper: " + preset.paper + ". ";
  const int64_t seeds = report.cells.empty() || report.cells[0].empty() ? 0 : report.cells[0][0].seeds;
  // A preset without paper numbers (a user's sweep) gets no paper, Δ or † columns; a --quick table is a
  // smoke test, compared with nothing: no †.
  const bool with_paper = has_paper_numbers(preset);
  md += std::string("Reproduced by `bastion reproduce` at ") + scale_description(options, has_paper_numbers(preset)) +
        "; ours = mean ± std over " + std::to_string(seeds) + " seed(s)" + (with_paper ? "; Δ = ours − paper." : ".");
  if (options.quick) {
    md += " Quick settings:";
    for (const std::string& s : preset.quick) md += " `" + s + "`";
    md += with_paper ? "; nothing is marked †: a smoke test is not a comparison with the paper." : ".";
  }
  bool any_tolerance = false;
  for (const PresetColumn& column : preset.columns) any_tolerance |= column.tolerance > 0;
  if (any_tolerance && with_paper && !options.quick) {
    md += " † marks |Δ| beyond the column's tolerance (";
    bool first = true;
    for (const PresetColumn& column : preset.columns) {
      if (column.tolerance <= 0) continue;
      md += std::string(first ? "" : ", ") + column.name + " " + fixed(column.tolerance, 0);
      first = false;
    }
    md += " points).";
  }
  md += "\n\n| method |";
  std::string rule = "|---|";
  for (const PresetColumn& column : preset.columns) {
    md += with_paper ? " " + column.name + " ours | " + column.name + " paper | Δ |" : " " + column.name + " |";
    rule += with_paper ? "---:|---:|---:|" : "---:|";
  }
  md += "\n" + rule + "\n";
  for (size_t r = 0; r < preset.rows.size(); ++r) {
    md += "| " + preset.rows[r].name + " |";
    for (size_t c = 0; c < preset.columns.size(); ++c) {
      const CellResult& cell = report.cells[r][c];
      const double paper = preset.rows[r].paper[c];
      const double diff = cell.failed ? kNaN : cell.mean - paper;
      const bool far =
          !options.quick && preset.columns[c].tolerance > 0 && std::fabs(diff) > preset.columns[c].tolerance;
      // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on the chained operator+.
      md.append(" ").append(cell_text(cell)).append(" |");
      if (!with_paper) continue;
      md.append(" ")
          .append(fixed(paper, 2))
          .append(" | ")
          .append(signed_fixed(diff, 2))
          .append(far ? " †" : "")
          .append(" |");
    }
    md += "\n";
  }
  md += "\nSettings: base experiment `" + preset.base + "`";
  if (!preset.set.empty()) {
    md += ", with";
    for (const std::string& s : preset.set) md += " `" + s + "`";
  }
  md += "; per row:\n\n";
  for (const PresetRow& row : preset.rows) {
    md += "- " + row.name + ":";
    for (const std::string& s : row.set) md += " `" + s + "`";
    md += "\n";
  }
  md += "\nRun: `" + options.command + "`  \n";
  const std::string made_by = runs_by_commit(report, options);
  md += "Commit: " + or_unknown(options.commit) +
        (made_by.empty() ? " (this invocation; every cell's runs were made at this commit)  \n"
                         : " (this invocation)  \n");
  md += made_by;
  md += "Machine: " + or_unknown(options.machine) + "  \n";
  const std::string processes = report.ranks > 1 ? " on " + std::to_string(report.ranks) + " MPI ranks" : "";
  md += "Date: " + today() + "; this invocation: " + minutes(report.seconds) + " wall time" + processes + ", " +
        std::to_string(report.runs) + " run(s) executed, " + std::to_string(report.skipped) +
        " finished earlier and skipped, " + std::to_string(report.failed) + " failed.\n";
  md += "Cost: " + fixed(report.core_hours, 2) + " core-hours (" + cost_basis(report) + "; runs made earlier included)";
  if (report.runs_without_threads > 0)
    md += "; " + std::to_string(report.runs_without_threads) +
          " run(s) with no thread count recorded, counted as 1 thread";
  md += ".\n";
  return md;
}

std::string table_csv(const Preset& preset, const ReproduceReport& report) {
  std::string csv = "row,column,metric,mean,std,seeds,paper,diff\n";
  auto quoted = [](const std::string& text) {
    std::string out = "\"";
    for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  auto number = [](double v) { return std::isnan(v) ? std::string() : fixed(v, 4); };
  for (size_t r = 0; r < preset.rows.size(); ++r) {
    for (size_t c = 0; c < preset.columns.size(); ++c) {
      const CellResult& cell = report.cells[r][c];
      const double paper = preset.rows[r].paper[c];
      csv += quoted(preset.rows[r].name) + "," + quoted(preset.columns[c].name) + "," + preset.columns[c].metric + "," +
             (cell.failed ? "error" : number(cell.mean)) + "," + number(cell.std) + "," + std::to_string(cell.seeds) +
             "," + number(paper) + "," + (cell.failed ? "" : number(cell.mean - paper)) + "\n";
    }
  }
  return csv;
}

// One panel per column: a pair of horizontal bars per row (ours with its ± std whisker, the paper's).
std::string table_svg(const Preset& preset, const ReproduceReport& report) {
  const double label_width = 190, panel_width = 260, bar = 9, row_height = 26, top = 46;
  const double height = top + row_height * static_cast<double>(preset.rows.size()) + 30;
  const double width = label_width + panel_width * static_cast<double>(preset.columns.size()) + 20;
  const auto n = [](double v) { return fixed_text(v, 1); };
  const auto rect = [&](double x, double y, double w, const char* fill) {
    return "<rect x=\"" + n(x) + "\" y=\"" + n(y) + "\" width=\"" + n(w) + "\" height=\"" + n(bar) + "\" fill=\"" +
           fill + "\"/>\n";
  };
  const auto line = [&](double x1, double y1, double x2, double y2, const char* stroke) {
    return "<line x1=\"" + n(x1) + "\" y1=\"" + n(y1) + "\" x2=\"" + n(x2) + "\" y2=\"" + n(y2) + "\" stroke=\"" +
           stroke + "\"/>\n";
  };
  const auto text = [&](double x, double y, const std::string& body, const char* extra) {
    return "<text x=\"" + n(x) + "\" y=\"" + n(y) + "\"" + extra + ">" + svg_escape(body) + "</text>\n";
  };
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + n(width) + "\" height=\"" + n(height) +
      "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"16\" font-size=\"13\">" + svg_escape(preset.title) + "</text>\n";
  bool spread = false;  // a ± std whisker only where some cell has more than one seed
  for (const auto& row : report.cells)
    for (const CellResult& cell : row) spread = spread || cell.seeds > 1;
  svg += std::string("<text x=\"10\" y=\"32\"><tspan fill=\"#1f77b4\">■ ours") + (spread ? " (± std)" : "") +
         "</tspan>" + (has_paper_numbers(preset) ? "  <tspan fill=\"#999\">■ paper</tspan>" : "") + "</text>\n";
  for (size_t c = 0; c < preset.columns.size(); ++c) {
    const double x0 = label_width + panel_width * static_cast<double>(c), span = panel_width - 30;
    double top_value = preset.columns[c].scale;  // percentages: 0..100
    for (size_t r = 0; r < preset.rows.size(); ++r) {
      const CellResult& cell = report.cells[r][c];
      if (!std::isnan(cell.mean)) top_value = std::max(top_value, cell.mean + cell.std);
      if (!std::isnan(preset.rows[r].paper[c])) top_value = std::max(top_value, preset.rows[r].paper[c]);
    }
    auto x_of = [&](double v) { return x0 + span * std::clamp(v / top_value, 0.0, 1.0); };
    svg += text(x0, top - 6, preset.columns[c].name, " font-weight=\"bold\"");
    for (int k = 1; k <= 4; ++k) {  // quarter ticks with faint grid lines
      const double v = top_value * k / 4.0;
      svg += line(x_of(v), top, x_of(v), height - 24, "#e4e4e4");
      svg += text(x_of(v), height - 10, fixed_text(v, 0), " text-anchor=\"middle\" fill=\"#555\"");
    }
    svg += line(x0, top, x0, height - 24, "#333");
    svg += text(x0, height - 10, "0", " text-anchor=\"middle\" fill=\"#555\"");
    for (size_t r = 0; r < preset.rows.size(); ++r) {
      const double y = top + row_height * static_cast<double>(r) + 3;
      const CellResult& cell = report.cells[r][c];
      if (!std::isnan(cell.mean)) {
        svg += rect(x0, y, x_of(cell.mean) - x0, "#1f77b4");
        const bool whisker = cell.seeds > 1 && !std::isnan(cell.std);
        if (whisker)
          svg += line(x_of(cell.mean - cell.std), y + bar / 2, x_of(cell.mean + cell.std), y + bar / 2, "#000");
        svg += text(x_of(whisker ? cell.mean + cell.std : cell.mean) + 3, y + bar - 1, fixed_text(cell.mean, 1),
                    " font-size=\"9\"");
      }
      const double paper = preset.rows[r].paper[c];
      if (!std::isnan(paper)) {
        svg += rect(x0, y + bar + 1, x_of(paper) - x0, "#999");
        svg += text(x_of(paper) + 3, y + 2 * bar, fixed_text(paper, 1), " font-size=\"9\" fill=\"#777\"");
      }
    }
  }
  for (size_t r = 0; r < preset.rows.size(); ++r)
    svg += text(label_width - 8, top + row_height * static_cast<double>(r) + 3 + bar + 3, preset.rows[r].name,
                " text-anchor=\"end\"");
  return svg + "</svg>\n";
}

}  // namespace bastion
