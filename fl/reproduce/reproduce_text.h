// Text helpers shared by `bastion reproduce`'s runner (fl/reproduce/reproduce.cpp: progress lines, provenance)
// and its table writers (fl/reproduce/reproduce_tables.cpp). Internal to those two files.
#pragma once

#include <cmath>
#include <ctime>
#include <string>

#include "fl/metrics/results.h"

namespace bastion::reproduce_text {

// Numbers in table.md/csv/svg go through fixed_text (std::to_chars), never printf: a process locale that
// writes "0,81" must not change the files. "–" for a missing number.
inline std::string fixed(double value, int digits) { return std::isnan(value) ? "–" : fixed_text(value, digits); }

inline std::string signed_fixed(double value, int digits) {
  if (std::isnan(value) || value < 0) return fixed(value, digits);
  std::string text = "+";  // appended: GCC 12's -Wrestrict false positive on "+" + std::string
  return text.append(fixed_text(value, digits));
}

inline std::string today() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&now));
  return text;
}

inline std::string or_unknown(const std::string& text) { return text.empty() ? "unknown" : text; }

inline std::string minutes(double seconds) { return fixed(seconds / 60.0, 1) + " min"; }

}  // namespace bastion::reproduce_text
