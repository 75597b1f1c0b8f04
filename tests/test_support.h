// Helpers shared by the test files: error-message checks, a fresh temp folder per test, writing
// (optionally gzipped) fixture files, and running the `bastion` binary. Header-only; each test file
// includes it once.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "tensor/error.h"

namespace bastion::testing {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// Hand-computed examples are exact in a few float operations (or come from libm; the server rules sum in
// double and round once): 1e-6 relative covers a handful of roundings of O(1) values (float epsilon
// 1.2e-7) with margin.
inline constexpr float kHandTolerance = 1e-6f;

// Whether a dataset is installed where find_dataset_dir looks (BASTION_DATA, /usr/share/datasets):
// tests that need real data skip without it.
inline bool dataset_installed(const std::string& name) {
  try {
    find_dataset_dir(name, "");
    return true;
  } catch (const Error&) {
    return false;
  }
}

inline void put_be32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

inline void put_le32(Bytes& out, uint32_t v) {
  for (int shift = 0; shift <= 24; shift += 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

inline void append(Bytes& out, const Bytes& more) { out.insert(out.end(), more.begin(), more.end()); }

// n images of C×H×W whose pixels are a fixed function of (sample, position) modulo `modulus` (250 keeps
// every pixel below 255, so a raw trigger value of 1.0 always changes it), labels i % classes; mean and
// std per channel as given, or 0 and 1 when empty (normalised value = pixel / 255).
inline Dataset pattern_images(int64_t n, int64_t channels, int64_t height, int64_t width, int64_t classes = 10,
                              int64_t modulus = 256, std::vector<float> mean = {}, std::vector<float> std = {}) {
  Dataset d;
  d.name = "test-images";
  d.channels = channels;
  d.height = height;
  d.width = width;
  d.num_classes = classes;
  for (int64_t i = 0; i < n; ++i) {
    d.labels.push_back(static_cast<int32_t>(i % classes));
    for (int64_t k = 0; k < d.sample_numel(); ++k)
      d.pixels.push_back(static_cast<uint8_t>((i * 131 + k * 37 + 11) % modulus));
  }
  d.mean = mean.empty() ? std::vector<float>(static_cast<size_t>(channels), 0.0f) : std::move(mean);
  d.std = std.empty() ? std::vector<float>(static_cast<size_t>(channels), 1.0f) : std::move(std);
  return d;
}

// Runs fn, which must throw bastion::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected bastion::Error mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

// Writes plain bytes, or gzip through zlib when the name ends in ".gz"; creates missing folders.
inline void write_file(const fs::path& path, const Bytes& bytes) {
  fs::create_directories(path.parent_path());
  if (path.extension() == ".gz") {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
}

inline void write_text(const fs::path& path, const std::string& text) {
  write_file(path, Bytes(text.begin(), text.end()));
}

inline Bytes read_raw(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// A fresh temp folder per test (named after the suite and test, so parallel CTest processes never
// share one), removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // A parameterised test's names hold '/' ("Rules/Suite", "Test/0"): kept, it would make a folder per
    // prefix, and TearDown would remove only the innermost one.
    std::string name = std::string(info->test_suite_name()) + "-" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / ("bastion-" + std::to_string(getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs a /bin/sh command line, capturing what it prints (add 2>&1 for stderr).
inline RunResult run_shell(const std::string& command) {
  RunResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;  // -1: killed by a signal
  return result;
}

// Runs the bastion binary built beside the tests with `args`, capturing both output streams.
inline RunResult run_bastion(const std::string& args) {
  return run_shell(std::string(BASTION_BINARY) + " " + args + " 2>&1");
}

}  // namespace bastion::testing
