// TensorBoard scalars without TensorFlow: `bastion run|reproduce --tensorboard DIR` writes one event file
// per seed with every rounds.csv column as a scalar per round, for `tensorboard --logdir DIR`.
//
// File format (what TensorBoard's event file loader reads):
//   records: uint64 length (little-endian) | uint32 masked CRC-32C of the 8 length bytes | data |
//            uint32 masked CRC-32C of the data; masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8
//   data: one tensorflow.Event protobuf, encoded here by hand with the fields it needs:
//            Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//            Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   the first record is Event{wall_time, file_version: "brain.Event:2"}; then one Event per evaluated
//   round: step = round, one Value per rounds.csv column that has a number (empty cells are left out).
// wall_time is the seconds since the run's first round began (the sum of timing.csv's round_s up to
// that round), so the file is a function of rounds.csv and timing.csv: rewritten whole with them, the
// same after --resume. TensorBoard's "Relative" time axis is right; its "Wall" axis starts in 1970.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fl/metrics/results.h"

namespace bastion {

inline constexpr const char* kTensorboardEventFile = "events.out.tfevents.0.bastion";

uint32_t crc32c(const void* data, size_t bytes);  // CRC-32C (Castagnoli), the one TFRecord uses
std::string tfrecord(const std::string& data);    // one framed record

struct ScalarEvent {
  double wall_time = 0.0;
  int64_t step = 0;
  std::string file_version;                           // set on the first record only
  std::vector<std::pair<std::string, float>> values;  // (tag, simple_value)
};
std::string encode_event(const ScalarEvent& event);

// The event file of a run: the header record, then one event per row of `rounds_csv_text` (rounds_csv's
// output), each column but `round` a tag; wall times from `timings` (rounds without one keep the last).
std::string tensorboard_events(const std::string& rounds_csv_text, const std::vector<RoundTiming>& timings);

// Reads an event file back (tests; a user's check): every record's two CRCs are verified and a mismatch,
// a truncated record or a malformed Event is a bastion::Error naming the record.
std::vector<ScalarEvent> parse_tensorboard_events(const std::string& bytes);

}  // namespace bastion
