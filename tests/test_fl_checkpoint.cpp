// fl/core/checkpoint: the in-memory halves (checkpoint_file / parse_checkpoint) round-trip a state, and
// a corrupt checkpoint is a bastion::Error, never another exception, undefined behaviour or a huge
// allocation. The corrupt inputs are the kinds fuzz_checkpoint produced (see tests/fuzz/crashes/README.md).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>

#include "fl/core/checkpoint.h"
#include "tensor/safetensors.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;

CheckpointState small_state() {
  CheckpointState s;
  s.round = 2;
  s.seed = 7;
  s.config_toml = "rounds = 4\n";
  s.global = {0.5f, -1.0f, 2.0f};
  s.method_state.put_floats("duals", {3.0f});
  s.method_state.put_floats("none_yet", {});                    // an empty block stays a block
  s.method_state.put_ints("ids", {5, (int64_t{1} << 40) + 1});  // beyond 2^24: exact as int64
  s.method_state.put_reals("weights", {0.1, 1.0 / 3.0});        // float64, exact
  s.clients.resize(2);
  s.clients[1].vectors["momentum"] = {0.25f, 0.5f};
  s.clients[0].scalars["lambda"] = 0.1;
  s.records.resize(1);
  s.records[0].round = 2;
  s.records[0].acc = 0.5;
  s.pending.round = 3;
  s.timings = {{1, 0.5, 0.25, 0.125, 1.0, 0.75}, {2, 0.5, 0.25, 0.125, 1.0}};  // round 2: cpu_s not measured
  return s;
}

// The state written to bytes and parsed back, as load_checkpoint does with a file.
CheckpointState through_bytes(const SafetensorsFile& file) {
  const std::string bytes = safetensors_bytes(file);
  return parse_checkpoint(parse_safetensors_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "ck"),
                          "ck");
}

// A file edited after checkpoint_file, as the corruption tests below do, also fails its checksum first;
// without one (a checkpoint written before checksums existed) the later checks are what stops it.
SafetensorsFile without_checksum(SafetensorsFile file) {
  file.metadata.erase("payload_crc32");
  return file;
}

// Issue 42: a flipped bit in a weight passed every check (finite, the right shapes). The payload's CRC-32
// catches it, or any changed metadata entry; a checkpoint without the entry (older files) still loads.
TEST(FlCheckpoint, AChangedPayloadFailsItsChecksum) {
  SafetensorsFile file = checkpoint_file(small_state());
  ASSERT_EQ(file.metadata.at("payload_crc32").size(), 8u);
  for (auto& [name, tensor] : file.f32)
    if (name == "global") tensor.data()[1] = std::bit_cast<float>(std::bit_cast<uint32_t>(tensor.data()[1]) ^ 1u);
  expect_error([&] { through_bytes(file); }, {"checkpoint ck", "do not match its checksum", "--overwrite"});
  SafetensorsFile edited = checkpoint_file(small_state());
  edited.metadata["config"] = "rounds = 5\n";
  expect_error([&] { through_bytes(edited); }, {"checksum"});
  EXPECT_EQ(through_bytes(without_checksum(file)).global[0], 0.5f);  // unchecked, as an older file is read
}

// The rule-state codec (fl/base/rule_state.h): typed blocks come back by name and type, exactly (int64
// ids past 2^24, float64 weights, an empty block); a checkpoint written before the codec, with its one F32
// "server_state" vector, loads as the legacy block; a newer codec version is refused by name.
TEST(FlCheckpoint, RuleStateBlocksRoundTripAndOldStatesLoadAsLegacy) {
  const CheckpointState s = small_state();
  const CheckpointState back = through_bytes(checkpoint_file(s));
  EXPECT_EQ(back.method_state.ints("ids")[1], (int64_t{1} << 40) + 1);
  EXPECT_EQ(back.method_state.reals("weights")[1], 1.0 / 3.0);
  EXPECT_TRUE(back.method_state.has("none_yet") && back.method_state.floats("none_yet").empty());
  EXPECT_TRUE(back.method_state.legacy().empty());
  expect_error([&] { back.method_state.floats("ids"); }, {"method server state", "'ids'", "float32", "missing"});
  SafetensorsFile old = without_checksum(checkpoint_file(small_state()));
  old.f32.emplace_back("server_state", Tensor::from_vector(Shape{2}, std::vector<float>{7.0f, 8.0f}));
  const CheckpointState from_old = through_bytes(old);
  EXPECT_EQ(std::vector<float>(from_old.server_state.legacy().begin(), from_old.server_state.legacy().end()),
            (std::vector<float>{7.0f, 8.0f}));
  SafetensorsFile newer = without_checksum(checkpoint_file(small_state()));
  newer.metadata["method_state_version"] = "2";
  expect_error([&] { through_bytes(newer); }, {"checkpoint ck", "method_state", "version 2", "reads version 1"});
}

TEST(FlRuleState, BlocksAreTypedNamedAndChecked) {
  RuleState state("demo");
  state.put_int("width", 3);
  state.put_per_client("rows", {{4, {1.0f, 2.0f}}, {1, {3.0f, 4.0f}}});
  EXPECT_EQ(state.ints("rows_ids"), (std::vector<int64_t>{1, 4}));  // ascending
  EXPECT_EQ(state.floats("rows"), (std::vector<float>{3.0f, 4.0f, 1.0f, 2.0f}));
  EXPECT_EQ(state.per_client("rows", 5, 2).at(4), (std::vector<float>{1.0f, 2.0f}));
  expect_error([&] { state.per_client("rows", 4, 2); }, {"demo state", "rows_ids", "4", "[0, 4)"});
  expect_error([&] { state.per_client("rows", 5, 3); }, {"demo state", "'rows'", "4 values", "2 clients of 3"});
  expect_error([&] { state.int_in("width", 0, 2); }, {"demo state", "'width'", "[0, 2]"});
  expect_error([&] { state.put_floats("width", {}); }, {"demo state", "'width' given twice"});
  expect_error([&] { state.put_floats("Bad.Name", {}); }, {"demo state", "Bad.Name"});
  state.put_floats("model", {1.0f, NAN});
  expect_error([&] { state.finite_floats("model", 2); }, {"demo state", "'model'", "NaN"});
  expect_error([&] { state.finite_floats("model", 3); }, {"demo state", "'model'", "2 values, expected 3"});
  EXPECT_TRUE(RuleState::from_legacy({}).empty());
}

TEST(FlCheckpoint, InMemoryRoundTripKeepsEveryField) {
  const CheckpointState s = small_state();
  const CheckpointState back = through_bytes(checkpoint_file(s));
  EXPECT_EQ(back.round, 2);
  EXPECT_EQ(back.seed, 7u);
  EXPECT_EQ(back.config_toml, s.config_toml);
  EXPECT_EQ(back.global, s.global);
  EXPECT_TRUE(back.server_state.empty());
  EXPECT_EQ(back.method_state, s.method_state);
  ASSERT_EQ(back.clients.size(), 2u);
  EXPECT_EQ(back.clients[1].vectors.at("momentum"), s.clients[1].vectors.at("momentum"));
  EXPECT_EQ(back.clients[0].scalars.at("lambda"), 0.1);  // %.17g is exact for a double
  EXPECT_EQ(rounds_csv(back.records), rounds_csv(s.records));
  EXPECT_EQ(back.pending.round, 3);
  ASSERT_EQ(back.timings.size(), 2u);
  EXPECT_EQ(back.timings[1].round, 2);
  EXPECT_EQ(back.timings[1].round_seconds, 1.0);
  EXPECT_EQ(back.timings[0].cpu_seconds, 0.75);
  EXPECT_TRUE(std::isnan(back.timings[1].cpu_seconds));
}

// fuzz_checkpoint's first crash: a timing round of 1.7e19 cast to int64 (UBSan: outside the range of
// representable values). A round must be an integer in range.
// The timing table is written as the bit patterns of doubles (I64, 6 a round); checkpoints written before
// hold 5 a round (no cpu_s), or F32. Each must give integer rounds and whole rows.
TEST(FlCheckpoint, TimingRoundsMustBeIntegers) {
  for (double bad : {1.74665e19, -1e30, double(NAN), double(INFINITY), 2.5}) {
    SafetensorsFile file = checkpoint_file(small_state());
    for (auto& [name, entry] : file.i64)
      if (name == "timing") entry.second[6] = std::bit_cast<int64_t>(bad);  // row 1's round
    expect_error([&] { through_bytes(without_checksum(file)); },
                 {"checkpoint ck", "'timing' row 1", "expected an integer"});
  }
  SafetensorsFile file = checkpoint_file(small_state());
  for (auto& [name, entry] : file.i64)
    if (name == "timing") entry = {Shape{4}, {1, 2, 3, 4}};
  expect_error([&] { through_bytes(without_checksum(file)); }, {"'timing' holds 4 values"});
  for (auto& [name, entry] : file.i64)
    if (name == "timing") entry = {Shape{1, 7}, {1, 2, 3, 4, 5, 6, 7}};
  expect_error([&] { through_bytes(without_checksum(file)); }, {"'timing' has 7 columns", "expected 6 (or 5)"});
}

// Checkpoints written before cpu_s: an I64 table of 5 doubles a round, which loads with cpu_s unmeasured
// (so a resumed run's timing.csv leaves those rounds' cpu_s empty, and their cost is round time x threads).
TEST(FlCheckpoint, TimingTablesWithoutCpuSecondsStillLoad) {
  SafetensorsFile file = checkpoint_file(small_state());
  const std::vector<RoundTiming>& timings = small_state().timings;
  for (auto& [name, entry] : file.i64) {
    if (name != "timing") continue;
    std::vector<int64_t> five;
    for (const RoundTiming& t : timings)
      for (double v : {double(t.round), t.train_seconds, t.aggregate_seconds, t.eval_seconds, t.round_seconds})
        five.push_back(std::bit_cast<int64_t>(v));
    entry = {Shape{int64_t(timings.size()), 5}, five};
  }
  const CheckpointState back = through_bytes(without_checksum(file));
  ASSERT_EQ(back.timings.size(), timings.size());
  for (size_t r = 0; r < timings.size(); ++r) {
    EXPECT_EQ(back.timings[r].round, timings[r].round);
    EXPECT_EQ(back.timings[r].round_seconds, timings[r].round_seconds);
    EXPECT_TRUE(std::isnan(back.timings[r].cpu_seconds)) << r;
  }
}

TEST(FlCheckpoint, OldFloatTimingTablesStillLoadAndAreChecked) {
  SafetensorsFile file = checkpoint_file(small_state());
  std::erase_if(file.i64, [](const auto& entry) { return entry.first == "timing"; });
  const std::vector<RoundTiming>& timings = small_state().timings;
  std::vector<float> old;
  for (const RoundTiming& t : timings)
    old.insert(old.end(), {float(t.round), float(t.train_seconds), float(t.aggregate_seconds), float(t.eval_seconds),
                           float(t.round_seconds)});
  file.f32.emplace_back("timing", Tensor::from_vector(Shape{int64_t(timings.size()), 5}, old));
  const CheckpointState back = through_bytes(without_checksum(file));
  ASSERT_EQ(back.timings.size(), timings.size());
  EXPECT_EQ(back.timings.back().round, timings.back().round);
  EXPECT_FLOAT_EQ(float(back.timings.back().round_seconds), float(timings.back().round_seconds));
  file.f32.back().second.data()[5] = 2.5f;
  expect_error([&] { through_bytes(without_checksum(file)); }, {"'timing' row 1", "expected an integer"});
}

// Found by reading the code while writing the target: std::stoll / std::stoull threw std::invalid_argument
// and std::out_of_range (not bastion::Error) and took "12abc" as 12; strtod took "abc" as 0.
TEST(FlCheckpoint, MetadataNumbersMustBeWholeNumbers) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"round", "abc"}, {"round", "12abc"}, {"round", "99999999999999999999"},
      {"seed", "-1"},   {"clients", ""},    {"client.0.lambda", "abc"}};
  for (const auto& [key, value] : bad) {
    SafetensorsFile file = checkpoint_file(small_state());
    file.metadata[key] = value;
    expect_error([&] { through_bytes(without_checksum(file)); },
                 {"checkpoint ck", "'" + key + "'", "expected a number"});
  }
}

// A corrupt client count must fail before millions of client states are allocated.
TEST(FlCheckpoint, ClientCountIsBoundedByTheConfigLimit) {
  SafetensorsFile file = checkpoint_file(small_state());
  file.metadata["clients"] = "1000000000000";
  expect_error([&] { through_bytes(without_checksum(file)); }, {"'clients' is 1000000000000", "data.clients"});
}

TEST(FlCheckpoint, ClientKeysMustNameAClientOfTheCheckpoint) {
  for (const std::string key : {"client.x.lambda", "client.2.lambda", "client.-1.lambda", "client.1"}) {
    SafetensorsFile file = checkpoint_file(small_state());
    file.metadata[key] = "0.5";
    expect_error([&] { through_bytes(without_checksum(file)); }, {"checkpoint ck", key});
  }
  SafetensorsFile file = checkpoint_file(small_state());
  file.f32.emplace_back("client.5.momentum", Tensor::from_vector(Shape{1}, std::vector<float>{1}));
  expect_error([&] { through_bytes(without_checksum(file)); }, {"'client.5.momentum' names a client outside [0, 2)"});
}

}  // namespace
}  // namespace bastion
