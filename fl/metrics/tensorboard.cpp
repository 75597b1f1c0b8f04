#include "fl/metrics/tensorboard.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>

#include "tensor/error.h"

namespace bastion {

namespace {

constexpr uint32_t kCastagnoli = 0x82f63b78u;  // CRC-32C's polynomial, bit-reversed
constexpr uint32_t kMaskDelta = 0xa282ead8u;
constexpr const char* kFileVersion = "brain.Event:2";

// Protobuf wire types and the field keys used here: (field number << 3) | wire type.
enum Wire : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };
constexpr uint8_t key(int field, Wire wire) { return static_cast<uint8_t>(field << 3 | wire); }

std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = crc & 1 ? (crc >> 1) ^ kCastagnoli : crc >> 1;
    table[i] = crc;
  }
  return table;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

void put_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t get_little_endian(const std::string& in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return value;
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  out += static_cast<char>(key(field, kBytes));
  put_varint(out, bytes.size());
  out += bytes;
}

std::string encode_value(const std::string& tag, float value) {
  std::string out;
  put_bytes(out, 1, tag);
  out += static_cast<char>(key(2, kFixed32));
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_little_endian(out, bits, 4);
  return out;
}

// A protobuf reader over one message's bytes: fields in order, unknown ones skipped by wire type.
class Reader {
 public:
  Reader(const std::string& bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  bool done() const { return at_ >= bytes_.size(); }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const uint8_t byte = static_cast<uint8_t>(bytes_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    BASTION_FAIL(what_, ": a varint longer than 10 bytes");
  }
  uint64_t fixed(int bytes) {
    need(static_cast<size_t>(bytes));
    const uint64_t value = get_little_endian(bytes_, at_, bytes);
    at_ += static_cast<size_t>(bytes);
    return value;
  }
  std::string bytes() {
    const uint64_t length = varint();
    need(length);
    std::string out = bytes_.substr(at_, length);
    at_ += length;
    return out;
  }
  void skip(Wire wire) {
    if (wire == kVarint)
      varint();
    else if (wire == kFixed64)
      fixed(8);
    else if (wire == kFixed32)
      fixed(4);
    else if (wire == kBytes)
      bytes();
    else
      BASTION_FAIL(what_, ": unknown protobuf wire type ", static_cast<int>(wire));
  }

 private:
  void need(uint64_t count) const {
    BASTION_CHECK(count <= bytes_.size() - at_, what_, ": the message ends inside a field");
  }
  const std::string& bytes_;
  std::string what_;
  size_t at_ = 0;
};

std::pair<std::string, float> decode_value(const std::string& bytes, const std::string& what) {
  Reader in(bytes, what);
  std::pair<std::string, float> value{"", 0.0f};
  while (!in.done()) {
    const uint64_t k = in.varint();
    if (k == key(1, kBytes)) {
      value.first = in.bytes();
    } else if (k == key(2, kFixed32)) {
      const uint32_t bits = static_cast<uint32_t>(in.fixed(4));
      std::memcpy(&value.second, &bits, sizeof bits);
    } else {
      in.skip(static_cast<Wire>(k & 7));
    }
  }
  return value;
}

ScalarEvent decode_event(const std::string& bytes, const std::string& what) {
  Reader in(bytes, what);
  ScalarEvent event;
  while (!in.done()) {
    const uint64_t k = in.varint();
    if (k == key(1, kFixed64)) {
      const uint64_t bits = in.fixed(8);
      std::memcpy(&event.wall_time, &bits, sizeof bits);
    } else if (k == key(2, kVarint)) {
      event.step = static_cast<int64_t>(in.varint());
    } else if (k == key(3, kBytes)) {
      event.file_version = in.bytes();
    } else if (k == key(5, kBytes)) {
      const std::string summary = in.bytes();
      Reader values(summary, what + " summary");
      while (!values.done()) {
        const uint64_t vk = values.varint();
        if (vk == key(1, kBytes))
          event.values.push_back(decode_value(values.bytes(), what + " value"));
        else
          values.skip(static_cast<Wire>(vk & 7));
      }
    } else {
      in.skip(static_cast<Wire>(k & 7));
    }
  }
  return event;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  static const std::array<uint32_t, 256> table = crc32c_table();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < bytes; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

std::string tfrecord(const std::string& data) {
  std::string out;
  put_little_endian(out, data.size(), 8);
  put_little_endian(out, masked(crc32c(out.data(), 8)), 4);
  out += data;
  put_little_endian(out, masked(crc32c(data.data(), data.size())), 4);
  return out;
}

std::string encode_event(const ScalarEvent& event) {
  std::string out;
  out += static_cast<char>(key(1, kFixed64));
  uint64_t bits = 0;
  std::memcpy(&bits, &event.wall_time, sizeof bits);
  put_little_endian(out, bits, 8);
  out += static_cast<char>(key(2, kVarint));
  put_varint(out, static_cast<uint64_t>(event.step));
  if (!event.file_version.empty()) put_bytes(out, 3, event.file_version);
  if (!event.values.empty()) {
    std::string summary;
    for (const auto& [tag, value] : event.values) put_bytes(summary, 1, encode_value(tag, value));
    put_bytes(out, 5, summary);
  }
  return out;
}

std::string tensorboard_events(const std::string& rounds_csv_text, const std::vector<RoundTiming>& timings) {
  std::string out = tfrecord(encode_event({0.0, 0, kFileVersion, {}}));
  std::istringstream lines(rounds_csv_text);
  std::string line;
  if (!std::getline(lines, line)) return out;
  const std::vector<std::string> columns = split_fields(line, ',');
  BASTION_CHECK(!columns.empty() && columns[0] == "round", "tensorboard: rounds.csv text without its header");
  size_t next_timing = 0;
  double elapsed = 0.0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_fields(line, ',');
    ScalarEvent event;
    const auto [end, error] = std::from_chars(cells[0].data(), cells[0].data() + cells[0].size(), event.step);
    BASTION_CHECK(error == std::errc(), "tensorboard: rounds.csv row without a round: ", line);
    while (next_timing < timings.size() && timings[next_timing].round <= event.step)
      elapsed += timings[next_timing++].round_seconds;
    event.wall_time = elapsed;
    for (size_t c = 1; c < cells.size() && c < columns.size(); ++c) {
      double value = 0.0;
      const auto [value_end, value_error] = std::from_chars(cells[c].data(), cells[c].data() + cells[c].size(), value);
      if (cells[c].empty() || value_error != std::errc() || !std::isfinite(value)) continue;  // not measured
      event.values.emplace_back(columns[c], static_cast<float>(value));
    }
    out += tfrecord(encode_event(event));
  }
  return out;
}

std::vector<ScalarEvent> parse_tensorboard_events(const std::string& bytes) {
  std::vector<ScalarEvent> events;
  size_t at = 0;
  for (int record = 0; at < bytes.size(); ++record) {
    const std::string what = "event record " + std::to_string(record);
    BASTION_CHECK(bytes.size() - at >= 12, what, ": truncated length header");
    const uint64_t length = get_little_endian(bytes, at, 8);
    BASTION_CHECK(get_little_endian(bytes, at + 8, 4) == masked(crc32c(bytes.data() + at, 8)), what,
                  ": the length's CRC-32C does not match");
    BASTION_CHECK(length <= bytes.size() - at - 12 && bytes.size() - at - 12 - length >= 4, what, ": truncated data");
    const std::string data = bytes.substr(at + 12, length);
    BASTION_CHECK(get_little_endian(bytes, at + 12 + length, 4) == masked(crc32c(data.data(), data.size())), what,
                  ": the data's CRC-32C does not match");
    events.push_back(decode_event(data, what));
    at += 12 + length + 4;
  }
  return events;
}

}  // namespace bastion
