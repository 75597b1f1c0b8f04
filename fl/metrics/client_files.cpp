// The per-client results files: client_notes.csv, clients.csv and partition.csv (fl/metrics/results.h has their
// formats), written by the run loop and read back on --resume.
#include <algorithm>
#include <charconv>
#include <numeric>
#include <sstream>

#include "fl/metrics/results.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr const char* kClientNotesHeader = "round,client,note";
constexpr const char* kClientsHeader = "round,client,sampled,malicious,flagged,p_acc,p_asr,samples";

int64_t csv_integer(const char* file, const std::string& cell, const std::string& line) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  BASTION_CHECK(!cell.empty() && error == std::errc() && end == cell.data() + cell.size(), file, ": '", cell,
                "' is not an integer in row '", line, "'");
  return value;
}

int64_t note_integer(const std::string& cell, const std::string& line) {
  return csv_integer("client_notes.csv", cell, line);
}

// An empty cell is NaN (fixed_text's "not applicable"); parsed without the C locale.
double csv_real(const char* file, const std::string& cell, const std::string& line) {
  if (cell.empty()) return kNoValue;
  double value = 0.0;
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  BASTION_CHECK(error == std::errc() && end == cell.data() + cell.size(), file, ": '", cell,
                "' is not a number in row '", line, "'");
  return value;
}
}  // namespace

std::string client_notes_csv(const std::vector<ClientNote>& notes) {
  std::string out = std::string(kClientNotesHeader) + '\n';
  for (const ClientNote& n : notes) {
    BASTION_CHECK(n.text.find_first_of(",\"\n\r") == std::string::npos, "client note '", n.text,
                  "' holds a comma, quote or line break");
    out += join_row({std::to_string(n.round), std::to_string(n.client), n.text});
  }
  return out;
}

std::vector<ClientNote> parse_client_notes_csv(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  BASTION_CHECK(std::getline(in, line) && line == kClientNotesHeader, "client_notes.csv: header '", line,
                "', expected '", kClientNotesHeader, "'");
  std::vector<ClientNote> notes;
  while (std::getline(in, line)) {
    const size_t first = line.find(','), second = first == std::string::npos ? first : line.find(',', first + 1);
    BASTION_CHECK(second != std::string::npos, "client_notes.csv: malformed row '", line, "'");
    ClientNote note;
    note.round = note_integer(line.substr(0, first), line);
    note.client = note_integer(line.substr(first + 1, second - first - 1), line);
    note.text = line.substr(second + 1);
    notes.push_back(std::move(note));
  }
  return notes;
}

std::string clients_csv(const std::vector<ClientRow>& rows) {
  std::string out = std::string(kClientsHeader) + '\n';
  for (const ClientRow& r : rows)
    out += join_row({std::to_string(r.round), std::to_string(r.client), r.sampled ? "1" : "0", r.malicious ? "1" : "0",
                     r.flagged ? "1" : "0", fixed_text(r.p_acc, 6), fixed_text(r.p_asr, 6), std::to_string(r.samples)});
  return out;
}

std::vector<ClientRow> parse_clients_csv(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  BASTION_CHECK(std::getline(in, line) && line == kClientsHeader, "clients.csv: header '", line, "', expected '",
                kClientsHeader, "'");
  std::vector<ClientRow> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    BASTION_CHECK(cells.size() == 8, "clients.csv: malformed row '", line, "'");
    auto flag = [&](const std::string& cell) {
      BASTION_CHECK(cell == "0" || cell == "1", "clients.csv: malformed row '", line, "'");
      return cell == "1";
    };
    const char* file = "clients.csv";
    rows.push_back({csv_integer(file, cells[0], line), csv_integer(file, cells[1], line), flag(cells[2]),
                    flag(cells[3]), flag(cells[4]), csv_real(file, cells[5], line), csv_real(file, cells[6], line),
                    csv_integer(file, cells[7], line)});
  }
  return rows;
}

std::string partition_csv(const std::vector<std::vector<int64_t>>& class_counts, const std::vector<int64_t>& test_sizes,
                          const std::vector<int64_t>& malicious_clients) {
  BASTION_CHECK(class_counts.size() == test_sizes.size(), "partition_csv: ", class_counts.size(), " clients with ",
                test_sizes.size(), " test sizes");
  const size_t classes = class_counts.empty() ? 0 : class_counts[0].size();
  std::ostringstream csv;
  csv << "client,size,test_size,malicious";
  for (size_t c = 0; c < classes; ++c) csv << ",class_" << c;
  csv << "\n";
  for (size_t i = 0; i < class_counts.size(); ++i) {
    const std::vector<int64_t>& counts = class_counts[i];
    const bool malicious = std::find(malicious_clients.begin(), malicious_clients.end(), static_cast<int64_t>(i)) !=
                           malicious_clients.end();
    csv << i << "," << std::accumulate(counts.begin(), counts.end(), int64_t{0}) << "," << test_sizes[i] << ","
        << (malicious ? 1 : 0);
    for (int64_t count : counts) csv << "," << count;
    csv << "\n";
  }
  return csv.str();
}

}  // namespace bastion
