// libFuzzer target: the safetensors reader's in-memory twin (tensor/safetensors.h parse_safetensors_bytes).
// Input: the whole file. bastion::Error is a correct answer; anything else is a bug.
// Properties of a successful parse: every tensor holds its shape's element count, and a round trip
// through the writer (safetensors_bytes) reads back the same names, shapes, bits and metadata, and
// writing that again gives the same bytes (the writer's layout is canonical).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensor/error.h"
#include "tensor/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool same_f32(const bastion::Tensor& a, const bastion::Tensor& b) {
  if (a.shape() != b.shape() || a.numel() != b.numel()) return false;
  return a.numel() == 0 || std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;  // NaN bits too
}

bool same_file(const bastion::SafetensorsFile& a, const bastion::SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.f32.size() != b.f32.size() || a.i64 != b.i64) return false;
  for (size_t i = 0; i < a.f32.size(); ++i)
    if (a.f32[i].first != b.f32[i].first || !same_f32(a.f32[i].second, b.f32[i].second)) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bastion::SafetensorsFile file;
  try {
    file = bastion::parse_safetensors_bytes(data, size, "fuzz.safetensors");
  } catch (const bastion::Error&) {
    return 0;
  }
  for (const auto& [name, tensor] : file.f32) FUZZ_EXPECT(tensor.defined() && tensor.numel() == tensor.shape().numel());
  for (const auto& [name, entry] : file.i64)
    FUZZ_EXPECT(static_cast<int64_t>(entry.second.size()) == entry.first.numel());
  std::string bytes;
  bastion::SafetensorsFile again;
  try {
    bytes = bastion::safetensors_bytes(file, "rewritten");
    again = bastion::parse_safetensors_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "rewritten");
  } catch (const bastion::Error& e) {
    std::fprintf(stderr, "round trip failed: %s\n", e.what());
    FUZZ_EXPECT(false);
  }
  FUZZ_EXPECT(same_file(file, again));
  FUZZ_EXPECT(bastion::safetensors_bytes(again, "rewritten") == bytes);
  return 0;
}
