// libFuzzer target: the image decoder and TinyImageNet's annotation parser (data/image_folder.h).
// Input: byte 0 picks the entry point (byte0 % 3: 0 decode to 1 channel, 1 decode to 3 channels,
// 2 parse val_annotations.txt); the rest is the file. bastion::Error is a correct answer; anything else
// is a bug. Note: stb_image comes from Debian's libstb.so, which is not instrumented, so coverage
// guidance stops at its boundary; ASan still checks its allocations and the wrapper's use of them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image_folder.h"
#include "tensor/error.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 3;
  try {
    if (mode < 2) {
      const int channels = mode == 0 ? 1 : 3;
      const bastion::DecodedImage image = bastion::decode_image_bytes(data + 1, size - 1, "fuzz.img", channels);
      FUZZ_EXPECT(image.channels == channels && image.height > 0 && image.width > 0);
      FUZZ_EXPECT(static_cast<int64_t>(image.chw.size()) == image.channels * image.height * image.width);
    } else {
      const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
      bastion::parse_val_annotations(text, "val_annotations.txt");
    }
  } catch (const bastion::Error&) {
  }
  return 0;
}
