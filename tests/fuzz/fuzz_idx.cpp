// libFuzzer target: the IDX reader's in-memory twins (data/idx.h).
// Input: byte 0 picks the reader (bit 0: 0 images, 1 labels) and, for labels, num_classes
// (1 + byte0 / 2, so 1..128); the rest is the IDX stream. bastion::Error is a correct answer; a crash,
// a sanitizer report, any other exception or an allocation over libFuzzer's limit is a bug.
#include <cstddef>
#include <cstdint>

#include "data/idx.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  try {
    if (mode & 1) {
      const int64_t num_classes = 1 + mode / 2;
      const std::vector<int32_t> labels = bastion::parse_idx_labels_bytes(data + 1, size - 1, "fuzz", num_classes);
      for (int32_t y : labels) FUZZ_EXPECT(0 <= y && y < num_classes);
      FUZZ_EXPECT(labels.size() + 8 == size - 1);  // the header fixes the length exactly
    } else {
      const bastion::IdxImages images = bastion::parse_idx_images_bytes(data + 1, size - 1, "fuzz");
      FUZZ_EXPECT(images.rows > 0 && images.cols > 0);
      FUZZ_EXPECT(static_cast<int64_t>(images.pixels.size()) == images.count * images.rows * images.cols);
      FUZZ_EXPECT(images.pixels.size() + 16 == size - 1);
    }
  } catch (const bastion::Error&) {
  }
  return 0;
}
