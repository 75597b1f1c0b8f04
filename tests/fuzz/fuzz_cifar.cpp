// libFuzzer target: the CIFAR binary parser's in-memory entry point (data/cifar.h).
// Input: byte 0 picks the variant (bit 0: 0 CIFAR-10, 1 label byte, 10 classes; 1 CIFAR-100, 2 label
// bytes, 100 classes); the rest is the file. bastion::Error is a correct answer; anything else is a bug.
#include <cstddef>
#include <cstdint>

#include "data/cifar.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int label_bytes = (data[0] & 1) ? 2 : 1;
  const int64_t num_classes = label_bytes == 2 ? 100 : 10;
  bastion::Dataset out;
  try {
    bastion::parse_cifar_bytes(data + 1, size - 1, "fuzz.bin", label_bytes, num_classes, out);
    const size_t records = (size - 1) / static_cast<size_t>(label_bytes + bastion::kCifarImageBytes);
    FUZZ_EXPECT(out.labels.size() == records);
    FUZZ_EXPECT(out.pixels.size() == records * bastion::kCifarImageBytes);
    FUZZ_EXPECT(out.channels == 3 && out.height == 32 && out.width == 32 && out.num_classes == num_classes);
    for (int32_t y : out.labels) FUZZ_EXPECT(0 <= y && y < num_classes);
  } catch (const bastion::Error&) {
    FUZZ_EXPECT(out.labels.empty() && out.pixels.empty());  // cifar.h: a throw leaves `out` as it was
  }
  return 0;
}
