// Shared by the fuzz targets: FUZZ_EXPECT checks a property of a parser's successful result. A violation
// is a bug like a crash, so it aborts (libFuzzer then saves the input as a crash-* file).
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_EXPECT(cond)                                                                       \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "fuzz property violated: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)
