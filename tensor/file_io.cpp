// write_file_atomic and the stale-temporary sweep: see file_io.h.
#include "tensor/file_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tensor/error.h"

namespace bastion {

namespace {

// BASTION_TEST_SLOW_WRITES in milliseconds, read once; 0 when unset or not a number.
int slow_write_ms() {
  static const int ms = [] {
    const char* text = std::getenv("BASTION_TEST_SLOW_WRITES");
    return text == nullptr ? 0 : std::max(0, std::atoi(text));
  }();
  return ms;
}

// What a user can do about the usual reasons a write fails.
const char* hint(int error) {
  switch (error) {
    case ENOSPC:
      return " (the disk is full)";
    case EFBIG:
      return " (over the file-size limit: see ulimit -f)";
    case EACCES:
    case EPERM:
    case EROFS:
      return " (the folder is not writable)";
    default:
      return "";
  }
}

[[noreturn]] void fail(const std::string& path, const std::string& tmp, const char* step, int error) {
  std::remove(tmp.c_str());  // never leave a partial temporary behind
  BASTION_CHECK(false, "cannot write '", path, "': ", step, " '", tmp, "' failed: ", std::strerror(error), hint(error),
                "; the previous '", path, "', if any, is unchanged");
  std::abort();  // unreachable: BASTION_CHECK(false) throws
}

// The temporary's contents, flushed to disk; the failing step's name, or nullptr.
const char* fill_temporary(std::FILE* f, const FileWriter& write, int& error) {
  const char* step = nullptr;
  if (!write(f)) step = "writing";
  // fsync before rename: otherwise a power loss can leave the new name pointing at unwritten blocks.
  else if (std::fflush(f) != 0 || fsync(fileno(f)) != 0)
    step = "flushing";
  error = errno;
  return step;
}

bool is_stale_temporary(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0 || at + 5 == name.size()) return false;
  return name.find_first_not_of("0123456789", at + 5) == std::string::npos;
}

}  // namespace

std::string temporary_path(const std::string& path) { return path + ".tmp." + std::to_string(getpid()); }

bool write_bytes(std::FILE* f, const void* data, size_t bytes) {
  return bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes;
}

void write_file_atomic(const std::string& path, const FileWriter& write) {
  const std::string tmp = temporary_path(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail(path, tmp, "creating", errno);
  int error = 0;
  const char* step = nullptr;
  try {
    step = fill_temporary(f, write, error);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0 && step == nullptr) {
    step = "closing";
    error = errno;
  }
  if (step != nullptr) fail(path, tmp, step, error);
  if (slow_write_ms() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_write_ms()));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, tmp, "renaming", errno);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, [&](std::FILE* f) { return write_bytes(f, bytes.data(), bytes.size()); });
}

int remove_stale_temporaries(const std::string& dir) {
  std::error_code error;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    if (entry.is_regular_file(error) && is_stale_temporary(entry.path().filename().string()))
      removed += std::filesystem::remove(entry.path(), error) ? 1 : 0;
  return removed;
}

}  // namespace bastion
