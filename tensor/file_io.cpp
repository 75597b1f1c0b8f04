// write_file_atomic: see file_io.h.
#include "tensor/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tensor/error.h"

namespace bastion {

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  BASTION_CHECK(f != nullptr, "cannot write '", tmp, "': ", std::strerror(errno));
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  // fsync before rename: otherwise a power loss can leave the new name pointing at unwritten blocks.
  const bool flushed = written && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  const bool renamed = flushed && closed && std::rename(tmp.c_str(), path.c_str()) == 0;
  const int error = errno;
  if (!renamed) std::remove(tmp.c_str());
  BASTION_CHECK(renamed, "cannot write '", path, "': ",
                !written ? "short write" : !flushed ? "flush failed" : !closed ? "close failed" : "rename failed",
                ": ", std::strerror(error));
}

}  // namespace bastion
