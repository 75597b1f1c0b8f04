// MATLAB Level 5 MAT-file reader (what `save -v6` and `save -v7` write; not -v7.3, which is HDF5), enough
// for numeric arrays such as SVHN's X and y. Layout (MathWorks, "MAT-File Format"):
// - 128-byte header: 116 bytes of text ("MATLAB 5.0 MAT-file, ..."), 8 bytes subsystem offset, int16
//   version 0x0100, 2 bytes endian indicator: 'I','M' in file order means little-endian, the only byte
//   order accepted here ('M','I', big-endian, is rejected by name).
// - Then data elements: an 8-byte tag (uint32 type, uint32 byte count) and the data, padded to 8 bytes.
//   A tag whose first word has nonzero upper 16 bits is the small form: type in the low 16 bits, count
//   (<= 4) in the high 16, the data in the tag's second word.
// - Top-level elements are miMATRIX (14), or miCOMPRESSED (15): a zlib stream holding one miMATRIX.
// - miMATRIX holds sub-elements: array flags (2 x miUINT32; class in the low byte, complex bit 0x800),
//   dimensions (miINT32), name (miINT8), real part (any numeric type: MATLAB may store a double array's
//   values as a narrower integer type when they fit), then an imaginary part when complex.
// Real, non-sparse numeric arrays are returned; cell, struct, object, char, sparse and complex arrays are
// skipped, so a file may carry variables the caller does not need.
// Error contract (as data/idx.h): every problem throws bastion::Error naming the file, what was expected,
// what was found and the byte offset (inside a compressed element: the decompressed offset and the file
// offset of the element). Sizes in a header are checked against the bytes that are really there before
// anything is allocated, and inflated output grows only as the zlib stream yields it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/error.h"  // bastion::Error, thrown on every problem

namespace bastion {

// MATLAB array classes (the low byte of the array flags) of the numeric arrays returned.
constexpr int kMxDoubleClass = 6, kMxSingleClass = 7, kMxInt8Class = 8, kMxUint8Class = 9, kMxUint64Class = 15;
// Data element types.
constexpr uint32_t kMiInt8 = 1, kMiUint8 = 2, kMiInt16 = 3, kMiUint16 = 4, kMiInt32 = 5, kMiUint32 = 6, kMiSingle = 7,
                   kMiDouble = 9, kMiInt64 = 12, kMiUint64 = 13, kMiMatrix = 14, kMiCompressed = 15;

struct MatArray {
  std::string name;
  int mx_class = 0;           // kMxDoubleClass .. kMxUint64Class: the class MATLAB reports
  uint32_t stored_type = 0;   // kMiInt8 .. kMiUint64: how `data` is encoded (may be narrower than the class)
  std::vector<int64_t> dims;  // MATLAB order: column-major, the first index varies fastest
  std::vector<uint8_t> data;  // numel() values of stored_type, little-endian
  std::string position;       // where the array's element starts, for messages ("byte 128", ...)

  int64_t numel() const;
  double value(int64_t i) const;  // element i converted to double (exact for every integer type <= 2^53)
};

// Parses a whole MAT v5 file held in memory; `file` names it in messages.
std::vector<MatArray> parse_mat_v5_bytes(const uint8_t* bytes, size_t size, const std::string& file);

// Reads the file and parses it; the file's bytes are released before returning.
std::vector<MatArray> read_mat_v5_file(const std::string& path);

// The first array called `name`; throws naming the file and the arrays it does hold.
MatArray& find_mat_array(std::vector<MatArray>& arrays, const std::string& name, const std::string& file);

}  // namespace bastion
