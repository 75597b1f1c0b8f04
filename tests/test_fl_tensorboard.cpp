// TensorBoard event files (fl/metrics/tensorboard.h): CRC-32C against its published check value, the
// record framing and Event encoding read back by the C++ reader with both CRCs checked, and a run with
// --tensorboard writing one scalar per rounds.csv number, the same after a kill and a resume.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "fl/metrics/tensorboard.h"
#include "fl_test_support.h"
#include "tensor/file_io.h"

namespace bastion {
namespace {

using testing::TinyRun;
using FlTensorboard = testing::FlRunTest;

TEST(Crc32c, MatchesTheCheckValue) {
  const std::string check = "123456789";  // the CRC catalogue's check input; CRC-32C gives 0xe3069283
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xe3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(FlTensorboardFormat, EventsRoundTripThroughTheReader) {
  const ScalarEvent first{0.0, 0, "brain.Event:2", {}};
  const ScalarEvent second{12.5, 300, "", {{"acc", 0.8125f}, {"p_asr_med", 1e-7f}, {std::string(200, 't'), -3.0f}}};
  const std::vector<ScalarEvent> back =
      parse_tensorboard_events(tfrecord(encode_event(first)) + tfrecord(encode_event(second)));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].file_version, "brain.Event:2");
  EXPECT_TRUE(back[0].values.empty());
  EXPECT_EQ(back[1].wall_time, 12.5);
  EXPECT_EQ(back[1].step, 300);
  EXPECT_EQ(back[1].values, second.values);  // a 200-byte tag takes a two-byte length varint
}

TEST(FlTensorboardFormat, ACorruptOrTruncatedRecordIsNamed) {
  std::string bytes = tfrecord(encode_event({1.0, 1, "", {{"acc", 0.5f}}}));
  std::string flipped = bytes;
  flipped[14] ^= 0x01;  // a data byte
  testing::expect_error([&] { parse_tensorboard_events(flipped); }, {"event record 0", "data's CRC-32C"});
  flipped = bytes;
  flipped[2] ^= 0x01;  // a length byte
  testing::expect_error([&] { parse_tensorboard_events(flipped); }, {"event record 0", "length's CRC-32C"});
  testing::expect_error([&] { parse_tensorboard_events(bytes + bytes.substr(0, bytes.size() - 3)); },
                        {"event record 1", "truncated"});
}

TEST(FlTensorboardFormat, EveryNumberOfARoundsRowIsAScalarAndEmptyCellsAreLeftOut) {
  const std::string csv = "round,acc,asr,sampled\n1,0.5,,4\n3,0.75,0.25,4\n";
  const std::vector<ScalarEvent> events =
      parse_tensorboard_events(tensorboard_events(csv, {{1, 1, 0, 0, 2.0}, {2, 1, 0, 0, 3.0}, {3, 1, 0, 0, 4.0}}));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[1].wall_time, 2.0);
  EXPECT_EQ(events[1].values, (std::vector<std::pair<std::string, float>>{{"acc", 0.5f}, {"sampled", 4.0f}}));
  EXPECT_EQ(events[2].step, 3);
  EXPECT_EQ(events[2].wall_time, 9.0);  // rounds 1-3's round_s
  EXPECT_EQ(events[2].values.size(), 3u);
}

TEST_F(FlTensorboard, ARunWritesEveryRoundsCsvNumberAndResumesToTheSameFile) {
  const TinyRun spec{{"rounds=4", "run.checkpoint_every=1"}};
  const std::string board = (dir_ / "board").string();
  const auto run_with_board = [&](const std::string& out, int threads, bool resume, int64_t stop_after) {
    RunOptions options;
    options.out_dir = (dir_ / out).string();
    options.threads = threads;
    options.resume = resume;
    options.stop_after_round = stop_after;
    options.tensorboard_dir = board + "/" + out;
    run_experiment(spec.config(), options);
  };
  run_with_board("whole", 1, false, 0);
  const std::vector<RoundRecord> rounds = parse_rounds_csv(file("whole", "rounds.csv"));
  const std::vector<ScalarEvent> events =
      parse_tensorboard_events(read_text_file(board + "/whole/" + kTensorboardEventFile));
  ASSERT_EQ(events.size(), rounds.size() + 1);
  for (size_t r = 0; r < rounds.size(); ++r) {
    EXPECT_EQ(events[r + 1].step, rounds[r].round);
    bool found = false;
    for (const auto& [tag, value] : events[r + 1].values)
      if (tag == "acc") {
        found = true;
        EXPECT_FLOAT_EQ(value, static_cast<float>(rounds[r].acc));
      }
    EXPECT_TRUE(found) << "round " << rounds[r].round;
  }
  run_with_board("resumed", 1, false, /*stop_after=*/2);
  run_with_board("resumed", 2, /*resume=*/true, 0);
  const std::vector<ScalarEvent> resumed =
      parse_tensorboard_events(read_text_file(board + "/resumed/" + kTensorboardEventFile));
  ASSERT_EQ(resumed.size(), events.size());
  for (size_t e = 0; e < events.size(); ++e) EXPECT_EQ(resumed[e].values, events[e].values) << "event " << e;
}

// With several seeds each gets its own event file in seed-<s>/, as its results do.
TEST_F(FlTensorboard, EachSeedWritesItsOwnFileBesideItsResults) {
  RunOptions options;
  options.out_dir = (dir_ / "seeds").string();
  options.threads = 1;
  options.tensorboard_dir = (dir_ / "board").string();
  run_experiment(TinyRun{{"rounds=2", "repeat=2"}}.config(), options);
  for (const char* seed : {"seed-3", "seed-4"}) {
    const std::vector<ScalarEvent> events =
        parse_tensorboard_events(read_text_file((dir_ / "board" / seed / kTensorboardEventFile).string()));
    EXPECT_EQ(events.size(), parse_rounds_csv(file(std::string("seeds/") + seed, "rounds.csv")).size() + 1) << seed;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "board" / kTensorboardEventFile));
}

}  // namespace
}  // namespace bastion
