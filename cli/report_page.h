// The pieces every `bastion report` page is built from (cli/report.cpp: runs and tables; cli/report_grid.cpp:
// defense grids): the page's head and CSS, sections that name the file that stopped them and let the
// others render, HTML tables, and the readers of a run folder's config.toml and summary.json.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bastion::cli {

// value with `digits` decimals, "-" for NaN.
std::string number_text(double value, int digits = 4);
// An HTML table of escaped text cells.
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
// One <section>: its body, or "Not shown: <the error, naming the file>" when body() throws.
std::string section(const std::string& id, const std::string& heading, const std::function<std::string()>& body);
// The document's head with the page's CSS, and the opened body.
std::string page_head(const std::string& title);
// The run's description and every resolved setting of DIR/config.toml that is not its default.
std::string settings_section(const std::filesystem::path& dir);
// DIR/summary.json, parsed; throws naming the file when it is missing or not JSON.
nlohmann::json read_summary(const std::filesystem::path& dir);
// An SVG file's text without its <?xml ...?> line, for inlining into HTML.
std::string without_xml_declaration(const std::string& svg);

}  // namespace bastion::cli
