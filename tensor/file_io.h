// Whole-file writes that never leave a half-written file behind: the bytes go to "<path>.tmp", are
// flushed to disk (fsync), then renamed over `path` (atomic on POSIX filesystems). On any failure the
// temporary is removed and bastion::Error names the path and the system's reason. Used for every
// results file the CLI writes (CSV, PNG); safetensors has its own streaming writer with the same rule.
#pragma once

#include <string>
#include <string_view>

namespace bastion {

void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace bastion
