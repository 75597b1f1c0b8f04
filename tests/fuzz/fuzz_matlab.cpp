// libFuzzer target: the MAT v5 reader behind SVHN (data/matlab.h), plain and miCOMPRESSED elements.
// Input: the whole file. bastion::Error is a correct answer; anything else is a bug. On success every
// returned array must hold exactly numel() values of its stored type, and value() must be readable.
#include <cstddef>
#include <cstdint>

#include "data/matlab.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

int64_t stored_size(uint32_t type) {
  switch (type) {
    case bastion::kMiInt8:
    case bastion::kMiUint8:
      return 1;
    case bastion::kMiInt16:
    case bastion::kMiUint16:
      return 2;
    case bastion::kMiInt32:
    case bastion::kMiUint32:
    case bastion::kMiSingle:
      return 4;
    default:
      return 8;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::vector<bastion::MatArray> arrays = bastion::parse_mat_v5_bytes(data, size, "fuzz.mat");
    for (const bastion::MatArray& a : arrays) {
      FUZZ_EXPECT(a.numel() >= 0);
      FUZZ_EXPECT(static_cast<int64_t>(a.data.size()) == a.numel() * stored_size(a.stored_type));
      if (a.numel() > 0) (void)a.value(a.numel() - 1);
    }
  } catch (const bastion::Error&) {
  }
  return 0;
}
