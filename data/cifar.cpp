// CIFAR-10 / CIFAR-100 binary readers: see cifar.h for the record layout.
// Memory: a loader reserves the split's pixel buffer once, for the sum of its files' sizes, reads each
// file's raw records straight into the tail of that buffer and compacts them in place (labels out,
// pixels moved forward). Peak memory is the raw size of the files (plus 1 byte in 3073 of slack that is
// never given back: shrinking would copy the whole buffer). parse_cifar_bytes, the fuzzers' entry
// point, runs the same validation and compaction from a separate buffer.
#include "data/cifar.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "data/formats.h"
#include "tensor/error.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCifarSide = 32;
constexpr int64_t kCifar100CoarseClasses = 20;
constexpr uint64_t kMaxSplitBytes = uint64_t{1} << 34;  // 16 GiB: far beyond any CIFAR split

int64_t record_bytes(int label_bytes) { return label_bytes + kCifarImageBytes; }

// Checks that `size` bytes are whole records with labels in range; returns the record count. Runs before
// anything is written, so a throw leaves the caller's Dataset as it was.
int64_t validate_records(const uint8_t* bytes, size_t size, const std::string& file, int label_bytes,
                         int64_t num_classes) {
  BASTION_CHECK(label_bytes == 1 || label_bytes == 2, file, ": label_bytes must be 1 (CIFAR-10) or 2 (CIFAR-100), got ",
                label_bytes);
  BASTION_CHECK(num_classes > 0 && num_classes <= 256, file, ": num_classes must be in 1..256, got ", num_classes);
  const int64_t record = record_bytes(label_bytes);
  const int64_t total = static_cast<int64_t>(size);
  BASTION_CHECK(total > 0, file, ": empty file: expected records of ", record, " bytes");
  BASTION_CHECK(total % record == 0, file, ": size ", total, " is not a whole number of ", record, "-byte records (",
                label_bytes, " label byte(s) + ", kCifarImageBytes, " pixel bytes): partial record of ", total % record,
                " bytes at byte offset ", total - total % record);
  const int64_t records = total / record;
  for (int64_t r = 0; r < records; ++r) {
    const int64_t at = r * record;
    if (label_bytes == 2) {
      BASTION_CHECK(bytes[at] < kCifar100CoarseClasses, file, ": coarse label ", int{bytes[at]}, " of record ", r,
                    " (byte offset ", at, ") is out of range: expected < ", kCifar100CoarseClasses);
    }
    const int64_t label_at = at + label_bytes - 1;  // the fine label is the second byte of CIFAR-100
    BASTION_CHECK(bytes[label_at] < num_classes, file, ": label ", int{bytes[label_at]}, " of record ", r,
                  " (byte offset ", label_at, ") is out of range: expected < num_classes ", num_classes);
  }
  return records;
}

// Moves validated records' labels to labels_out and pixels to pixels_out. pixels_out may equal `in`:
// record r's pixels land at r*3072 <= r*(3072 + label_bytes), never past the unread records, and its label
// is taken before its pixels move over it.
void compact_records(const uint8_t* in, int64_t records, int label_bytes, uint8_t* pixels_out, int32_t* labels_out) {
  const int64_t record = record_bytes(label_bytes);
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* source = in + r * record;
    labels_out[r] = source[label_bytes - 1];
    std::memmove(pixels_out + r * kCifarImageBytes, source + label_bytes, kCifarImageBytes);
  }
}

void set_cifar_shape(Dataset& d, int64_t num_classes) {
  d.channels = 3;
  d.height = d.width = kCifarSide;
  d.num_classes = num_classes;
}

void read_exactly(const std::string& path, uint8_t* out, uint64_t size) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  BASTION_CHECK(file != nullptr, path, ": cannot open: ", std::strerror(errno));
  const size_t got = std::fread(out, 1, size, file.get());
  BASTION_CHECK(got == size, path, ": read ", got, " bytes, expected ", size, " (the file's size when listed)",
                std::ferror(file.get()) ? std::string(": ") + std::strerror(errno) : std::string());
}

// Reads one file into the tail of d.pixels (whose capacity the caller reserved) and compacts it there.
void append_cifar_file(const std::string& path, uint64_t size, int label_bytes, int64_t num_classes, Dataset& d) {
  const size_t start = d.pixels.size();
  BASTION_ASSERT(start + size <= d.pixels.capacity());  // no reallocation: the buffer never moves
  d.pixels.resize(start + size);
  read_exactly(path, d.pixels.data() + start, size);
  const int64_t records = validate_records(d.pixels.data() + start, size, path, label_bytes, num_classes);
  const size_t first_label = d.labels.size();
  d.labels.resize(first_label + static_cast<size_t>(records));
  uint8_t* tail = d.pixels.data() + start;
  compact_records(tail, records, label_bytes, tail, d.labels.data() + first_label);
  d.pixels.resize(start + static_cast<size_t>(records * kCifarImageBytes));
}

struct CifarSet {
  const char* name;  // for messages
  int label_bytes;
  int64_t num_classes;
  const char* names_file;  // class names, one per line
  const char* file_list;   // for the missing-file message
};

Dataset load_cifar_split(const fs::path& dir, const std::vector<std::string>& files, const CifarSet& set) {
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  for (const std::string& name : files) {
    const fs::path path = dir / name;
    std::error_code error;
    const bool regular = fs::is_regular_file(path, error);
    const uint64_t size = regular ? fs::file_size(path, error) : 0;
    BASTION_CHECK(regular && !error, path.string(), ": missing or unreadable ", set.name, " file (expected ",
                  set.file_list, " in ", dir.string(), ")");
    sizes.push_back(size);
    total += size;
  }
  BASTION_CHECK(total <= kMaxSplitBytes, dir.string(), ": ", set.name, " files total ", total, " bytes, more than the ",
                kMaxSplitBytes, " a split may hold");
  Dataset d;
  set_cifar_shape(d, set.num_classes);
  d.pixels.reserve(total);
  d.labels.reserve(total / static_cast<uint64_t>(record_bytes(set.label_bytes)));
  for (size_t i = 0; i < files.size(); ++i)
    append_cifar_file((dir / files[i]).string(), sizes[i], set.label_bytes, set.num_classes, d);
  BASTION_CHECK(d.size() > 0, dir.string(), ": the ", set.name, " files hold no images: truncated or empty");
  return d;
}

// Class names, one per line (blank lines skipped); empty when the file is absent.
std::vector<std::string> read_class_names(const fs::path& path, int64_t num_classes) {
  std::ifstream in(path);
  if (!in) return {};
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  BASTION_CHECK(static_cast<int64_t>(names.size()) == num_classes, path.string(), ": expected ", num_classes,
                " class names (one per line), found ", names.size());
  return names;
}

DatasetSplit load_cifar(const fs::path& dir, const std::vector<std::string>& train_files,
                        const std::vector<std::string>& test_files, const CifarSet& set) {
  DatasetSplit split{load_cifar_split(dir, train_files, set), load_cifar_split(dir, test_files, set)};
  split.train.class_names = read_class_names(dir / set.names_file, set.num_classes);
  split.test.class_names = split.train.class_names;
  return split;
}

}  // namespace

void parse_cifar_bytes(const uint8_t* bytes, size_t size, const std::string& file, int label_bytes, int64_t num_classes,
                       Dataset& out) {
  BASTION_CHECK(out.pixels.size() == out.labels.size() * static_cast<size_t>(kCifarImageBytes), file,
                ": parse_cifar_bytes appends to a Dataset holding ", out.labels.size(), " labels but ",
                out.pixels.size(), " pixel bytes (expected ", kCifarImageBytes, " per label)");
  const int64_t records = validate_records(bytes, size, file, label_bytes, num_classes);
  set_cifar_shape(out, num_classes);
  const size_t first_pixel = out.pixels.size(), first_label = out.labels.size();
  out.pixels.resize(first_pixel + static_cast<size_t>(records * kCifarImageBytes));
  out.labels.resize(first_label + static_cast<size_t>(records));
  compact_records(bytes, records, label_bytes, out.pixels.data() + first_pixel, out.labels.data() + first_label);
}

DatasetSplit load_cifar10_dir(const fs::path& dir) {
  const CifarSet set{"CIFAR-10", 1, 10, "batches.meta.txt", "data_batch_1.bin .. data_batch_5.bin and test_batch.bin"};
  const std::vector<std::string> train = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                          "data_batch_4.bin", "data_batch_5.bin"};
  return load_cifar(dir, train, {"test_batch.bin"}, set);
}

DatasetSplit load_cifar100_dir(const fs::path& dir) {
  const CifarSet set{"CIFAR-100", 2, 100, "fine_label_names.txt", "train.bin and test.bin"};
  return load_cifar(dir, {"train.bin"}, {"test.bin"}, set);
}

}  // namespace bastion
