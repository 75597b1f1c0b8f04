// `bastion report DIR [--out FILE.html]`: one self-contained HTML page for a run folder (inline SVG
// and CSS, no script, opens offline): the settings that differ from the defaults, the values the rules
// derived and the attackers (summary.json), the summary figures, the curves of every metric, the spread
// of p_acc and p_asr over the clients at the last evaluated round (clients.csv), detection over rounds,
// time per round, the data each client held (partition.csv) and the provenance. Each section reads its
// own file: a missing or damaged file is named in its section and the other sections still render.
// With several seeds (seed-<s>/ folders) the curves show every seed; the per-client sections read the
// first seed's folder. For a reproduce output folder (table.csv and runs/), or a table published in
// docs/reproduction/ (NAME-runs/ beside NAME.csv): the table, its chart, every row linked to its run's
// section with that run's figures and curves. For a defense grid (RULE/ATTACK/ run folders): heatmaps
// with worst-case columns and a ranking (cli/report_grid.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/report_grid.h"
#include "cli/report_page.h"
#include "data/idx.h"
#include "data/partition.h"
#include "fl/core/config.h"
#include "fl/metrics/results.h"
#include "fl/registry.h"
#include "fl/reproduce/preset.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion::cli {

namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::string run_dir, out;
};

// The seed folders of a run: the run folder itself, or its seed-<s>/ folders in seed order.
std::vector<fs::path> seed_folders(const fs::path& dir) {
  if (fs::is_regular_file(dir / "rounds.csv")) return {dir};
  std::vector<fs::path> seeds;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().rfind("seed-", 0) == 0) seeds.push_back(entry.path());
  std::sort(seeds.begin(), seeds.end());
  return seeds;
}

std::string json_text(const nlohmann::json& value) {
  if (value.is_null()) return "-";
  if (value.is_number_float()) return number_text(value.get<double>());
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string summary_section(const fs::path& dir) {
  const nlohmann::json summary = read_summary(dir);
  std::vector<std::vector<std::string>> figures, resolved;
  for (const auto& run : summary.at("runs")) {
    std::vector<std::string> row = {json_text(run.at("seed"))};
    for (const char* key : {"acc", "asr", "final_acc", "best_acc", "local_acc", "seconds_per_round"})
      row.push_back(json_text(run.value(key, nlohmann::json())));
    figures.push_back(row);
    std::string derived;
    const nlohmann::json values = run.value("resolved", nlohmann::json::object());  // items() needs it alive
    for (const auto& [key, value] : values.items())
      derived += (derived.empty() ? "" : "; ") + key + " = " + json_text(value);
    resolved.push_back({json_text(run.at("seed")), json_text(run.value("malicious_clients", nlohmann::json())),
                        derived.empty() ? "none" : derived});
  }
  return "<p>Reported figure: <code>" + xml_escape(json_text(summary.value("report", nlohmann::json()))) +
         "</code> (eval.report).</p>" +
         table({"seed", "acc", "asr", "final_acc", "best_acc", "local_acc", "s/round"}, figures) +
         "<h3>What the run derived</h3>" + table({"seed", "malicious clients", "resolved values"}, resolved);
}

std::string curves_section(const std::vector<fs::path>& seeds, const std::string& title) {
  std::vector<std::vector<RoundRecord>> records;
  for (const fs::path& seed : seeds)
    records.push_back(parse_rounds_csv(read_text_file((seed / "rounds.csv").string())));
  std::string out = without_xml_declaration(curves_svg(title, records));
  std::vector<LabelledRuns> one = {{title, records}};
  for (const std::string& metric : overlay_metrics()) {
    if (metric == "acc" || metric == "asr" || !overlay_metric_measured(records, metric))
      continue;  // above / not measured
    out += without_xml_declaration(overlay_svg(title + ": " + metric, metric, one));
  }
  return out;
}

// A 10-bin histogram over [0, 1] of one column of clients.csv's rows at its last round.
std::string histogram_svg(const std::string& title, const std::vector<double>& values) {
  std::vector<int> bins(10, 0);
  for (double v : values) bins[static_cast<size_t>(std::clamp(static_cast<int>(v * 10.0), 0, 9))]++;
  const int most = std::max(1, *std::max_element(bins.begin(), bins.end()));
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"360\" height=\"200\" font-size=\"11\"><text x=\"10\" "
         "y=\"14\">"
      << xml_escape(title) << " (" << values.size() << " clients)</text>";
  for (int b = 0; b < 10; ++b) {
    const double height = 140.0 * bins[static_cast<size_t>(b)] / most;
    svg << "<rect x=\"" << 20 + 32 * b << "\" y=\"" << 170 - height << "\" width=\"28\" height=\"" << height
        << "\" fill=\"#4c78a8\"/><text x=\"" << 22 + 32 * b << "\" y=\"185\">" << b / 10.0 << "</text>";
    if (bins[static_cast<size_t>(b)] > 0)
      svg << "<text x=\"" << 28 + 32 * b << "\" y=\"" << 166 - height << "\">" << bins[static_cast<size_t>(b)]
          << "</text>";
  }
  return svg.str() + "</svg>";
}

std::string clients_section(const fs::path& dir) {
  const std::vector<ClientRow> rows = parse_clients_csv(read_text_file((dir / "clients.csv").string()));
  BASTION_CHECK(!rows.empty(), (dir / "clients.csv").string(), ": no rows");
  const int64_t last = rows.back().round;
  std::vector<double> acc, asr;
  for (const ClientRow& row : rows) {
    if (row.round != last) continue;
    if (!std::isnan(row.p_acc)) acc.push_back(row.p_acc);
    if (!std::isnan(row.p_asr)) asr.push_back(row.p_asr);
  }
  std::string out = "<p>Round " + std::to_string(last) + ", each judged client's own model.</p>";
  if (acc.empty() && asr.empty()) return out + "<p>No personalised figures in this run.</p>";
  if (!acc.empty()) out += histogram_svg("p_acc", acc);
  if (!asr.empty()) out += histogram_svg("p_asr", asr);
  return out;
}

std::string detection_section(const fs::path& dir) {
  const std::vector<RoundRecord> records = parse_rounds_csv(read_text_file((dir / "rounds.csv").string()));
  std::vector<std::vector<std::string>> rows;
  const size_t step = std::max<size_t>(1, records.size() / 50);  // at most about 50 rows
  for (size_t i = 0; i < records.size(); ++i) {
    if (i % step != 0 && i + 1 != records.size()) continue;
    const RoundRecord& r = records[i];
    rows.push_back({std::to_string(r.round), std::to_string(r.sampled), std::to_string(r.malicious),
                    std::to_string(r.rejected), std::to_string(r.true_positive), std::to_string(r.false_positive),
                    std::to_string(r.false_negative), number_text(r.client_detection.dacc, 3),
                    number_text(r.client_detection.fpr, 3), number_text(r.client_detection.fnr, 3)});
  }
  return table(
      {"round", "sampled", "malicious", "rejected", "TP", "FP", "FN", "client DAcc", "client FPR", "client FNR"}, rows);
}

std::string timing_section(const fs::path& dir) {
  const std::vector<RoundTiming> timings = parse_timing_csv(read_text_file((dir / "timing.csv").string()));
  std::vector<std::string> median = {"median"}, total = {"total"};
  for (double RoundTiming::*field :
       {&RoundTiming::train_seconds, &RoundTiming::aggregate_seconds, &RoundTiming::eval_seconds,
        &RoundTiming::round_seconds, &RoundTiming::cpu_seconds}) {
    std::vector<double> column;  // the rounds that measured it (cpu_s is empty in older files)
    for (const RoundTiming& t : timings)
      if (!std::isnan(t.*field)) column.push_back(t.*field);
    if (column.empty()) {
      median.push_back("-"), total.push_back("-");
      continue;
    }
    // client_spread: the project's median (the mean of the middle two), here over rounds with equal weights.
    median.push_back(number_text(client_spread(column, std::vector<double>(column.size(), 1.0)).median, 3));
    double sum = 0;
    for (double v : column) sum += v;
    total.push_back(number_text(sum, 1));
  }
  return table({"seconds", "train", "aggregate", "eval", "round", "CPU"}, {median, total});
}

// partition.csv's class counts through data/partition.h's partition_stats (the numbers `bastion data
// stats` prints), and its attackers.
std::string partition_section(const fs::path& dir) {
  const std::string path = (dir / "partition.csv").string();
  const std::vector<std::string> lines = split_fields(read_text_file(path), '\n');
  std::vector<std::vector<int64_t>> histogram;
  std::string attackers;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const std::vector<std::string> cells = split_fields(lines[i], ',');
    BASTION_CHECK(cells.size() >= 5, path, " line ", i + 1, ": expected client,size,test_size,malicious,class_0,...");
    std::vector<int64_t> counts;
    for (size_t c = 4; c < cells.size(); ++c) counts.push_back(std::stoll(cells[c]));
    histogram.push_back(std::move(counts));
    if (cells[3] == "1") attackers += (attackers.empty() ? "" : ", ") + cells[0];
  }
  BASTION_CHECK(!histogram.empty(), path, ": no clients");
  const PartitionStats stats = partition_stats(histogram);
  return table({"clients", "min size", "median size", "max size", "classes per client", "attackers"},
               {{std::to_string(stats.clients), std::to_string(stats.min_size), number_text(stats.median_size, 1),
                 std::to_string(stats.max_size), number_text(stats.mean_classes, 2),
                 attackers.empty() ? "none" : attackers}}) +
         "<p>Per-client class counts: partition.csv.</p>";
}

std::string provenance_section(const fs::path& dir) {
  if (!fs::exists(dir / "provenance.tsv"))
    return "<p>No provenance.tsv (written by <code>bastion reproduce</code>).</p>";
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : split_fields(read_text_file((dir / "provenance.tsv").string()), '\n'))
    if (!line.empty()) rows.push_back(split_fields(line, '\t'));
  if (rows.empty()) return "<p>provenance.tsv is empty.</p>";
  // The file has no header line: one line per invocation (lines written before threads were have three).
  return table({"date", "commit", "machine", "threads"}, rows);
}

std::string run_report(const fs::path& dir) {
  const std::vector<fs::path> seeds = seed_folders(dir);
  const fs::path first = seeds.empty() ? dir : seeds.front();
  const std::string name = fs::weakly_canonical(dir).filename().string();
  std::string html = page_head(name) + "<h1>Run " + xml_escape(name) + "</h1>\n";
  html += "<p>Folder: <code>" + xml_escape(dir.string()) + "</code>; " + std::to_string(seeds.size()) +
          " seed(s). Made by <code>bastion report</code>.</p>\n";
  html += section("settings", "Settings that differ from the defaults", [&] { return settings_section(dir); });
  html += section("summary", "Summary (summary.json)", [&] { return summary_section(dir); });
  html += section("curves", "Curves (rounds.csv)", [&] {
    BASTION_CHECK(!seeds.empty(), (dir / "rounds.csv").string(), ": not found (nor seed-<s>/rounds.csv)");
    return curves_section(seeds, name);
  });
  html += section("clients", "Spread over the clients (clients.csv)", [&] { return clients_section(first); });
  html += section("detection", "Detection over rounds (rounds.csv)", [&] { return detection_section(first); });
  html += section("timing", "Time per round (timing.csv)", [&] { return timing_section(first); });
  html += section("data", "Data per client (partition.csv)", [&] { return partition_section(first); });
  html += section("provenance", "Provenance (provenance.tsv)", [&] { return provenance_section(dir); });
  return html + "</body></html>\n";
}

std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      cells.emplace_back();
    else
      cells.back() += c;
  }
  return cells;
}

// Where a table's files are: a reproduce output folder (table.csv, table.md, table.svg, runs/), or a
// published one in docs/reproduction/ (NAME.csv, NAME.md, NAME.svg beside NAME-runs/, scripts/publish_table.sh).
struct TableFiles {
  fs::path csv, md, svg, runs;
};

std::optional<TableFiles> table_files(const fs::path& dir) {
  if (fs::exists(dir / "table.csv") && fs::is_directory(dir / "runs"))
    return TableFiles{dir / "table.csv", dir / "table.md", dir / "table.svg", dir / "runs"};
  const std::string name = fs::weakly_canonical(dir).filename().string();
  const std::string suffix = "-runs";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const fs::path base = fs::weakly_canonical(dir).parent_path() / name.substr(0, name.size() - suffix.size());
  if (!fs::exists(base.string() + ".csv")) return std::nullopt;
  return TableFiles{base.string() + ".csv", base.string() + ".md", base.string() + ".svg", dir};
}

// The table's CSV as a table whose rows link to their run's section (the row's folder, or row--column's).
std::string table_section(const TableFiles& files) {
  std::istringstream lines(read_text_file(files.csv.string()));
  std::string line;
  std::getline(lines, line);
  BASTION_CHECK(line.rfind("row,column,metric", 0) == 0, files.csv.string(), ": not a reproduce table");
  std::string out =
      "<table><tr><th>row</th><th>column</th><th>metric</th><th>ours (mean ± std)</th><th>seeds</th>"
      "<th>paper</th><th>Δ</th></tr>";
  while (std::getline(lines, line)) {
    const std::vector<std::string> c = csv_cells(line);
    BASTION_CHECK(c.size() >= 8, files.csv.string(), ": short row '", line, "'");
    std::string run = results_folder_slug(c[0]);
    if (!fs::is_directory(files.runs / run)) run += "--" + results_folder_slug(c[1]);
    const std::string row = fs::is_directory(files.runs / run)
                                ? "<a href=\"#run-" + xml_escape(run) + "\">" + xml_escape(c[0]) + "</a>"
                                : xml_escape(c[0]);
    out += "<tr><td>" + row + "</td><td>" + xml_escape(c[1]) + "</td><td>" + xml_escape(c[2]) + "</td><td>" +
           xml_escape(c[3]) + " ± " + xml_escape(c[4]) + "</td><td>" + xml_escape(c[5]) + "</td><td>" +
           xml_escape(c[6]) + "</td><td>" + xml_escape(c[7]) + "</td></tr>";
  }
  return out + "</table>";
}

// A reproduce output folder: its table.md's title, table.svg, the table with links, then one section
// per run (its summary and curves).
std::string table_report(const fs::path& dir, const TableFiles& files) {
  const std::string name = fs::weakly_canonical(dir).filename().string();
  std::string title = name;
  try {
    std::istringstream md(read_text_file(files.md.string()));
    std::getline(md, title);
    if (title.rfind("# ", 0) == 0) title = title.substr(2);
  } catch (const Error&) {  // the title falls back to the folder name
  }
  std::string html = page_head(title) + "<h1>" + xml_escape(title) + "</h1>\n<p>Folder: <code>" +
                     xml_escape(dir.string()) +
                     "</code>; the settings and scale are in table.md. Made by <code>bastion "
                     "report</code>.</p>\n";
  html += section("table", "The table (" + files.csv.filename().string() + ")", [&] {
    std::string svg;
    if (fs::exists(files.svg)) svg = without_xml_declaration(read_text_file(files.svg.string()));
    return svg + table_section(files);
  });
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(files.runs))
    if (entry.is_directory()) runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  for (const fs::path& run : runs) {
    const std::string cell = run.filename().string();
    html += section("run-" + cell, "Run " + cell, [&] {
      const std::vector<fs::path> seeds = seed_folders(run);
      BASTION_CHECK(!seeds.empty(), (run / "rounds.csv").string(), ": not found (nor seed-<s>/rounds.csv)");
      return summary_section(run) + curves_section(seeds, cell);
    });
  }
  return html + "</body></html>\n";
}

// A grid's page, and its heatmaps beside it as OUT-accuracy.svg, OUT-asr.svg and OUT-detection.svg (docs
// embed them).
void write_grid_report(const fs::path& dir, const std::vector<GridFolderCell>& cells, const std::string& out) {
  const GridReport grid = grid_report(dir, cells);
  write_file_atomic(out, grid.html);
  const fs::path stem = fs::path(out).parent_path() / fs::path(out).stem();
  write_file_atomic(stem.string() + "-accuracy.svg", grid.accuracy_svg);
  std::printf("report: %s-accuracy.svg\n", stem.string().c_str());
  for (const auto& [suffix, svg] :
       {std::pair{"-asr.svg", &grid.success_svg}, std::pair{"-detection.svg", &grid.detection_svg}}) {
    if (svg->empty()) continue;
    write_file_atomic(stem.string() + suffix, *svg);
    std::printf("report: %s%s\n", stem.string().c_str(), suffix);
  }
}

int report(const ReportArgs& args) {
  const fs::path dir(args.run_dir);
  BASTION_CHECK(fs::is_directory(dir), "report: '", args.run_dir,
                "' is not a folder (give a run, reproduce or grid folder)");
  const std::optional<TableFiles> table = table_files(dir);
  const std::vector<GridFolderCell> grid = table ? std::vector<GridFolderCell>{} : grid_folder_cells(dir);
  BASTION_CHECK(
      table || !grid.empty() || fs::exists(dir / "config.toml") || fs::exists(dir / "rounds.csv"), "report: '",
      args.run_dir,
      "' holds no config.toml, rounds.csv or table.csv with runs/ (nor is it a published "
      "NAME-runs/ beside NAME.csv, or a grid of RULE/ATTACK/summary.json): not a run, reproduce or grid folder");
  const std::string out = args.out.empty() ? (dir / "report.html").string() : args.out;
  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path());
  if (!grid.empty())
    write_grid_report(dir, grid, out);
  else
    write_file_atomic(out, table ? table_report(dir, *table) : run_report(dir));
  std::printf("report: %s\n", out.c_str());
  return 0;
}

}  // namespace

Command add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* sub = app.add_subcommand("report",
                                 "One self-contained HTML page for a run folder (settings, derived values, "
                                 "curves, clients, detection, timing, data, provenance), a reproduce table "
                                 "or a defense grid (heatmaps)");
  sub->add_option("folder", args->run_dir,
                  "A run folder (bastion run's --out), a reproduce output folder or a grid folder (RULE/ATTACK/)")
      ->required();
  sub->add_option("--out", args->out, "HTML file to write (default RUN/report.html)");
  return [args]() { return report(*args); };
}

}  // namespace bastion::cli
