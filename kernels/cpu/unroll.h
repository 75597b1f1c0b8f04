// BASTION_UNROLL(n): `#pragma GCC unroll n` (read by g++ and clang++) before a loop whose trip count is a
// template constant, in the product build, where a register block's accumulators must be unrolled into
// registers. Under AddressSanitizer (CI's sanitizer build, the fuzz build) it is nothing: every unrolled
// load and store there is instrumented, and conv_blocked.cpp alone took 363 s (g++ 12, -O2) and 339 s
// (clang++ 14, even at -O1) to compile, against 9 s and 14 s as loops (2026-11-28, Xeon, CI's stages in
// bench/RESULTS.md). Unrolled or not, every loop does the same operations in the same order: the results
// are the same bits.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define BASTION_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BASTION_SANITIZED_BUILD 1
#endif
#endif

#define BASTION_PRAGMA(text) _Pragma(#text)
#if defined(BASTION_SANITIZED_BUILD)
#define BASTION_UNROLL(n)
#else
#define BASTION_UNROLL(n) BASTION_PRAGMA(GCC unroll n)
#endif
