// libFuzzer target: the experiment config through the whole validator (fl/core/config.h parse_config).
// Input: the TOML text up to the first NUL byte; every later NUL-separated piece is a `--set` override
// (TOML text cannot hold a NUL, so the split loses nothing). bastion::Error is a correct answer; a crash,
// a sanitizer report, any other exception or an allocation over libFuzzer's limit is a bug.
// Property of a valid config: config_to_toml gives text that parses (without overrides) to an equal
// config, and that config prints to the same text (the resolved config in a checkpoint relies on both).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fl/core/config.h"
#include "tensor/error.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Equality value by value (ExperimentConfig has no operator==; nothing else needs one). Validated values
// are never NaN (Params rejects non-finite numbers), so the variant's == is exact.
bool same_config(const bastion::ExperimentConfig& a, const bastion::ExperimentConfig& b) {
  const auto same = [](const bastion::Params& x, const bastion::Params& y) {
    return x.scope() == y.scope() && x.values() == y.values();
  };
  if (a.attacks.size() != b.attacks.size()) return false;
  for (size_t i = 0; i < a.attacks.size(); ++i)
    if (a.attacks[i].first != b.attacks[i].first || !same(a.attacks[i].second, b.attacks[i].second)) return false;
  return same(a.experiment, b.experiment) && same(a.data, b.data) && same(a.model, b.model) &&
         same(a.clients, b.clients) && same(a.server, b.server) && same(a.attack, b.attack) && same(a.eval, b.eval) &&
         same(a.post, b.post) && same(a.run, b.run) && same(a.client_rule, b.client_rule) &&
         same(a.server_rule, b.server_rule) && same(a.server_inner_rule, b.server_inner_rule);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> pieces;
  for (size_t start = 0;;) {
    const size_t nul = input.find('\0', start);
    pieces.push_back(input.substr(start, nul == std::string::npos ? std::string::npos : nul - start));
    if (nul == std::string::npos) break;
    start = nul + 1;
  }
  const std::vector<std::string> overrides(pieces.begin() + 1, pieces.end());
  bastion::ExperimentConfig config;
  try {
    config = bastion::parse_config(pieces[0], "fuzz.toml", overrides);
  } catch (const bastion::Error&) {
    return 0;
  }
  const std::string text = bastion::config_to_toml(config);
  bastion::ExperimentConfig again;
  try {
    again = bastion::parse_config(text, "resolved.toml");
  } catch (const bastion::Error& e) {
    std::fprintf(stderr, "resolved config does not parse: %s\n%s\n", e.what(), text.c_str());
    FUZZ_EXPECT(false);
  }
  FUZZ_EXPECT(same_config(config, again));
  FUZZ_EXPECT(bastion::config_to_toml(again) == text);
  return 0;
}
