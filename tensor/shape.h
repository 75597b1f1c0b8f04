// Shape: up to kMaxRank dimensions stored inline, so making a tensor's shape never touches the heap
// (shapes are created on every op in the training loop).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "tensor/error.h"

namespace bastion {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    BASTION_CHECK(dims.size() <= kMaxRank, "rank ", dims.size(), " exceeds the maximum of ", kMaxRank);
    for (int64_t d : dims) push_back(d);
  }
  template <typename It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }

  void push_back(int64_t d) {
    BASTION_CHECK(rank_ < kMaxRank, "rank exceeds the maximum of ", kMaxRank);
    BASTION_CHECK(d >= 0, "negative dimension ", d);
    dims_[rank_++] = d;
  }
  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  // The element count, checked: a product past kMaxNumel (2^40 floats = 4 TiB, beyond any machine, and
  // far from overflowing a byte count) is an error naming the shape, never a wrapped-around size.
  static constexpr int64_t kMaxNumel = int64_t{1} << 40;
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) {
      int64_t next = 0;
      BASTION_CHECK(!__builtin_mul_overflow(n, dims_[i], &next) && next <= kMaxNumel, "shape ", str(),
                    " has more than 2^40 elements");
      n = next;
    }
    return n;
  }
  bool operator==(const Shape& other) const {
    if (rank_ != other.rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (dims_[i] != other.dims_[i]) return false;
    return true;
  }
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const {
    std::string s = "(";
    for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
    return s + (rank_ == 1 ? ",)" : ")");
  }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

}  // namespace bastion
