// Generator: an explicit, seeded random stream (xoshiro256** seeded through splitmix64).
// Every random draw in Bastion goes through one of these, passed explicitly, so one seed fixes a run
// and the numbers are the same on every platform (std::normal_distribution is not: its algorithm is
// implementation-defined, hence the own Box-Muller below).
#pragma once

#include <cmath>
#include <cstdint>

namespace bastion {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& word : state_) word = splitmix64(x);
  }

  // Derive an independent stream, e.g. Generator(seed).fork(round).fork(client).
  Generator fork(uint64_t stream) const { return Generator(state_[0] ^ splitmix_mix(stream + 0x9E3779B97F4A7C15ULL)); }

  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
  uint64_t below(uint64_t n) {
    __uint128_t m = static_cast<__uint128_t>(next_u64()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        m = static_cast<__uint128_t>(next_u64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Standard normal by Box-Muller (one value per call: simpler state, determinism over speed).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  static uint64_t splitmix64(uint64_t& x) {
    x += 0x9E3779B97F4A7C15ULL;
    return splitmix_mix(x);
  }
  uint64_t state_[4];
};

}  // namespace bastion
