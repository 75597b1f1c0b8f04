// Whole-file writes that never leave a half-written file behind: the bytes go to the temporary
// "<path>.tmp.<pid>", are flushed to disk (fsync), then renamed over `path` (atomic on POSIX
// filesystems). A process killed at any moment leaves either the old file or the new one under `path`,
// plus at most a stale temporary (remove_stale_temporaries clears those). On a failed write (full disk,
// file-size limit, read-only folder) the temporary is removed, `path` keeps its previous contents, and
// bastion::Error names the path, the step and the system's reason. Used for every file a run writes:
// results (CSV, JSON, SVG, PNG) and, through the streaming overload, safetensors checkpoints.
//
// Test-only hook: BASTION_TEST_SLOW_WRITES=<ms> sleeps that long between the fsync and the rename of
// every write, so that a crash test (scripts/crash_test.sh) can kill the process while a temporary
// exists. Never set it outside tests.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace bastion {

// Writes the file's contents to f; returns false (with errno set) as soon as one write fails.
using FileWriter = std::function<bool(std::FILE* f)>;

void write_file_atomic(const std::string& path, std::string_view bytes);
void write_file_atomic(const std::string& path, const FileWriter& write);

// fwrite of all `bytes`; false (errno set) when fewer were written. For FileWriter bodies.
bool write_bytes(std::FILE* f, const void* data, size_t bytes);

// "<path>.tmp.<pid>": the temporary write_file_atomic uses in this process.
std::string temporary_path(const std::string& path);
// Removes the files of `dir` (not its subfolders) named "<name>.tmp.<digits>", the temporaries a killed
// writer leaves behind; returns how many it removed. Missing folder: 0.
int remove_stale_temporaries(const std::string& dir);

}  // namespace bastion
