// libFuzzer target: the WISDM parsers (data/wisdm.h).
// Input: byte 0 picks the parser (bit 0: 0 raw text, 1 ARFF) and, for raw, the window
// (1 + (byte0 / 2) % 16: small windows so short inputs reach the windowing code); the rest is the text.
// bastion::Error is a correct answer; anything else is a bug.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/wisdm.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void check_dataset(const bastion::Dataset& d) {
  FUZZ_EXPECT(d.size() > 0);
  FUZZ_EXPECT(static_cast<int64_t>(d.values.size()) == d.size() * d.sample_numel());
  FUZZ_EXPECT(d.groups.size() == d.labels.size());
  for (int32_t y : d.labels) FUZZ_EXPECT(0 <= y && y < d.num_classes);
  for (int32_t g : d.groups) FUZZ_EXPECT(g >= 0);
  for (float v : d.values) FUZZ_EXPECT(std::isfinite(v));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] & 1) {
      const bastion::WisdmParsed p = bastion::parse_wisdm_arff_text(text, "fuzz.arff");
      FUZZ_EXPECT(p.data.width == bastion::kWisdmFeatureCount && p.stats.records == p.data.size());
      check_dataset(p.data);
    } else {
      const int64_t window = 1 + (data[0] / 2) % 16;
      const bastion::WisdmParsed p = bastion::parse_wisdm_raw_text(text, "fuzz.txt", window);
      FUZZ_EXPECT(p.data.channels == 3 && p.data.width == window);
      FUZZ_EXPECT(p.stats.records == p.data.size() * window + p.stats.dropped_samples);
      check_dataset(p.data);
    }
  } catch (const bastion::Error&) {
  }
  return 0;
}
