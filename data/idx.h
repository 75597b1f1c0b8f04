// IDX reader (the MNIST / Fashion-MNIST / EMNIST file format), plain or gzip-compressed.
// Images: big-endian int32 magic 0x00000803, count, rows, cols, then count*rows*cols uint8, row-major.
// Labels: big-endian int32 magic 0x00000801, count, then count uint8.
// - Files go through zlib's gzopen/gzread, which reads gzip and plain files alike.
// - A path may name "file" or "file.gz": resolve_idx_path() accepts either spelling and returns whichever
//   exists, so a folder of unpacked files and a folder of the original downloads both work.
// - Every problem throws bastion::Error naming the file, what was expected, what was found and the byte
//   offset. Offsets count bytes of the decompressed stream (what the IDX format describes), not of the
//   .gz file on disk.
// - parse_idx_*_bytes are the in-memory twins (the fuzzer's entry points, tests/fuzz/fuzz_idx.cpp): the
//   same checks and messages over bytes already in memory (an uncompressed IDX stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/error.h"  // bastion::Error, thrown on every problem

namespace bastion {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // uint8 data (0x08), 3 dimensions
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // uint8 data (0x08), 1 dimension

struct IdxImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count*rows*cols, raw 0..255
};

// Returns `path` if it is a file, else `path` + ".gz" (or `path` without ".gz") if that is one; throws
// naming every spelling tried.
std::string resolve_idx_path(const std::string& path);

// The same lookup for any file that may be stored plain or gzipped; `kind` names it in the error
// ("IDX", "digits CSV", ...).
std::string resolve_plain_or_gz_path(const std::string& path, const std::string& kind);

// Reads a whole file, gzip or plain, through the IDX reader's zlib stream and its corrupt-gzip checks;
// returns the decompressed bytes unchanged (no newline translation). The text readers (digits, WISDM)
// use it.
std::string read_text_file(const std::string& path);
inline constexpr int64_t kMaxTextBytes = int64_t{1} << 30;  // read_text_file's cap: 1 GiB

// Reads a whole images file. Throws on a missing file, bad magic, truncated header or payload, trailing
// bytes after the payload, or a corrupt gzip stream.
IdxImages read_idx_images(const std::string& path);

// Reads a whole labels file; additionally throws when a label is >= num_classes.
std::vector<int32_t> read_idx_labels(const std::string& path, int64_t num_classes);

// In-memory twins: `bytes` holds a whole IDX stream (not gzip); `file` names it in messages.
IdxImages parse_idx_images_bytes(const uint8_t* bytes, size_t size, const std::string& file);
std::vector<int32_t> parse_idx_labels_bytes(const uint8_t* bytes, size_t size, const std::string& file,
                                            int64_t num_classes);

}  // namespace bastion
