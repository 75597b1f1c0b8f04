// Where `bastion reproduce NAME` and `bastion list presets` look for the paper presets: ./configs/papers
// in a checkout, else the tree an installed binary ships (<prefix>/share/bastion/configs/papers beside
// <prefix>/bin/bastion, e.g. /usr from the Debian package, scripts/package.sh).
#include <filesystem>
#include <system_error>

#include "cli/commands.h"

namespace bastion::cli {

std::string presets_folder() {
  namespace fs = std::filesystem;
  const fs::path checkout = "configs/papers";
  if (fs::is_directory(checkout)) return checkout.string();
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "bastion" / "configs" / "papers";
    if (fs::is_directory(installed)) return installed.string();
  }
  return checkout.string();  // named in the "no preset" error
}

}  // namespace bastion::cli
