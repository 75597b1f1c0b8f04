// IDX reader: see idx.h for the format and the error contract.
// The payload is read straight into the vector that the Dataset keeps (no second 47 MB copy), and the
// header's sizes are only trusted up to kReserveCap (or, in memory, the bytes really there) before bytes
// actually arrive, so a corrupt header cannot make us allocate terabytes.
// One IdxStream class reads either a file through zlib or a buffer in memory, so the file readers and the
// in-memory twins the fuzzer drives run exactly the same parsing code.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "tensor/error.h"

namespace bastion {
namespace {

constexpr int64_t kChunk = int64_t{1} << 24;       // bytes per gzread call (gzread takes an unsigned)
constexpr int64_t kReserveCap = int64_t{1} << 28;  // reserve at most 256 MiB on the header's word
constexpr int64_t kMaxPayload = int64_t{1} << 40;  // a header claiming more than 1 TiB is corrupt
constexpr unsigned kGzBuffer = 1u << 17;           // zlib's default 8 KiB buffer is slow for 47 MB

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08X", value);
  return text;
}

// A gzFile, or a buffer in memory, with a running offset into the decompressed stream. Closing in the
// destructor means every throw below releases the file.
class IdxStream {
 public:
  explicit IdxStream(std::string path) : path_(std::move(path)) {
    file_ = gzopen(path_.c_str(), "rb");
    BASTION_CHECK(file_ != nullptr, path_, ": cannot open: ", std::strerror(errno));
    gzbuffer(file_, kGzBuffer);
  }
  IdxStream(const uint8_t* bytes, size_t size, std::string name)
      : path_(std::move(name)), memory_(bytes), memory_size_(static_cast<int64_t>(size)) {}
  ~IdxStream() {
    if (file_ != nullptr) gzclose(file_);
  }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  const std::string& path() const { return path_; }
  int64_t offset() const { return offset_; }

  // How many bytes it is safe to reserve ahead of their arrival: all that is left of a buffer, or
  // kReserveCap for a file (whose decompressed length is unknown).
  int64_t reserve_limit() const { return file_ != nullptr ? kReserveCap : memory_size_ - offset_; }

  // Reads up to n bytes; returns how many arrived (fewer only at the end of the stream).
  int64_t read(uint8_t* out, int64_t n) {
    if (file_ == nullptr) return read_memory(out, n);
    int64_t got = 0;
    while (got < n) {
      const int r = gzread(file_, out + got, static_cast<unsigned>(std::min(n - got, kChunk)));
      if (r > 0) got += r;
      check_zlib(offset_ + got, r);
      if (r <= 0) break;
    }
    offset_ += got;
    return got;
  }

 private:
  int64_t read_memory(uint8_t* out, int64_t n) {
    const int64_t got = std::min(n, memory_size_ - offset_);
    if (got > 0) std::memcpy(out, memory_ + offset_, static_cast<size_t>(got));
    offset_ += got;
    return got;
  }

  // zlib latches errors (bad deflate data, CRC mismatch, a .gz cut short) and reports them through
  // gzerror, sometimes only after handing out the bytes before the damage; so check after every call.
  void check_zlib(int64_t at, int r) {
    int errnum = Z_OK;
    const char* message = gzerror(file_, &errnum);
    BASTION_CHECK(errnum == Z_OK && r >= 0, path_, ": corrupt gzip stream near decompressed byte ", at, ": ", message,
                  " (zlib error ", errnum, ")");
  }

  std::string path_;
  gzFile file_ = nullptr;
  const uint8_t* memory_ = nullptr;  // the in-memory source when file_ is null
  int64_t memory_size_ = 0;
  int64_t offset_ = 0;
};

uint32_t big_endian_u32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
}

// Reads the header's `words` big-endian uint32 values; the magic (the first word) is checked before the
// rest is read, so a labels file handed over as images reports "bad magic", not "truncated header".
std::vector<int64_t> read_header(IdxStream& in, int words, uint32_t magic, const char* kind) {
  uint8_t bytes[16];
  const int64_t need = 4 * words;
  int64_t got = in.read(bytes, 4);
  if (got == 4) {
    const uint32_t found = big_endian_u32(bytes);
    const char* hint = found == kIdxLabelsMagic   ? " (that is the magic of an IDX labels file)"
                       : found == kIdxImagesMagic ? " (that is the magic of an IDX images file)"
                                                  : "";
    BASTION_CHECK(found == magic, in.path(), ": bad magic at byte 0: expected ", hex32(magic), " (IDX ", kind,
                  "), found ", hex32(found), hint);
    got += in.read(bytes + 4, need - 4);
  }
  BASTION_CHECK(got == need, in.path(), ": truncated header: expected ", need, " bytes of IDX ", kind,
                " header, file ends at byte ", got);
  std::vector<int64_t> header;
  for (int w = 1; w < words; ++w) header.push_back(big_endian_u32(bytes + 4 * w));
  return header;
}

// Reads exactly `bytes` bytes of payload, growing the vector as data arrives.
std::vector<uint8_t> read_payload(IdxStream& in, int64_t bytes, const char* what) {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(0, std::min(bytes, in.reserve_limit()))));
  const int64_t start = in.offset();
  while (static_cast<int64_t>(out.size()) < bytes) {
    const size_t old = out.size();
    // In memory, never grow past the bytes that are there (a header claiming 4 G labels over a 10-byte
    // buffer must not cost a 16 MiB chunk); for a file the limit is kReserveCap, above kChunk.
    const int64_t limit = std::max<int64_t>(in.reserve_limit(), 1);
    const int64_t want = std::min({bytes - static_cast<int64_t>(old), kChunk, limit});
    out.resize(old + static_cast<size_t>(want));
    const int64_t got = in.read(out.data() + old, want);
    out.resize(old + static_cast<size_t>(got));
    if (got < want) break;
  }
  BASTION_CHECK(static_cast<int64_t>(out.size()) == bytes, in.path(), ": truncated payload: expected ", bytes,
                " bytes of ", what, " after offset ", start, ", file ends at byte ", in.offset());
  return out;
}

// The IDX header fixes the file length exactly; extra bytes mean a wrong or damaged file.
void check_at_end(IdxStream& in, const std::string& promised) {
  const int64_t end = in.offset();
  uint8_t scratch[4096];
  while (in.read(scratch, sizeof(scratch)) > 0) {
  }
  BASTION_CHECK(in.offset() == end, in.path(), ": ", in.offset() - end, " trailing bytes after offset ", end,
                ": expected the file to end there (header promises ", promised, ")");
}

IdxImages parse_images(IdxStream& in) {
  const std::vector<int64_t> header = read_header(in, 4, kIdxImagesMagic, "images");
  IdxImages images;
  images.count = header[0];
  images.rows = header[1];
  images.cols = header[2];
  const __int128 bytes = static_cast<__int128>(images.count) * images.rows * images.cols;
  BASTION_CHECK(images.rows > 0 && images.cols > 0 && bytes <= kMaxPayload, in.path(),
                ": implausible header at byte 4: count ", images.count, ", rows ", images.rows, ", cols ", images.cols);
  images.pixels = read_payload(in, static_cast<int64_t>(bytes), "pixels");
  check_at_end(in, std::to_string(images.count) + " images of " + std::to_string(images.rows) + "x" +
                       std::to_string(images.cols));
  return images;
}

std::vector<int32_t> parse_labels(IdxStream& in, int64_t num_classes) {
  BASTION_CHECK(num_classes > 0, "read_idx_labels: num_classes must be positive, got ", num_classes);
  const int64_t count = read_header(in, 2, kIdxLabelsMagic, "labels")[0];
  const int64_t start = in.offset();
  const std::vector<uint8_t> raw = read_payload(in, count, "labels");
  check_at_end(in, std::to_string(count) + " labels");
  std::vector<int32_t> labels(raw.begin(), raw.end());
  for (int64_t i = 0; i < count; ++i) {
    BASTION_CHECK(labels[i] < num_classes, in.path(), ": label ", labels[i], " at index ", i, " (byte offset ",
                  start + i, ") is out of range: expected < num_classes ", num_classes);
  }
  return labels;
}

}  // namespace

std::string resolve_plain_or_gz_path(const std::string& path, const std::string& kind) {
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  const std::string other = gz ? path.substr(0, path.size() - 3) : path + ".gz";
  std::error_code ignored;
  if (std::filesystem::is_regular_file(path, ignored)) return path;
  if (std::filesystem::is_regular_file(other, ignored)) return other;
  BASTION_FAIL(kind, " file not found: ", path, " (tried ", path, " and ", other, ")");
}

std::string resolve_idx_path(const std::string& path) { return resolve_plain_or_gz_path(path, "IDX"); }

std::string read_text_file(const std::string& path) {
  // Only regular files, and at most kMaxTextBytes of text (after decompression): a FIFO would block the
  // read forever and /dev/zero would fill memory (issue 42 item 6).
  std::error_code ec;
  BASTION_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec), "'", path,
                "' is not a regular file (a directory, FIFO or device): refused");
  IdxStream in(path);
  std::string text;
  char buffer[1 << 16];
  int64_t got = 0;
  while ((got = in.read(reinterpret_cast<uint8_t*>(buffer), sizeof(buffer))) > 0) {
    text.append(buffer, static_cast<size_t>(got));
    BASTION_CHECK(static_cast<int64_t>(text.size()) <= kMaxTextBytes, "'", path, "' holds more than ",
                  kMaxTextBytes >> 20, " MiB of text: refused (not a file this program writes or reads)");
  }
  return text;
}

IdxImages read_idx_images(const std::string& path) {
  IdxStream in(resolve_idx_path(path));
  return parse_images(in);
}

std::vector<int32_t> read_idx_labels(const std::string& path, int64_t num_classes) {
  BASTION_CHECK(num_classes > 0, "read_idx_labels: num_classes must be positive, got ", num_classes);
  IdxStream in(resolve_idx_path(path));
  return parse_labels(in, num_classes);
}

IdxImages parse_idx_images_bytes(const uint8_t* bytes, size_t size, const std::string& file) {
  IdxStream in(bytes, size, file);
  return parse_images(in);
}

std::vector<int32_t> parse_idx_labels_bytes(const uint8_t* bytes, size_t size, const std::string& file,
                                            int64_t num_classes) {
  IdxStream in(bytes, size, file);
  return parse_labels(in, num_classes);
}

}  // namespace bastion
