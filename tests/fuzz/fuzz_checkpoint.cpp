// libFuzzer target: the FL checkpoint reader (fl/core/checkpoint.h) on bytes in memory: the safetensors
// layer (parse_safetensors_bytes), then the checkpoint's own decoding (parse_checkpoint).
// Input: the whole file. bastion::Error is a correct answer; anything else is a bug.
// Properties of a successful load: writing the state back (checkpoint_file) and loading it again gives
// the same state, where the writer's one normalisation is that it skips empty client vectors (a pre-codec
// rule state comes back as the same float block, "legacy"); a second round trip is then byte-identical.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fl/core/checkpoint.h"
#include "tensor/error.h"
#include "tensor/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool same_double(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same_client(const bastion::ClientState& a, const bastion::ClientState& b) {
  std::map<std::string, std::vector<float>> non_empty;  // the writer drops empty vectors
  for (const auto& [name, values] : a.vectors)
    if (!values.empty()) non_empty[name] = values;
  if (non_empty.size() != b.vectors.size() || a.scalars.size() != b.scalars.size()) return false;
  for (const auto& [name, values] : non_empty) {
    const auto found = b.vectors.find(name);
    if (found == b.vectors.end() || !same_floats(values, found->second)) return false;
  }
  for (const auto& [name, value] : a.scalars) {
    const auto found = b.scalars.find(name);
    if (found == b.scalars.end() || !same_double(value, found->second)) return false;
  }
  return true;
}

// Block by block, bitwise (NaN payloads included): the codec stores every value exactly.
bool same_rule_state(const bastion::RuleState& a, const bastion::RuleState& b) {
  if (a.float_blocks().size() != b.float_blocks().size() || a.int_blocks() != b.int_blocks() ||
      a.real_blocks().size() != b.real_blocks().size())
    return false;
  for (const auto& [name, values] : a.float_blocks())
    if (!b.float_blocks().contains(name) || !same_floats(values, b.float_blocks().at(name))) return false;
  for (const auto& [name, values] : a.real_blocks()) {
    if (!b.real_blocks().contains(name)) return false;
    const std::vector<double>& other = b.real_blocks().at(name);
    if (other.size() != values.size() ||
        (!values.empty() && std::memcmp(values.data(), other.data(), values.size() * sizeof(double)) != 0))
      return false;
  }
  return true;
}

bool same_state(const bastion::CheckpointState& a, const bastion::CheckpointState& b) {
  if (a.round != b.round || a.seed != b.seed || a.config_toml != b.config_toml || !same_floats(a.global, b.global) ||
      !same_rule_state(a.server_state, b.server_state) || !same_rule_state(a.method_state, b.method_state) ||
      a.clients.size() != b.clients.size() || a.timings.size() != b.timings.size())
    return false;
  for (size_t c = 0; c < a.clients.size(); ++c)
    if (!same_client(a.clients[c], b.clients[c])) return false;
  for (size_t t = 0; t < a.timings.size(); ++t) {
    const bastion::RoundTiming &x = a.timings[t], &y = b.timings[t];
    if (x.round != y.round || !same_double(x.train_seconds, y.train_seconds) ||
        !same_double(x.aggregate_seconds, y.aggregate_seconds) || !same_double(x.eval_seconds, y.eval_seconds) ||
        !same_double(x.round_seconds, y.round_seconds) || !same_double(x.cpu_seconds, y.cpu_seconds))
      return false;
  }
  return bastion::rounds_csv(a.records) == bastion::rounds_csv(b.records) &&
         bastion::rounds_csv({a.pending}) == bastion::rounds_csv({b.pending});
}

bastion::CheckpointState reload(const bastion::CheckpointState& state, std::string& bytes) {
  bytes = bastion::safetensors_bytes(bastion::checkpoint_file(state), "rewritten");
  return bastion::parse_checkpoint(
      bastion::parse_safetensors_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "rewritten"),
      "rewritten");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bastion::CheckpointState state;
  try {
    state = bastion::parse_checkpoint(bastion::parse_safetensors_bytes(data, size, "fuzz.safetensors"), "fuzz");
  } catch (const bastion::Error&) {
    return 0;
  }
  std::string first, second;
  try {
    const bastion::CheckpointState again = reload(state, first);
    FUZZ_EXPECT(same_state(state, again));
    reload(again, second);
  } catch (const bastion::Error& e) {
    std::fprintf(stderr, "round trip failed: %s\n", e.what());
    FUZZ_EXPECT(false);
  }
  FUZZ_EXPECT(first == second);
  return 0;
}
