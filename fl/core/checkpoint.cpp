#include "fl/core/checkpoint.h"

#include <algorithm>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <zlib.h>

#include "fl/core/config.h"
#include "tensor/error.h"
#include "tensor/safetensors.h"

namespace bastion {

namespace {
constexpr const char* kFormat = "bastion-fl-checkpoint-1";
// CRC-32 (zlib) of everything else in the file but the wall-time table ("timing"), as 8 hex digits: what a
// resumed run computes from is covered, and two checkpoints of the same rounds (an interrupted and an
// uninterrupted run's) stay byte-identical outside their wall times (scripts/crash_test.sh compares them
// so). A checkpoint written before the checksum existed has none and is read unchecked.
constexpr const char* kChecksumKey = "payload_crc32";

uLong crc_of(uLong crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // crc32 takes a uInt length: feed large tensors in pieces
    const uInt piece = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, piece);
    p += piece;
    bytes -= piece;
  }
  return crc;
}

// The payload in a fixed order: metadata (sorted, the checksum entry left out), then each F32 and I64
// tensor's name and values in file order (the timing table left out). Each text is followed by its NUL, so "ab"+"c" != "a"+"bc".
std::string payload_checksum(const SafetensorsFile& file) {
  uLong crc = crc32(0L, Z_NULL, 0);
  auto text = [&](const std::string& t) { crc = crc_of(crc, t.c_str(), t.size() + 1); };
  for (const auto& [key, value] : file.metadata) {
    if (key == kChecksumKey) continue;
    text(key);
    text(value);
  }
  for (const auto& [name, tensor] : file.f32) {
    if (name == "timing") continue;  // an older file's F32 wall-time table
    text(name);
    crc = crc_of(crc, tensor.data(), static_cast<size_t>(tensor.numel()) * sizeof(float));
  }
  for (const auto& [name, entry] : file.i64) {
    if (name == "timing") continue;
    text(name);
    crc = crc_of(crc, entry.second.data(), entry.second.size() * sizeof(int64_t));
  }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc & 0xffffffffUL));
  return hex;
}

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

// A number in a metadata entry: the whole text must parse (std::stoll would take "12abc" as 12 and throw
// std::invalid_argument on "abc", which is not a bastion::Error).
template <typename T>
T parse_number(const std::string& text, const std::string& what, const std::string& path) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  BASTION_CHECK(!text.empty() && error == std::errc() && end == text.data() + text.size(), "checkpoint ", path, ": ",
                what, " is '", text, "', expected a number");
  return value;
}

template <typename T>
T metadata_number(const SafetensorsFile& file, const std::string& key, const std::string& path) {
  return parse_number<T>(metadata(file, key, path), "metadata entry '" + key + "'", path);
}

// The client count, bounded by data.clients' own limit: a corrupt count must not allocate millions of
// client states before the run compares it with its config.
size_t client_count(const SafetensorsFile& file, const std::string& path) {
  const uint64_t count = metadata_number<uint64_t>(file, "clients", path);
  double limit = 0;
  for (const auto& [section, specs] : config_sections())
    for (const ParamSpec& spec : specs)
      if (section == "data" && spec.name == "clients") limit = spec.max;
  BASTION_CHECK(static_cast<double>(count) <= limit, "checkpoint ", path, ": metadata entry 'clients' is ", count,
                ", more than data.clients allows (", limit, ")");
  return static_cast<size_t>(count);
}

// "client.<id>.<name>" -> (id, name); false for keys of other entries. A "client." key whose id is not a
// client of this checkpoint is an error (the writer never produces one).
bool split_client_key(const std::string& key, size_t clients, size_t& id, std::string& name, const std::string& path) {
  if (key.rfind("client.", 0) != 0) return false;
  const size_t dot = key.find('.', 7);
  BASTION_CHECK(dot != std::string::npos, "checkpoint ", path, ": '", key, "' is not client.<id>.<name>");
  id = parse_number<size_t>(key.substr(7, dot - 7), "the client id of '" + key + "'", path);
  BASTION_CHECK(id < clients, "checkpoint ", path, ": '", key, "' names a client outside [0, ", clients, ")");
  name = key.substr(dot + 1);
  return true;
}

// A rule state's blocks (fl/base/rule_state.h) as entries "<owner>.<block>": float32 blocks F32, int64
// blocks I64, float64 blocks I64 bit patterns. Metadata "<owner>_version" holds the codec's version and
// "<owner>_blocks" every block as "name:f32|i64|f64", comma-separated: an empty block is listed but has no
// entry (a tensor of 0 values shares its data offset with the next one, which makes the file's order of
// entries, and so its checksum, ambiguous).
void add_rule_state(SafetensorsFile& file, const std::string& owner, const RuleState& state) {
  if (state.empty()) return;
  std::string listed;
  const auto list = [&](const std::string& name, const char* type) {
    listed += (listed.empty() ? "" : ",") + name + ":" + type;
  };
  const auto add_i64 = [&](const std::string& name, std::vector<int64_t> values) {
    if (!values.empty())
      file.i64.emplace_back(owner + "." + name,
                            std::make_pair(Shape{static_cast<int64_t>(values.size())}, std::move(values)));
  };
  for (const auto& [name, values] : state.float_blocks()) {
    list(name, "f32");
    if (!values.empty()) file.f32.emplace_back(owner + "." + name, vector_tensor(values));
  }
  for (const auto& [name, values] : state.int_blocks()) list(name, "i64"), add_i64(name, values);
  for (const auto& [name, values] : state.real_blocks()) {
    list(name, "f64");
    std::vector<int64_t> bits;
    for (double v : values) bits.push_back(std::bit_cast<int64_t>(v));
    add_i64(name, std::move(bits));
  }
  file.metadata[owner + "_version"] = std::to_string(kRuleStateVersion);
  file.metadata[owner + "_blocks"] = listed;
}

// The blocks add_rule_state wrote, or a checkpoint's older single F32 "<owner>" entry as the legacy block.
RuleState load_rule_state(const SafetensorsFile& file, const std::string& owner, const std::string& path) {
  const std::string who = owner == "server_state" ? "server rule" : "method server";  // in errors
  if (const Tensor* legacy = file.find(owner)) return RuleState::from_legacy(legacy->to_vector(), who);
  RuleState state(who);
  if (!file.metadata.contains(owner + "_blocks")) return state;
  BASTION_CHECK(metadata(file, owner + "_version", path) == std::to_string(kRuleStateVersion), "checkpoint ", path,
                ": ", owner, " was written by rule-state codec version ", metadata(file, owner + "_version", path),
                ", this build reads version ", kRuleStateVersion);
  std::map<std::string, const Tensor*> f32;
  std::map<std::string, const std::vector<int64_t>*> i64;
  for (const auto& [key, tensor] : file.f32) f32[key] = &tensor;
  for (const auto& [key, entry] : file.i64) i64[key] = &entry.second;
  size_t found = 0;
  std::string listed = metadata(file, owner + "_blocks", path);
  for (size_t at = 0; at < listed.size();) {
    const size_t comma = std::min(listed.find(',', at), listed.size()), colon = listed.find(':', at);
    BASTION_CHECK(colon < comma, "checkpoint ", path, ": ", owner, "_blocks entry '", listed.substr(at, comma - at),
                  "' is not name:type");
    const std::string name = listed.substr(at, colon - at), type = listed.substr(colon + 1, comma - colon - 1);
    const std::string key = owner + "." + name;
    found += f32.contains(key) + i64.contains(key);
    if (type == "f32") {
      state.put_floats(name, f32.contains(key) ? f32[key]->to_vector() : std::vector<float>{});
    } else if (type == "i64") {
      state.put_ints(name, i64.contains(key) ? *i64[key] : std::vector<int64_t>{});
    } else {
      BASTION_CHECK(type == "f64", "checkpoint ", path, ": ", owner, " block '", name, "' has type '", type, "'");
      std::vector<double> values;
      if (i64.contains(key))
        for (int64_t bits : *i64[key]) values.push_back(std::bit_cast<double>(bits));
      state.put_reals(name, std::move(values));
    }
    at = comma + 1;
  }
  size_t entries = 0;
  for (const auto& [key, tensor] : file.f32) entries += key.rfind(owner + ".", 0) == 0;
  for (const auto& [key, entry] : file.i64) entries += key.rfind(owner + ".", 0) == 0;
  BASTION_CHECK(entries == found, "checkpoint ", path, ": ", entries - found, " ", owner, " entries are not in ", owner,
                "_blocks");
  return state;
}

// The timings as the bit patterns of their doubles, (rounds, 6): the float32 tensor written before kept
// 7 significant digits, so the summary.json of a resumed run gave another seconds_per_round. The sixth
// column (cpu_s) came later: older files have (rounds, 5), read with cpu_s unmeasured.
constexpr int64_t kTimingColumns = 6, kTimingColumnsWithoutCpu = 5;
std::pair<Shape, std::vector<int64_t>> timing_bits(const std::vector<RoundTiming>& timings) {
  std::vector<int64_t> bits;
  for (const RoundTiming& t : timings)
    for (double value : {static_cast<double>(t.round), t.train_seconds, t.aggregate_seconds, t.eval_seconds,
                         t.round_seconds, t.cpu_seconds})
      bits.push_back(std::bit_cast<int64_t>(value));
  return {Shape{static_cast<int64_t>(timings.size()), kTimingColumns}, bits};
}

// From the I64 "timing" entry, or from the F32 one of checkpoints written before it (rounded then). The
// round column goes back to an integer, so it must hold one.
std::vector<RoundTiming> load_timings(const SafetensorsFile& file, const std::string& path) {
  std::vector<double> t;
  int64_t columns = kTimingColumnsWithoutCpu;
  for (const auto& [name, entry] : file.i64) {
    if (name != "timing") continue;
    const Shape& shape = entry.first;
    if (shape.rank() == 2) columns = shape[1];
    for (int64_t bits : entry.second) t.push_back(std::bit_cast<double>(bits));
  }
  if (const Tensor* old = file.find("timing"))
    for (float value : old->to_vector()) t.push_back(value);
  BASTION_CHECK(columns == kTimingColumns || columns == kTimingColumnsWithoutCpu, "checkpoint ", path,
                ": tensor 'timing' has ", columns, " columns, expected ", kTimingColumns, " (or ",
                kTimingColumnsWithoutCpu, ")");
  const size_t width = static_cast<size_t>(columns);
  BASTION_CHECK(t.size() % width == 0, "checkpoint ", path, ": tensor 'timing' holds ", t.size(), " values, expected ",
                width, " per round");
  std::vector<RoundTiming> timings;
  for (size_t r = 0; r < t.size(); r += width) {
    BASTION_CHECK(std::isfinite(t[r]) && t[r] == std::trunc(t[r]) && std::abs(t[r]) < 9.2e18, "checkpoint ", path,
                  ": tensor 'timing' row ", r / width, " has round ", t[r], ", expected an integer");
    const double cpu = width == static_cast<size_t>(kTimingColumns) ? t[r + 5] : kNoValue;
    timings.push_back({static_cast<int64_t>(t[r]), t[r + 1], t[r + 2], t[r + 3], t[r + 4], cpu});
  }
  return timings;
}
// The I64 "client_flags" entry: one 0/1 per client; absent (older files) gives an empty vector.
std::vector<uint8_t> load_client_flags(const SafetensorsFile& file, size_t clients, const std::string& path) {
  std::vector<uint8_t> flags;
  for (const auto& [name, entry] : file.i64) {
    if (name != "client_flags") continue;
    BASTION_CHECK(entry.second.size() == clients, "checkpoint ", path, ": 'client_flags' holds ", entry.second.size(),
                  " values for ", clients, " clients");
    for (int64_t flag : entry.second) {
      BASTION_CHECK(flag == 0 || flag == 1, "checkpoint ", path, ": 'client_flags' holds ", flag, ", expected 0 or 1");
      flags.push_back(static_cast<uint8_t>(flag));
    }
  }
  return flags;
}
}  // namespace

SafetensorsFile checkpoint_file(const CheckpointState& state) {
  SafetensorsFile file;
  file.metadata = {{"format", kFormat},
                   {"round", std::to_string(state.round)},
                   {"seed", std::to_string(state.seed)},
                   {"config", state.config_toml},
                   {"rounds_csv", rounds_csv(state.records)},
                   {"pending_csv", rounds_csv({state.pending})},
                   {"clients", std::to_string(state.clients.size())}};
  file.f32.emplace_back("global", vector_tensor(state.global));
  add_rule_state(file, "server_state", state.server_state);
  add_rule_state(file, "method_state", state.method_state);
  for (size_t c = 0; c < state.clients.size(); ++c) {
    const std::string prefix = "client." + std::to_string(c) + ".";
    for (const auto& [name, values] : state.clients[c].vectors)
      if (!values.empty()) file.f32.emplace_back(prefix + name, vector_tensor(values));
    for (const auto& [name, value] : state.clients[c].scalars) file.metadata[prefix + name] = exact_double(value);
  }
  if (!state.timings.empty()) file.i64.emplace_back("timing", timing_bits(state.timings));
  if (!state.client_flags.empty()) {
    const std::vector<int64_t> flags(state.client_flags.begin(), state.client_flags.end());
    file.i64.emplace_back("client_flags", std::make_pair(Shape{static_cast<int64_t>(flags.size())}, flags));
  }
  file.metadata[kChecksumKey] = payload_checksum(file);
  return file;
}

void save_checkpoint(const std::string& path, const CheckpointState& state) {
  save_safetensors(path, checkpoint_file(state));
}

namespace {
// What a checkpoint says of itself must agree before anything is resumed from it (issue 42 item 5: a round
// that disagreed with the stored rows made --resume duplicate rows; NaN weights made every later upload be
// rejected while the run exited 0): rows of evaluated rounds in increasing order, none after the
// checkpoint's round; one timing row per round 1..round; a finite global model.
void check_consistent(const CheckpointState& state, const std::string& path) {
  BASTION_CHECK(state.round >= 0, "checkpoint ", path, ": round ", state.round, " is negative");
  int64_t previous = 0;
  for (const RoundRecord& r : state.records) {
    BASTION_CHECK(r.round > previous && r.round <= state.round, "checkpoint ", path, ": it is from round ", state.round,
                  " but holds a row for round ", r.round, (r.round <= previous ? " out of order" : ""),
                  ": the file is inconsistent, resume from an earlier copy or start again with --overwrite");
    previous = r.round;
  }
  BASTION_CHECK(state.timings.empty() || static_cast<int64_t>(state.timings.size()) == state.round, "checkpoint ", path,
                ": it is from round ", state.round, " but times ", state.timings.size(), " rounds");
  for (size_t i = 0; i < state.timings.size(); ++i)
    BASTION_CHECK(state.timings[i].round == static_cast<int64_t>(i) + 1, "checkpoint ", path, ": timing row ", i + 1,
                  " is for round ", state.timings[i].round);
  const auto bad = std::find_if(state.global.begin(), state.global.end(), [](float v) { return !std::isfinite(v); });
  BASTION_CHECK(bad == state.global.end(), "checkpoint ", path, ": the global model holds a non-finite value (", *bad,
                " at ", bad - state.global.begin(),
                "): the file is corrupt, resume from an earlier copy or "
                "start again with --overwrite");
}
}  // namespace

CheckpointState load_checkpoint(const std::string& path) { return parse_checkpoint(load_safetensors(path), path); }

CheckpointState parse_checkpoint(const SafetensorsFile& file, const std::string& path) {
  BASTION_CHECK(metadata(file, "format", path) == kFormat, "checkpoint ", path, ": format '",
                metadata(file, "format", path), "', expected ", kFormat);
  // A flipped bit in a weight passes every other check (a finite value, the right shapes): the checksum
  // catches it before anything is resumed from the file.
  if (const auto stored = file.metadata.find(kChecksumKey); stored != file.metadata.end())
    BASTION_CHECK(stored->second == payload_checksum(file), "checkpoint ", path,
                  ": its contents do not match its "
                  "checksum (",
                  stored->second,
                  "): the file is damaged, resume from an earlier copy or start again "
                  "with --overwrite");
  CheckpointState state;
  state.round = metadata_number<int64_t>(file, "round", path);
  state.seed = metadata_number<uint64_t>(file, "seed", path);
  state.config_toml = metadata(file, "config", path);
  state.records = parse_rounds_csv(metadata(file, "rounds_csv", path));
  const std::vector<RoundRecord> pending = parse_rounds_csv(metadata(file, "pending_csv", path));
  BASTION_CHECK(pending.size() == 1, "checkpoint ", path, ": pending_csv holds ", pending.size(), " rows, expected 1");
  state.pending = pending[0];
  state.clients.resize(client_count(file, path));
  const Tensor* global = file.find("global");
  BASTION_CHECK(global != nullptr, "checkpoint ", path, ": tensor 'global' is missing");
  state.global = global->to_vector();
  state.server_state = load_rule_state(file, "server_state", path);
  state.method_state = load_rule_state(file, "method_state", path);
  size_t id = 0;
  std::string name;
  for (const auto& [key, tensor] : file.f32)
    if (split_client_key(key, state.clients.size(), id, name, path))
      state.clients[id].vectors[name] = tensor.to_vector();
  for (const auto& [key, value] : file.metadata)
    if (split_client_key(key, state.clients.size(), id, name, path))
      state.clients[id].scalars[name] = parse_number<double>(value, "metadata entry '" + key + "'", path);
  state.timings = load_timings(file, path);
  state.client_flags = load_client_flags(file, state.clients.size(), path);
  check_consistent(state, path);
  return state;
}

}  // namespace bastion
