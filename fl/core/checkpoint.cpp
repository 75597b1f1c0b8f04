#include "fl/core/checkpoint.h"

#include <bit>
#include <cstdio>
#include <cstdlib>

#include "tensor/error.h"
#include "tensor/safetensors.h"

namespace bastion {

namespace {
constexpr const char* kFormat = "bastion-fl-checkpoint-1";

Tensor vector_tensor(const std::vector<float>& values) {
  return Tensor::from_vector(Shape{static_cast<int64_t>(values.size())}, values);
}

std::string exact_double(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

const std::string& metadata(const SafetensorsFile& file, const std::string& key, const std::string& path) {
  const auto found = file.metadata.find(key);
  BASTION_CHECK(found != file.metadata.end(), "checkpoint ", path, ": metadata entry '", key, "' is missing");
  return found->second;
}

// "client.<id>.<name>" -> (id, name); false for other keys.
bool split_client_key(const std::string& key, int64_t& id, std::string& name) {
  if (key.rfind("client.", 0) != 0) return false;
  const size_t dot = key.find('.', 7);
  if (dot == std::string::npos) return false;
  id = std::strtoll(key.c_str() + 7, nullptr, 10);
  name = key.substr(dot + 1);
  return true;
}
// The timings as the bit patterns of their doubles, (rounds, 5): the float32 tensor written before kept
// 7 significant digits, so the summary.json of a resumed run gave another seconds_per_round.
std::pair<Shape, std::vector<int64_t>> timing_bits(const std::vector<RoundTiming>& timings) {
  std::vector<int64_t> bits;
  for (const RoundTiming& t : timings)
    for (double value : {static_cast<double>(t.round), t.train_seconds, t.aggregate_seconds, t.eval_seconds,
                         t.round_seconds})
      bits.push_back(std::bit_cast<int64_t>(value));
  return {Shape{static_cast<int64_t>(timings.size()), 5}, bits};
}

// From the I64 "timing" entry, or from the F32 one of checkpoints written before it (rounded then).
std::vector<RoundTiming> load_timings(const SafetensorsFile& file) {
  std::vector<double> t;
  for (const auto& [name, entry] : file.i64)
    if (name == "timing")
      for (int64_t bits : entry.second) t.push_back(std::bit_cast<double>(bits));
  if (const Tensor* old = file.find("timing"))
    for (float value : old->to_vector()) t.push_back(value);
  std::vector<RoundTiming> timings;
  for (size_t r = 0; r + 4 < t.size(); r += 5)
    timings.push_back({static_cast<int64_t>(t[r]), t[r + 1], t[r + 2], t[r + 3], t[r + 4]});
  return timings;
}

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointState& state) {
  SafetensorsFile file;
  file.metadata = {{"format", kFormat},
                   {"round", std::to_string(state.round)},
                   {"seed", std::to_string(state.seed)},
                   {"config", state.config_toml},
                   {"rounds_csv", rounds_csv(state.records)},
                   {"pending_csv", rounds_csv({state.pending})},
                   {"clients", std::to_string(state.clients.size())}};
  file.f32.emplace_back("global", vector_tensor(state.global));
  if (!state.server_state.empty()) file.f32.emplace_back("server_state", vector_tensor(state.server_state));
  if (!state.method_state.empty()) file.f32.emplace_back("method_state", vector_tensor(state.method_state));
  for (size_t c = 0; c < state.clients.size(); ++c) {
    const std::string prefix = "client." + std::to_string(c) + ".";
    for (const auto& [name, values] : state.clients[c].vectors)
      if (!values.empty()) file.f32.emplace_back(prefix + name, vector_tensor(values));
    for (const auto& [name, value] : state.clients[c].scalars) file.metadata[prefix + name] = exact_double(value);
  }
  if (!state.timings.empty()) file.i64.emplace_back("timing", timing_bits(state.timings));
  save_safetensors(path, file);
}

CheckpointState load_checkpoint(const std::string& path) {
  const SafetensorsFile file = load_safetensors(path);
  BASTION_CHECK(metadata(file, "format", path) == kFormat, "checkpoint ", path, ": format '",
                metadata(file, "format", path), "', expected ", kFormat);
  CheckpointState state;
  state.round = std::stoll(metadata(file, "round", path));
  state.seed = std::stoull(metadata(file, "seed", path));
  state.config_toml = metadata(file, "config", path);
  state.records = parse_rounds_csv(metadata(file, "rounds_csv", path));
  const std::vector<RoundRecord> pending = parse_rounds_csv(metadata(file, "pending_csv", path));
  BASTION_CHECK(pending.size() == 1, "checkpoint ", path, ": pending_csv holds ", pending.size(), " rows, expected 1");
  state.pending = pending[0];
  state.clients.resize(std::stoull(metadata(file, "clients", path)));
  const Tensor* global = file.find("global");
  BASTION_CHECK(global != nullptr, "checkpoint ", path, ": tensor 'global' is missing");
  state.global = global->to_vector();
  if (const Tensor* server = file.find("server_state")) state.server_state = server->to_vector();
  if (const Tensor* method = file.find("method_state")) state.method_state = method->to_vector();
  int64_t id = 0;
  std::string name;
  for (const auto& [key, tensor] : file.f32) {
    if (!split_client_key(key, id, name)) continue;
    BASTION_CHECK(id >= 0 && id < static_cast<int64_t>(state.clients.size()), "checkpoint ", path, ": '", key,
                  "' names a client outside [0, ", state.clients.size(), ")");
    state.clients[id].vectors[name] = tensor.to_vector();
  }
  for (const auto& [key, value] : file.metadata)
    if (split_client_key(key, id, name) && id >= 0 && id < static_cast<int64_t>(state.clients.size()))
      state.clients[id].scalars[name] = std::strtod(value.c_str(), nullptr);
  state.timings = load_timings(file);
  return state;
}

}  // namespace bastion
