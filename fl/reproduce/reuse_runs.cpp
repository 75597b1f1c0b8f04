#include "fl/reproduce/reuse_runs.h"

#include <algorithm>
#include <filesystem>

#include "fl/core/config.h"
#include "fl/reproduce/run_record.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion {

namespace {

namespace fs = std::filesystem;

// What a run's record holds: not checkpoints, not a write in progress, not the folder's lock.
bool record_file(const std::string& name) {
  return name.rfind("checkpoint", 0) != 0 && name.find(".tmp.") == std::string::npos && name != ".bastion-lock";
}

// Symbolic links are neither followed nor copied, as --merge-from's copy does.
void copy_record(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const fs::directory_entry& entry : fs::directory_iterator(from)) {
    const std::string name = entry.path().filename().string();
    if (!record_file(name) || entry.is_symlink()) continue;
    if (entry.is_directory()) {
      if (name.rfind("seed-", 0) == 0) copy_record(entry.path(), to / name);
    } else if (entry.is_regular_file()) {
      fs::copy_file(entry.path(), to / name);
    }
  }
}

// An output run folder reuse may fill: absent, or empty (made by an earlier invocation that failed first).
bool free_for_reuse(const fs::path& dir) { return !fs::exists(dir) || (fs::is_directory(dir) && fs::is_empty(dir)); }

}  // namespace

std::vector<std::string> reusable_runs(const std::vector<std::string>& sources) {
  std::vector<std::string> runs;
  for (const std::string& source : sources) {
    const fs::path folder = fs::path(source) / "runs";
    BASTION_CHECK(fs::is_directory(folder), "reproduce --reuse-from ", source,
                  ": no runs/ folder (give the --out folder of an earlier `bastion reproduce`)");
    std::vector<std::string> found;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder))
      if (entry.is_directory() && record_file(entry.path().filename().string()) &&  // not a copy under way
          fs::exists(entry.path() / "summary.json") && fs::exists(entry.path() / "config.toml"))
        found.push_back(entry.path().string());
    std::sort(found.begin(), found.end());
    runs.insert(runs.end(), found.begin(), found.end());
  }
  return runs;
}

std::string find_reusable(const std::vector<std::string>& runs, const std::string& resolved_config) {
  for (const std::string& run : runs)
    if (finished_with(run, resolved_config)) return run;
  return "";
}

std::vector<ReusedRun> reuse_finished_runs(const std::string& base, const PresetGrid& grid, const std::string& out_dir,
                                           const std::vector<std::string>& sources) {
  const std::vector<std::string> candidates = reusable_runs(sources);
  std::vector<ReusedRun> reused;
  for (size_t i = 0; i < grid.runs.size(); ++i) {
    const fs::path target = fs::path(out_dir) / "runs" / grid.runs[i].folder;
    if (!free_for_reuse(target)) continue;
    const std::string source = find_reusable(candidates, config_to_toml(load_config(base, grid.runs[i].overrides)));
    if (source.empty()) continue;
    const fs::path staging = temporary_path(target.string());  // write_file_atomic's "<path>.tmp.<pid>"
    fs::remove_all(staging);
    copy_record(source, staging);
    fs::remove(target);  // an empty folder, if any
    fs::rename(staging, target);
    reused.push_back({i, source});
  }
  return reused;
}

}  // namespace bastion
