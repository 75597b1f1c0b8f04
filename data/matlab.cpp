// MATLAB Level 5 MAT-file reader: see matlab.h for the format and the error contract.
// Memory: an array's values stay in the buffer they were found in. For a compressed element that is the
// inflated buffer itself (the tag and name in front are shifted out in place), so SVHN's 225 MB X costs
// one buffer, not two.
#include "data/matlab.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

namespace bastion {
namespace {

static_assert(std::endian::native == std::endian::little, "the MAT reader copies little-endian values as is");

constexpr size_t kHeaderBytes = 128;
constexpr size_t kTagBytes = 8;
constexpr uint64_t kMaxDeflateRatio = 1032;       // deflate's best case: 258 bytes per 2-bit code
constexpr size_t kInflateStep = size_t{1} << 28;  // grow inflated output at most 256 MiB ahead of the data
constexpr size_t kFeedChunk = size_t{1} << 30;    // zlib counts in 32-bit unsigned
constexpr __int128 kMaxNumel = __int128{1} << 40;

uint32_t le_u32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// Bytes per value of a numeric element type, 0 for anything else.
int numeric_type_bytes(uint32_t type) {
  switch (type) {
    case kMiInt8:
    case kMiUint8:
      return 1;
    case kMiInt16:
    case kMiUint16:
      return 2;
    case kMiInt32:
    case kMiUint32:
    case kMiSingle:
      return 4;
    case kMiDouble:
    case kMiInt64:
    case kMiUint64:
      return 8;
    default:
      return 0;
  }
}

std::string type_name(uint32_t type) {
  static const char* const names[] = {
      "?", "miINT8", "miUINT8", "miINT16",  "miUINT16", "miINT32",      "miUINT32", "miSINGLE", "?",      "miDOUBLE",
      "?", "?",      "miINT64", "miUINT64", "miMATRIX", "miCOMPRESSED", "miUTF8",   "miUTF16",  "miUTF32"};
  const std::string known = type < std::size(names) ? names[type] : "?";
  return (known == "?" ? std::string("unknown type") : known) + " (" + std::to_string(type) + ")";
}

// A byte range being parsed: the file, or the inflated contents of one miCOMPRESSED element.
struct Region {
  const uint8_t* data;
  size_t size;
  const std::string& file;
  int64_t compressed_at = -1;  // file offset of the miCOMPRESSED element this came from, or -1

  std::string at(size_t offset) const {
    if (compressed_at < 0) return "byte " + std::to_string(offset);
    return "decompressed byte " + std::to_string(offset) + " of the miCOMPRESSED element at byte " +
           std::to_string(compressed_at);
  }
};

struct Element {
  uint32_t type = 0;
  size_t at = 0, data_at = 0, bytes = 0, next = 0;
};

// Reads the tag at `at` and bounds the element's data by `end` (the end of the enclosing element).
Element read_element(const Region& r, size_t at, size_t end) {
  BASTION_CHECK(at <= end && end - at >= kTagBytes, r.file, ": truncated data element tag at ", r.at(at),
                ": expected 8 bytes, found ", at <= end ? end - at : 0);
  const uint32_t first = le_u32(r.data + at);
  Element e;
  e.at = at;
  if ((first >> 16) != 0) {  // small form: type, count and up to 4 bytes of data in the tag's 8 bytes
    e.type = first & 0xFFFF;
    e.bytes = first >> 16;
    e.data_at = at + 4;
    e.next = at + kTagBytes;
    BASTION_CHECK(e.bytes <= 4, r.file, ": small data element at ", r.at(at), " claims ", e.bytes,
                  " bytes: expected at most 4");
    return e;
  }
  e.type = first;
  e.bytes = le_u32(r.data + at + 4);
  e.data_at = at + kTagBytes;
  BASTION_CHECK(e.bytes <= end - e.data_at, r.file, ": data element ", type_name(e.type), " at ", r.at(at), " claims ",
                e.bytes, " bytes but only ", end - e.data_at, " remain");
  // Data is padded to 8 bytes, except miCOMPRESSED's (its count is the zlib stream's exact length). A
  // missing final pad at the end of the enclosing element is tolerated.
  const size_t padded = e.type == kMiCompressed ? e.bytes : (e.bytes + 7) / 8 * 8;
  e.next = e.data_at + std::min(padded, end - e.data_at);
  return e;
}

// zlib's inflate over one miCOMPRESSED element's bytes, fed in chunks; inflateEnd on every exit.
class Inflater {
 public:
  Inflater(const Region& r, const Element& e) : r_(r), e_(e), in_(r.data + e.data_at), in_left_(e.bytes) {
    BASTION_CHECK(inflateInit(&z_) == Z_OK, r.file, ": zlib inflateInit failed for the element at ", r.at(e.at));
  }
  ~Inflater() { inflateEnd(&z_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Inflates into out[produced, out.size()) until that is full or the stream ends; true at the end.
  bool fill(uint8_t* out, size_t size, size_t& produced) {
    while (produced < size) {
      if (z_.avail_in == 0) {
        BASTION_CHECK(in_left_ > 0, r_.file, ": miCOMPRESSED element at ", r_.at(e_.at), ": its ", e_.bytes,
                      " bytes end before the zlib stream does (", produced, " bytes decompressed so far)");
        const size_t feed = std::min(in_left_, kFeedChunk);
        z_.next_in = const_cast<Bytef*>(in_);
        z_.avail_in = static_cast<uInt>(feed);
        in_ += feed;
        in_left_ -= feed;
      }
      const size_t room = std::min(size - produced, kFeedChunk);
      z_.next_out = out + produced;
      z_.avail_out = static_cast<uInt>(room);
      const int status = inflate(&z_, Z_NO_FLUSH);
      produced += room - z_.avail_out;
      if (status == Z_STREAM_END) return true;
      BASTION_CHECK(status == Z_OK || (status == Z_BUF_ERROR && z_.avail_in == 0), r_.file,
                    ": corrupt zlib stream in the miCOMPRESSED element at ", r_.at(e_.at), " near decompressed byte ",
                    produced, ": ", z_.msg != nullptr ? z_.msg : "no message", " (zlib error ", status, ")");
    }
    return false;
  }

 private:
  const Region& r_;
  const Element& e_;
  const uint8_t* in_;
  size_t in_left_;
  z_stream z_{};
};

// Inflates one miCOMPRESSED element into the single element it holds (tag included). The inner tag is
// inflated first and its size checked against what a zlib stream of this length can hold; the rest then
// arrives in steps of at most kInflateStep, so a lying tag costs at most one step of memory.
std::vector<uint8_t> inflate_element(const Region& r, const Element& e) {
  Inflater inflater(r, e);
  std::vector<uint8_t> out(kTagBytes);
  size_t produced = 0;
  bool ended = inflater.fill(out.data(), out.size(), produced);
  BASTION_CHECK(produced == kTagBytes, r.file, ": miCOMPRESSED element at ", r.at(e.at), " inflates to ", produced,
                " bytes: expected at least an 8-byte element tag");
  const uint32_t first = le_u32(out.data());
  const uint64_t claimed = (first >> 16) != 0 ? 0 : le_u32(out.data() + 4);
  const uint64_t bound = kMaxDeflateRatio * e.bytes + 64;
  BASTION_CHECK(kTagBytes + claimed <= bound, r.file, ": the element inside the miCOMPRESSED element at ", r.at(e.at),
                " claims ", claimed, " bytes: expected at most ", bound, " from ", e.bytes,
                " compressed bytes (deflate's limit is 1032:1)");
  const size_t total = kTagBytes + static_cast<size_t>((claimed + 7) / 8 * 8);
  while (!ended && out.size() < total) {
    out.resize(std::min(total, out.size() + kInflateStep));
    ended = inflater.fill(out.data(), out.size(), produced);
  }
  BASTION_CHECK(produced >= kTagBytes + claimed, r.file, ": miCOMPRESSED element at ", r.at(e.at),
                ": the zlib stream ends after ", produced, " bytes: expected ", kTagBytes + claimed,
                " (the size its element tag claims)");
  if (!ended) {  // full: the stream must end here, with nothing more to give
    uint8_t extra[1];
    size_t more = 0;
    ended = inflater.fill(extra, sizeof(extra), more);
    BASTION_CHECK(more == 0 && ended, r.file, ": miCOMPRESSED element at ", r.at(e.at),
                  ": the zlib stream holds more than the ", kTagBytes + claimed, " bytes its element tag claims");
  }
  out.resize(produced);
  return out;
}

// A parsed miMATRIX header: the array without its values, and where the values lie in the region.
struct MatrixView {
  MatArray array;
  size_t data_at = 0, data_bytes = 0;
};

std::vector<int64_t> read_dims(const Region& r, const Element& e, __int128& numel) {
  BASTION_CHECK(e.type == kMiInt32 && e.bytes % 4 == 0 && e.bytes >= 8, r.file, ": dimensions at ", r.at(e.at),
                ": expected miINT32 with at least 2 values, found ", type_name(e.type), " with ", e.bytes, " bytes");
  std::vector<int64_t> dims;
  numel = 1;
  for (size_t i = 0; i < e.bytes / 4; ++i) {
    const int32_t d = static_cast<int32_t>(le_u32(r.data + e.data_at + 4 * i));
    BASTION_CHECK(d >= 0, r.file, ": dimension ", i, " at ", r.at(e.data_at + 4 * i), " is ", d, ": expected >= 0");
    numel *= d;
    BASTION_CHECK(numel <= kMaxNumel, r.file, ": dimensions at ", r.at(e.at), " describe more than 2^40 values");
    dims.push_back(d);
  }
  return dims;
}

// Parses the sub-elements of a miMATRIX element; nullopt for classes that are skipped.
std::optional<MatrixView> parse_matrix(const Region& r, const Element& matrix) {
  const size_t begin = matrix.data_at, end = matrix.data_at + matrix.bytes;
  const Element flags = read_element(r, begin, end);
  BASTION_CHECK(flags.type == kMiUint32 && flags.bytes == 8, r.file, ": array flags at ", r.at(begin),
                ": expected miUINT32 with 8 bytes, found ", type_name(flags.type), " with ", flags.bytes, " bytes");
  const uint32_t word = le_u32(r.data + flags.data_at);
  MatrixView view;
  view.array.mx_class = static_cast<int>(word & 0xFF);
  view.array.position = r.at(matrix.at);
  const bool is_complex = (word & 0x800) != 0;
  if (view.array.mx_class < kMxDoubleClass || view.array.mx_class > kMxUint64Class || is_complex) return std::nullopt;
  const Element dims = read_element(r, flags.next, end);
  __int128 numel = 0;
  view.array.dims = read_dims(r, dims, numel);
  const Element name = read_element(r, dims.next, end);
  BASTION_CHECK(name.type == kMiInt8, r.file, ": array name at ", r.at(name.at), ": expected miINT8, found ",
                type_name(name.type));
  view.array.name.assign(reinterpret_cast<const char*>(r.data + name.data_at), name.bytes);
  const Element real = read_element(r, name.next, end);
  const int value_bytes = numeric_type_bytes(real.type);
  BASTION_CHECK(value_bytes > 0, r.file, ": real part of '", view.array.name, "' at ", r.at(real.at),
                ": expected a numeric type, found ", type_name(real.type));
  BASTION_CHECK(real.bytes == numel * value_bytes, r.file, ": real part of '", view.array.name, "' at ", r.at(real.at),
                ": expected ", static_cast<int64_t>(numel), " values of ", value_bytes, " bytes, found ", real.bytes,
                " bytes");
  view.array.stored_type = real.type;
  view.data_at = real.data_at;
  view.data_bytes = real.bytes;
  return view;
}

void check_header(const uint8_t* bytes, size_t size, const std::string& file) {
  BASTION_CHECK(size >= kHeaderBytes, file, ": truncated header: expected 128 bytes of MAT-file header, found ", size);
  const std::string text(reinterpret_cast<const char*>(bytes), 19);
  BASTION_CHECK(text.rfind("MATLAB 7.3", 0) != 0, file, ": MATLAB v7.3 (HDF5) files are not supported: expected a ",
                "Level 5 MAT-file (save -v7)");
  const uint16_t version = static_cast<uint16_t>(bytes[124] | (bytes[125] << 8));
  const char endian[3] = {static_cast<char>(bytes[126]), static_cast<char>(bytes[127]), 0};
  BASTION_CHECK(std::string(endian) != "MI", file, ": big-endian MAT-file (endian indicator 'MI' at byte 126): ",
                "expected little-endian 'IM'; re-save the file on a little-endian machine");
  BASTION_CHECK(std::string(endian) == "IM", file, ": bad endian indicator at byte 126: expected 'IM', found bytes ",
                int{bytes[126]}, ", ", int{bytes[127]}, " (not a Level 5 MAT-file?)");
  BASTION_CHECK(version == 0x0100, file, ": bad version at byte 124: expected 0x0100, found ", version);
}

// Parses the single miMATRIX inside a compressed element and keeps the inflated buffer as its values.
std::optional<MatArray> parse_compressed(const Region& file_region, const Element& e) {
  std::vector<uint8_t> inflated = inflate_element(file_region, e);
  const Region inner{inflated.data(), inflated.size(), file_region.file, static_cast<int64_t>(e.at)};
  const Element matrix = read_element(inner, 0, inner.size);
  BASTION_CHECK(matrix.type == kMiMatrix, inner.file, ": ", inner.at(0), ": expected miMATRIX inside the compressed ",
                "element, found ", type_name(matrix.type));
  std::optional<MatrixView> view = parse_matrix(inner, matrix);
  if (!view) return std::nullopt;
  inflated.erase(inflated.begin(), inflated.begin() + static_cast<std::ptrdiff_t>(view->data_at));  // in place
  inflated.resize(view->data_bytes);
  view->array.data = std::move(inflated);
  return std::move(view->array);
}

}  // namespace

int64_t MatArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double MatArray::value(int64_t i) const {
  const int bytes = numeric_type_bytes(stored_type);
  BASTION_CHECK(bytes > 0 && i >= 0 && static_cast<size_t>((i + 1) * bytes) <= data.size(), "MatArray '", name,
                "': value ", i, " out of range (", data.size(), " bytes of ", type_name(stored_type), ")");
  const uint8_t* p = data.data() + i * bytes;
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  };
  switch (stored_type) {
    case kMiInt8:
      return load(int8_t{});
    case kMiUint8:
      return load(uint8_t{});
    case kMiInt16:
      return load(int16_t{});
    case kMiUint16:
      return load(uint16_t{});
    case kMiInt32:
      return load(int32_t{});
    case kMiUint32:
      return load(uint32_t{});
    case kMiSingle:
      return load(float{});
    case kMiDouble:
      return load(double{});
    case kMiInt64:
      return load(int64_t{});
    default:
      return load(uint64_t{});
  }
}

std::vector<MatArray> parse_mat_v5_bytes(const uint8_t* bytes, size_t size, const std::string& file) {
  check_header(bytes, size, file);
  const Region region{bytes, size, file};
  std::vector<MatArray> arrays;
  for (size_t at = kHeaderBytes; at < size;) {
    const Element e = read_element(region, at, size);
    if (e.type == kMiMatrix) {
      std::optional<MatrixView> view = parse_matrix(region, e);
      if (view) {
        view->array.data.assign(bytes + view->data_at, bytes + view->data_at + view->data_bytes);
        arrays.push_back(std::move(view->array));
      }
    } else if (e.type == kMiCompressed) {
      std::optional<MatArray> array = parse_compressed(region, e);
      if (array) arrays.push_back(std::move(*array));
    } else {
      BASTION_FAIL(file, ": data element at byte ", at, ": expected miMATRIX (14) or miCOMPRESSED (15), found ",
                   type_name(e.type));
    }
    at = e.next;
  }
  return arrays;
}

std::vector<MatArray> read_mat_v5_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  BASTION_CHECK(in.good(), path, ": cannot open: ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  BASTION_CHECK(size >= 0, path, ": cannot tell the file's size");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  BASTION_CHECK(in.gcount() == size, path, ": read ", in.gcount(), " bytes, expected ", size);
  return parse_mat_v5_bytes(bytes.data(), bytes.size(), path);
}

MatArray& find_mat_array(std::vector<MatArray>& arrays, const std::string& name, const std::string& file) {
  std::string held;
  for (MatArray& array : arrays) {
    if (array.name == name) return array;
    held += (held.empty() ? "" : ", ") + array.name;
  }
  BASTION_FAIL(file, ": no numeric array named '", name, "': expected one, found ",
               held.empty() ? std::string("none") : held);
}

}  // namespace bastion
