// safetensors read/write; the format and the guarantees are in tensor/safetensors.h.
// Every load error starts with "safetensors '<path>':" so a user with many checkpoints knows which one
// is broken, then says what was expected, what was found and, for data, the absolute byte offset.
#include "tensor/safetensors.h"

#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "tensor/file_io.h"

namespace bastion {

// Tensor bytes are copied verbatim between the file and memory.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using json = nlohmann::json;
using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

constexpr uint64_t kLengthBytes = 8;               // the uint64 header length that opens the file
constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference loader's limit; beyond is corruption
constexpr uint64_t kAlignment = 8;                 // the data buffer starts at a multiple of this
const std::string kMetadataKey = "__metadata__";

// One tensor's header entry after validation.
struct Entry {
  std::string name;
  bool is_f32 = true;  // else I64
  Shape shape;
  uint64_t begin = 0, end = 0;  // relative to the data buffer
};

uint64_t itemsize(bool is_f32) { return is_f32 ? sizeof(float) : sizeof(int64_t); }

// ---- loading ----

// Where the loader reads bytes from: a file (load_safetensors) or memory (parse_safetensors_bytes), so both
// run the same checks. read() throws bastion::Error naming the path when the bytes are not there.
struct ByteSource {
  uint64_t size = 0;
  std::function<void(uint64_t offset, void* dst, uint64_t bytes)> read;
};

void read_at(std::FILE* f, uint64_t offset, void* dst, uint64_t bytes, const std::string& path) {
  if (bytes == 0) return;  // empty tensors have no storage to read into
  const bool ok = fseeko(f, static_cast<off_t>(offset), SEEK_SET) == 0 && std::fread(dst, 1, bytes, f) == bytes;
  BASTION_CHECK(ok, "safetensors '", path, "': expected ", bytes, " bytes at byte ", offset, ", found ",
                std::ferror(f) ? std::strerror(errno) : "end of file");
}

void read_memory(const uint8_t* data, uint64_t size, uint64_t offset, void* dst, uint64_t bytes,
                 const std::string& path) {
  if (bytes == 0) return;
  BASTION_CHECK(offset <= size && bytes <= size - offset, "safetensors '", path, "': expected ", bytes,
                " bytes at byte ", offset, ", found end of data");
  std::memcpy(dst, data + offset, bytes);
}

// Opens a regular file and returns its size (fopen succeeds on directories, so check with fstat).
FilePtr open_for_read(const std::string& path, uint64_t& size) {
  // Checked before opening: fopen on a FIFO blocks until a writer comes (a results folder's checkpoint made
  // a FIFO hung --resume, issue 42 item 6).
  std::error_code ec;
  BASTION_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec), "safetensors '", path,
                "': expected a regular file, found a directory, FIFO or device");
  FilePtr f(std::fopen(path.c_str(), "rb"), &std::fclose);
  BASTION_CHECK(f != nullptr, "safetensors '", path, "': cannot open for reading: ", std::strerror(errno));
  struct stat info {};
  BASTION_CHECK(fstat(fileno(f.get()), &info) == 0 && S_ISREG(info.st_mode), "safetensors '", path,
                "': expected a regular file, found a directory or special file");
  size = static_cast<uint64_t>(info.st_size);
  return f;
}

uint64_t read_header_length(const ByteSource& in, const std::string& path) {
  const uint64_t file_size = in.size;
  BASTION_CHECK(file_size >= kLengthBytes, "safetensors '", path, "': file too short: expected at least ", kLengthBytes,
                " bytes (the header length), found ", file_size);
  unsigned char bytes[kLengthBytes];
  in.read(0, bytes, kLengthBytes);
  uint64_t n = 0;
  for (int i = kLengthBytes - 1; i >= 0; --i) n = (n << 8) | bytes[i];
  BASTION_CHECK(n <= kMaxHeaderBytes, "safetensors '", path, "': header length at byte 0 is ", n, ", expected at most ",
                kMaxHeaderBytes, " (corrupt, or not a safetensors file)");
  BASTION_CHECK(n <= file_size - kLengthBytes, "safetensors '", path, "': header length at byte 0 is ", n,
                ", larger than the ", file_size - kLengthBytes, " bytes that follow it (truncated?)");
  return n;
}

// nlohmann keeps the last of two equal keys silently; a parse callback with one key set per open
// object catches duplicate tensor names (and duplicate fields inside an entry).
json parse_header(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys_per_object.emplace_back();
    if (event == json::parse_event_t::object_end) keys_per_object.pop_back();
    if (event == json::parse_event_t::key && !keys_per_object.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, callback);
  } catch (const json::parse_error& e) {
    BASTION_FAIL("safetensors '", path, "': invalid JSON header near byte ", kLengthBytes + e.byte, ": ", e.what());
  } catch (const json::exception& e) {  // out_of_range 406: a number beyond double's range (1e400); fuzz_safetensors
    BASTION_FAIL("safetensors '", path, "': invalid JSON header: ", e.what());
  }
  BASTION_CHECK(duplicate.empty(), "safetensors '", path, "': duplicate key \"", duplicate,
                "\" in the header, expected each name once");
  BASTION_CHECK(header.is_object(), "safetensors '", path, "': expected the header to be a JSON object, found ",
                header.type_name());
  return header;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& path) {
  BASTION_CHECK(value.is_object(), "safetensors '", path, "': expected \"__metadata__\" to be an object, found ",
                value.type_name());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    BASTION_CHECK(v.is_string(), "safetensors '", path, "': expected \"__metadata__\" value of \"", key,
                  "\" to be a string, found ", v.type_name(), " ", v.dump());
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

const json& require_key(const json& info, const char* key, const std::string& name, const std::string& path) {
  auto it = info.find(key);
  BASTION_CHECK(it != info.end(), "safetensors '", path, "': tensor \"", name, "\" is missing key \"", key,
                "\", expected dtype, shape and data_offsets");
  return *it;
}

std::vector<uint64_t> read_uints(const json& array, const char* key, const std::string& name, const std::string& path) {
  BASTION_CHECK(array.is_array(), "safetensors '", path, "': tensor \"", name, "\": expected ", key,
                " to be an array, found ", array.type_name());
  std::vector<uint64_t> values;
  for (const json& v : array) {
    BASTION_CHECK(v.is_number_unsigned(), "safetensors '", path, "': tensor \"", name, "\": expected ", key,
                  " to hold non-negative integers, found ", v.dump());
    values.push_back(v.get<uint64_t>());
  }
  return values;
}

Shape parse_shape(const json& value, const std::string& name, const std::string& path) {
  const std::vector<uint64_t> dims = read_uints(value, "shape", name, path);
  BASTION_CHECK(dims.size() <= static_cast<size_t>(Shape::kMaxRank), "safetensors '", path, "': tensor \"", name,
                "\": expected rank at most ", Shape::kMaxRank, ", found ", dims.size());
  for (uint64_t d : dims)
    BASTION_CHECK(d <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "safetensors '", path,
                  "': tensor \"", name, "\": dimension ", d, " is too large");
  return Shape(dims.begin(), dims.end());
}

Entry parse_entry(const std::string& name, const json& info, const std::string& path) {
  BASTION_CHECK(info.is_object(), "safetensors '", path, "': tensor \"", name,
                "\": expected an object with dtype, shape and data_offsets, found ", info.type_name());
  const json& dtype = require_key(info, "dtype", name, path);
  const std::string type = dtype.is_string() ? dtype.get<std::string>() : dtype.dump();
  BASTION_CHECK(type == "F32" || type == "I64", "safetensors '", path, "': tensor \"", name,
                "\" has unsupported dtype ", type, ", expected F32 or I64");
  Entry e{name, type == "F32", parse_shape(require_key(info, "shape", name, path), name, path)};
  const std::vector<uint64_t> offsets =
      read_uints(require_key(info, "data_offsets", name, path), "data_offsets", name, path);
  BASTION_CHECK(offsets.size() == 2, "safetensors '", path, "': tensor \"", name,
                "\": expected data_offsets [begin, end], found ", offsets.size(), " values");
  e.begin = offsets[0];
  e.end = offsets[1];
  BASTION_CHECK(e.begin <= e.end, "safetensors '", path, "': tensor \"", name,
                "\": expected data_offsets begin <= end, found [", e.begin, ", ", e.end, "]");
  return e;
}

// The region must lie inside the data buffer and hold exactly numel * itemsize bytes.
void check_region(const Entry& e, uint64_t data_start, uint64_t data_size, const std::string& path) {
  BASTION_CHECK(e.end <= data_size, "safetensors '", path, "': tensor \"", e.name, "\": data_offsets [", e.begin, ", ",
                e.end, "] lie outside the data buffer of ", data_size, " bytes (it ends at file byte ",
                data_start + data_size, ", the tensor at file byte ", data_start + e.end, ")");
  uint64_t bytes = itemsize(e.is_f32);
  bool overflow = false;
  for (int64_t d : e.shape) overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  BASTION_CHECK(!overflow, "safetensors '", path, "': tensor \"", e.name, "\": shape ", e.shape,
                " is too large (its byte count overflows 64 bits)");
  BASTION_CHECK(bytes == e.end - e.begin, "safetensors '", path, "': tensor \"", e.name, "\" of shape ", e.shape,
                " expected ", bytes, " bytes (numel * itemsize), found data_offsets [", e.begin, ", ", e.end,
                "] spanning ", e.end - e.begin, " bytes at file byte ", data_start + e.begin);
}

// Puts entries in file order and rejects overlapping regions; gaps and any header order are allowed.
void sort_and_check_overlap(std::vector<Entry>& entries, uint64_t data_start, const std::string& path) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin == e.end) continue;  // an empty tensor occupies no bytes, so it overlaps nothing
    BASTION_CHECK(previous == nullptr || e.begin >= previous->end, "safetensors '", path, "': tensors \"",
                  previous->name, "\" [", previous->begin, ", ", previous->end, ") and \"", e.name, "\" [", e.begin,
                  ", ", e.end, ") overlap at file byte ", data_start + e.begin, ", expected disjoint regions");
    previous = &e;
  }
}

void read_entry(const ByteSource& in, const Entry& e, uint64_t data_start, SafetensorsFile& out) {
  const uint64_t offset = data_start + e.begin, bytes = e.end - e.begin;
  if (e.is_f32) {
    Tensor t = Tensor::empty(e.shape);
    in.read(offset, t.data(), bytes);
    out.f32.emplace_back(e.name, t);
  } else {
    std::vector<int64_t> values(static_cast<size_t>(e.shape.numel()));
    in.read(offset, values.data(), bytes);
    out.i64.emplace_back(e.name, std::make_pair(e.shape, std::move(values)));
  }
}

// The whole load: header length, JSON header, entries, regions; all checks pass before any tensor is
// allocated.
SafetensorsFile load_from(const ByteSource& in, const std::string& path) {
  const uint64_t header_size = read_header_length(in, path);
  std::string text(header_size, '\0');
  in.read(kLengthBytes, text.data(), header_size);
  const json header = parse_header(text, path);

  SafetensorsFile out;
  std::vector<Entry> entries;
  const uint64_t data_start = kLengthBytes + header_size, data_size = in.size - data_start;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      out.metadata = parse_metadata(info, path);
      continue;
    }
    entries.push_back(parse_entry(name, info, path));
    check_region(entries.back(), data_start, data_size, path);
  }
  sort_and_check_overlap(entries, data_start, path);
  for (const Entry& e : entries) read_entry(in, e, data_start, out);
  return out;
}

// ---- saving ----

void check_for_save(const std::string& path, const SafetensorsFile& file) {
  std::set<std::string> names;
  auto add_name = [&](const std::string& name) {
    BASTION_CHECK(name != kMetadataKey, "safetensors '", path, "': \"__metadata__\" is reserved, not a tensor name");
    BASTION_CHECK(names.insert(name).second, "safetensors '", path, "': duplicate tensor name \"", name, "\"");
  };
  for (const auto& [name, tensor] : file.f32) {
    add_name(name);
    BASTION_CHECK(tensor.defined(), "safetensors '", path, "': tensor \"", name, "\" is undefined");
  }
  for (const auto& [name, entry] : file.i64) {
    add_name(name);
    BASTION_CHECK(static_cast<int64_t>(entry.second.size()) == entry.first.numel(), "safetensors '", path,
                  "': I64 tensor \"", name, "\" of shape ", entry.first, " expected ", entry.first.numel(),
                  " values, found ", entry.second.size());
  }
}

// The header lists entries in data order: I64 first (8-byte items stay 8-byte aligned), then F32.
std::string make_header(const std::string& path, const SafetensorsFile& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) header[kMetadataKey] = file.metadata;
  uint64_t offset = 0;
  auto add = [&](const std::string& name, const char* dtype, const Shape& shape) {
    const uint64_t bytes = static_cast<uint64_t>(shape.numel()) * itemsize(dtype[0] == 'F');
    header[name] = {{"dtype", dtype},
                    {"shape", std::vector<int64_t>(shape.begin(), shape.end())},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  };
  for (const auto& [name, entry] : file.i64) add(name, "I64", entry.first);
  for (const auto& [name, tensor] : file.f32) add(name, "F32", tensor.shape());
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    BASTION_FAIL("safetensors '", path, "': cannot encode the header (names and metadata must be UTF-8): ", e.what());
  }
  text.append((kAlignment - text.size() % kAlignment) % kAlignment, ' ');
  return text;
}

using Sink = std::function<void(const void* data, uint64_t bytes)>;

// Length, header, then the data buffer in header order (I64 first, then F32), through `write`.
void write_contents(const std::string& header, const SafetensorsFile& file, const Sink& write) {
  unsigned char length[kLengthBytes];
  for (uint64_t i = 0; i < kLengthBytes; ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  write(length, kLengthBytes);
  write(header.data(), header.size());
  for (const auto& [name, entry] : file.i64) write(entry.second.data(), entry.second.size() * 8);
  for (const auto& [name, tensor] : file.f32) {
    if (tensor.device() == Device::CPU) {
      write(tensor.data(), tensor.numel() * sizeof(float));
    } else {
      const std::vector<float> host = tensor.to_vector();
      write(host.data(), host.size() * sizeof(float));
    }
  }
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [key, tensor] : f32)
    if (key == name) return &tensor;
  return nullptr;
}

SafetensorsFile load_safetensors(const std::string& path) {
  uint64_t file_size = 0;
  FilePtr f = open_for_read(path, file_size);
  std::FILE* file = f.get();
  return load_from(
      {file_size, [&](uint64_t offset, void* dst, uint64_t bytes) { read_at(file, offset, dst, bytes, path); }}, path);
}

SafetensorsFile parse_safetensors_bytes(const uint8_t* data, size_t size, const std::string& source) {
  return load_from(
      {size, [&](uint64_t offset, void* dst, uint64_t bytes) { read_memory(data, size, offset, dst, bytes, source); }},
      source);
}

std::string safetensors_bytes(const SafetensorsFile& file, const std::string& source) {
  check_for_save(source, file);
  std::string bytes;
  write_contents(make_header(source, file), file, [&](const void* data, uint64_t n) {
    if (n > 0) bytes.append(static_cast<const char*>(data), n);
  });
  return bytes;
}

void save_safetensors(const std::string& path, const SafetensorsFile& file) {
  check_for_save(path, file);
  const std::string header = make_header(path, file);
  write_file_atomic(path, [&](std::FILE* f) {
    bool ok = true;  // the first failed write stops the rest; write_file_atomic reports errno
    write_contents(header, file, [&](const void* data, uint64_t bytes) { ok = ok && write_bytes(f, data, bytes); });
    return ok;
  });
}

}  // namespace bastion
