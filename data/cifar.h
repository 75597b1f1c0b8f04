// CIFAR-10 / CIFAR-100 binary version. A file is a sequence of records with no header:
//   CIFAR-10:  1 label byte, then 3072 pixel bytes (1024 red, 1024 green, 1024 blue, each 32x32 row-major)
//   CIFAR-100: 1 coarse-label byte, 1 fine-label byte, then the same 3072 pixel bytes (fine labels used)
// Files: cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin; cifar-100-binary/{train,test}.bin.
// The record layout is already NCHW, so pixels are copied straight into the Dataset's buffer, which is
// reserved once for the whole split (peak memory ~1x the raw size, not a second copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace bastion {

constexpr int64_t kCifarImageBytes = 3 * 32 * 32;

// Appends the records of one file held in memory to `out` (sets C=3, H=W=32, num_classes). label_bytes is
// 1 (CIFAR-10) or 2 (CIFAR-100). Throws naming `file` when the size is not a whole number of records
// (with the byte offset of the partial record) or a label is >= num_classes (with its record and offset).
// Also throws on an empty buffer and, for CIFAR-100, a coarse label >= 20. Everything is checked before
// `out` is touched, so a throw leaves `out` as it was.
void parse_cifar_bytes(const uint8_t* bytes, size_t size, const std::string& file, int label_bytes, int64_t num_classes,
                       Dataset& out);

}  // namespace bastion
