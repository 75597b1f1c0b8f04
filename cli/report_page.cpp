// The pieces every `bastion report` page is built from (cli/report_page.h).
#include "cli/report_page.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "data/idx.h"
#include "fl/core/config.h"
#include "fl/metrics/results.h"
#include "fl/registry.h"
#include "tensor/error.h"

namespace bastion::cli {

namespace fs = std::filesystem;

namespace {

// key -> value of a resolved config.toml text ("section.key" for keys under [section]).
std::map<std::string, std::string> toml_values(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos)
      values[(section.empty() ? "" : section + ".") + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return values;
}

// "section.key" -> the default's TOML text, from the same ParamSpec tables the config loader checks
// against: the config sections, and every unit's table under clients.<rule>, server.<rule>, attack.<name>.
std::map<std::string, std::string> default_values() {
  std::map<std::string, std::string> defaults;
  for (const auto& [section, specs] : config_sections())
    for (const ParamSpec& spec : specs)
      defaults[(section.empty() ? "" : section + ".") + spec.name] = param_default_text(spec);
  const auto add_units = [&](const std::string& prefix, const auto& registry) {
    for (const auto& entry : registry)
      for (const ParamSpec& spec : *entry.info.params)
        defaults[prefix + "." + entry.info.name + "." + spec.name] = param_default_text(spec);
  };
  add_units("clients", client_rule_registry());
  add_units("server", server_rule_registry());
  add_units("attack", attack_registry());
  return defaults;
}

}  // namespace

std::string number_text(double value, int digits) {
  if (std::isnan(value)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table><tr>";
  for (const std::string& h : header) out += "<th>" + xml_escape(h) + "</th>";
  out += "</tr>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const std::string& cell : row) out += "<td>" + xml_escape(cell) + "</td>";
    out += "</tr>";
  }
  return out + "</table>";
}

// Every resolved key whose value is not its default (config.toml holds them all: docs/config.md).
std::string settings_section(const fs::path& dir) {
  const ExperimentConfig run = load_config((dir / "config.toml").string());
  const std::map<std::string, std::string> defaults = default_values();
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, value] : toml_values(config_to_toml(run))) {
    const auto found = defaults.find(key);
    if (found == defaults.end() || found->second != value)
      rows.push_back({key, value, found == defaults.end() ? "" : found->second});
  }
  return "<p>" + xml_escape(run.experiment.text("description")) + "</p>" +
         table({"setting", "this run", "default"}, rows);
}

nlohmann::json read_summary(const fs::path& dir) {
  try {
    return nlohmann::json::parse(read_text_file((dir / "summary.json").string()));
  } catch (const nlohmann::json::exception& e) {
    BASTION_FAIL((dir / "summary.json").string(), ": ", e.what());
  }
}

std::string without_xml_declaration(const std::string& svg) {
  return svg.rfind("<?xml", 0) == 0 ? svg.substr(svg.find('\n') + 1) : svg;
}

// One section: its body, or the error that stopped it (naming the file), so the other sections still render.
std::string section(const std::string& id, const std::string& heading, const std::function<std::string()>& body) {
  std::string content;
  try {
    content = body();
  } catch (const std::exception& e) {
    content = "<p class=\"missing\">Not shown: " + xml_escape(without_source_locations(e.what())) + "</p>";
  }
  return "<section id=\"" + id + "\"><h2>" + xml_escape(heading) + "</h2>" + content + "</section>\n";
}

// The document's head with the page's CSS, and the opened body.
std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + xml_escape(title) +
         "</title><style>body{font-family:Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;"
         "color:#222}table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:"
         "2px 8px;text-align:left;font-size:13px}th{background:#f2f2f2}.missing{color:#b00020}svg{"
         "display:block;margin:0.5em 0}</style></head><body>\n";
}

}  // namespace bastion::cli
