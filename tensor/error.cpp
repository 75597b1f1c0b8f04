#include "tensor/error.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace bastion {

namespace {
bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "path/file.cpp:123" (what throw_error writes between the brackets)?
bool is_source_location(const std::string& inside) {
  if (inside.find('[') != std::string::npos) return false;  // "[0, 2000) [file.cpp:9]": not this bracket
  const size_t colon = inside.rfind(':');
  if (colon == std::string::npos || colon + 1 == inside.size()) return false;
  const bool digits = std::all_of(inside.begin() + static_cast<std::ptrdiff_t>(colon) + 1, inside.end(),
                                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
  const std::string file = inside.substr(0, colon);
  return digits &&
         (ends_with(file, ".cpp") || ends_with(file, ".h") || ends_with(file, ".cu") || ends_with(file, ".hpp"));
}
}  // namespace

std::string without_source_locations(const std::string& message) {
  std::string out;
  for (size_t i = 0; i < message.size();) {
    const size_t close = message.compare(i, 2, " [") == 0 ? message.find(']', i) : std::string::npos;
    if (close != std::string::npos && is_source_location(message.substr(i + 2, close - i - 2))) {
      i = close + 1;
      continue;
    }
    out += message[i++];
  }
  return out;
}

std::string message_for_user(const std::string& message) {
  const char* debug = std::getenv("BASTION_DEBUG");
  const bool locations = debug != nullptr && std::string(debug) == "1";
  return locations ? message : without_source_locations(message);
}

}  // namespace bastion
