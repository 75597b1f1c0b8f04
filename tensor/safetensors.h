// safetensors: read and write Hugging Face .safetensors files (https://github.com/huggingface/safetensors).
// Layout: 8-byte little-endian uint64 N, then N bytes of UTF-8 JSON header, then the data buffer.
//   header = {"__metadata__": {str: str, ...},            (optional)
//             "<name>": {"dtype": "F32"|"I64", "shape": [d0, ...], "data_offsets": [begin, end]}, ...}
//   offsets are bytes relative to the start of the data buffer; data is little-endian, row-major.
// Bastion supports F32 (float tensors) and I64 (integer buffers such as BatchNorm's
// num_batches_tracked); any other dtype is rejected by name. Rank 0 ("shape": []) holds one element.
//
// Writing: the header is padded with spaces so the data buffer starts 8-byte aligned, as the reference
//   writer does; I64 tensors are written before F32 ones so every tensor stays aligned for its dtype
//   and the buffer has no holes (what the reference loader demands). The file is written to
//   "<path>.tmp.<pid>", fsync'ed, then rename()d over <path> (write_file_atomic, tensor/file_io.h), so a
//   crash never leaves a half-written checkpoint under the real name. CUDA tensors are copied to host first.
// Loading: validates everything before it allocates tensors, and throws bastion::Error naming the
//   file, what was expected, what was found and the byte offset where relevant. Tensors may appear
//   in any order in the header and the buffer may have gaps, but regions may not overlap.
// In memory: parse_safetensors_bytes / safetensors_bytes (same checks, same bytes; the fuzz target's entry).
// PyTorch equivalent: safetensors.torch.save_file / load_file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace bastion {

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;      // "__metadata__"
  std::vector<std::pair<std::string, Tensor>> f32;  // F32 tensors, in file order of data offsets
  // I64 tensors (e.g. BatchNorm num_batches_tracked, shape () i.e. rank 0), in file order of data offsets
  std::vector<std::pair<std::string, std::pair<Shape, std::vector<int64_t>>>> i64;
  const Tensor* find(const std::string& name) const;  // F32 lookup, nullptr if absent
};

// Throws bastion::Error when a name repeats or is "__metadata__", a tensor is undefined, an I64 entry's
// value count differs from its shape, or the file cannot be written (e.g. the directory is missing).
void save_safetensors(const std::string& path, const SafetensorsFile& file);
SafetensorsFile load_safetensors(const std::string& path);

// In memory (the fuzz target's entry points and tests): the same checks and the same layout as the file
// functions, with `source` naming the bytes in errors. safetensors_bytes gives exactly the bytes
// save_safetensors writes; parse_safetensors_bytes reads what load_safetensors reads.
SafetensorsFile parse_safetensors_bytes(const uint8_t* data, size_t size, const std::string& source);
std::string safetensors_bytes(const SafetensorsFile& file, const std::string& source = "memory");

}  // namespace bastion
