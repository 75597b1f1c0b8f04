#include "fl/core/run_setup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <filesystem>
#include <sstream>

#include "data/idx.h"
#include "fl/registry.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion {

SharedData load_shared_data(const ExperimentConfig& c) {
  DatasetSplit split = load_dataset(c.data.text("dataset"), c.data.text("data_dir"));
  // FedFSA pools the two sets before partitioning; the test set stays the global test set.
  if (c.data.boolean("pool_train_test")) split.train = concat_datasets(split.train, split.test);
  SharedData shared{std::move(split.train), std::move(split.test), {}, {}, {}};
  apply_normalization_preset(shared.train, c.data.text("normalization"));
  apply_normalization_preset(shared.test, c.data.text("normalization"));
  if (c.data.text("augment") == "default") shared.train_transform = default_train_transform(shared.train.name);
  if (c.data.text("augment") == "spmc-digits") {  // SPMC's mnist.py / fashionmnist.py (IMPLEMENTATION-FACTS §2.3)
    shared.train_transform.resize = 32;
    shared.train_transform.crop_padding = 4;
    shared.train_transform.replicate_channels = 3;
  }
  // Test time keeps only the deterministic steps (resize, channel replication): no crop, no flip.
  shared.eval_transform.resize = shared.train_transform.resize;
  shared.eval_transform.replicate_channels = shared.train_transform.replicate_channels;
  const SampleShape shape = transformed_shape(shared.train, shared.train_transform);
  shared.input = {shape.channels, shape.height, shape.width};
  return shared;
}

PartitionSpec partition_spec(const Params& data) {
  PartitionSpec spec = parse_partition(data.text("partition"));
  spec.min_size = data.integer("min_size");
  spec.dirichlet_cap = data.boolean("dirichlet_cap");
  spec.dirichlet_client_prior = data.boolean("client_prior");
  spec.max_per_client = data.integer("max_per_client");
  spec.client_test_fraction = data.real("client_test_fraction");
  spec.server_fraction = data.real("server_fraction");
  return spec;
}

AttackSet make_attacks(const ExperimentConfig& c) {
  AttackSet set;
  for (const auto& [name, params] : c.attacks) {
    const AttackEntry& entry = find_attack(name);
    set.owned.push_back(entry.make(params));
    const Attack* attack = set.owned.back().get();
    if (entry.kind == AttackKind::Data || entry.kind == AttackKind::Training)
      set.data = attack;
    else if (entry.kind == AttackKind::Collusion) {
      set.collusion = attack;
      set.collusion_name = name;
    } else
      set.upload.push_back(attack);
  }
  return set;
}

namespace {
// The config's lines less the [run] table and, when `drop_rounds`, less the top-level `rounds`.
std::string config_lines_without(const std::string& toml, bool drop_rounds) {
  std::string out, line, section;
  for (size_t begin = 0; begin < toml.size();) {
    size_t end = toml.find('\n', begin);
    if (end == std::string::npos) end = toml.size();
    line = toml.substr(begin, end - begin);
    begin = end + 1;
    if (line.rfind('[', 0) == 0) section = line;
    const bool rounds_line = section.empty() && line.rfind("rounds =", 0) == 0;
    if (section != "[run]" && !(drop_rounds && rounds_line)) out += line + "\n";
  }
  return out;
}
}  // namespace

// A recorded config.toml as today's code writes it: a key added to a rule since the run was made reads as
// its default. Every new option defaults to the behaviour before it (fl/README.md, "Add a unit"), so the
// recorded run is the same experiment; a changed value is still a difference. A recorded config that no
// longer parses (a key removed since) is compared as written, and so differs.
std::string canonical_config_toml(const std::string& toml) {
  try {
    return config_to_toml(parse_config(toml, "a recorded config.toml"));
  } catch (const Error&) {
    return toml;
  }
}

std::string resumable_part(const std::string& toml) { return config_lines_without(canonical_config_toml(toml), true); }

std::string computed_part(const std::string& toml) { return config_lines_without(canonical_config_toml(toml), false); }

std::string first_config_difference(const std::string& there, const std::string& here) {
  std::istringstream a(there), b(here);
  std::string line_a, line_b, table;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, line_a)), more_b = static_cast<bool>(std::getline(b, line_b));
    if (!more_a && !more_b) return "none";
    if (more_a && more_b && line_a == line_b) {
      if (line_a.rfind('[', 0) == 0) table = line_a + " ";
      continue;
    }
    std::ostringstream text;  // not "'" + string: GCC 12's -Wrestrict false positive on operator+
    text << table << "'" << (more_a ? line_a : "") << "' there, '" << (more_b ? line_b : "") << "' here";
    return text.str();
  }
}

void check_resumable(const std::string& what, const std::string& recorded_toml, const std::string& config_toml) {
  const std::string there = resumable_part(recorded_toml), here = resumable_part(config_toml);
  if (there == here) return;
  const std::string difference = first_config_difference(there, here);
  // More seeds (reproduce --seeds, `repeat`) change where each seed's files go and what summary.json
  // averages, so they are refused like any other change; the way to add seeds is a folder of their own.
  const bool seeds = difference.rfind("'repeat = ", 0) == 0;
  BASTION_FAIL("cannot resume from ", what, ": it was written by a different configuration (only ",
               "`rounds` and the [run] table may change; first difference: ", difference, ")",
               seeds ? "; to add seeds, run only the new ones into another folder: --set seed=<first new seed> with "
                       "--set repeat=<how many> (reproduce: --seeds <how many>; then --merge-from assembles the table "
                       "of all seeds)"
                     : "");
}

void check_resume_folder(const std::string& dir, const std::string& config_toml) {
  const std::string path = dir + "/config.toml";
  if (!std::filesystem::exists(path)) return;  // killed before its first write: nothing recorded yet
  check_resumable(path, read_text_file(path), config_toml);
}

namespace {
// The files `bastion run` writes in a results folder (and in its seed-<s> folders): --overwrite deletes them.
constexpr const char* kRunFiles[] = {
    "config.toml",       "rounds.csv",
    "timing.csv",        "summary.json",
    "curves.svg",        "checkpoint.safetensors",
    "client_notes.csv",  "clients.csv",
    "model.safetensors", "personal-models.safetensors",
    "partition.csv",     "report.html"};  // bastion report's default page: a resume keeps it
// `reproduce`'s record of the invocations that ran a cell (fl/reproduce/reproduce.cpp keeps it itself).
constexpr const char* kProvenanceFile = "provenance.tsv";
constexpr const char* kLockFile = ".bastion-lock";

bool is_run_file(const std::string& name) {
  for (const char* file : kRunFiles)
    if (name == file) return true;
  return false;
}

bool is_seed_folder_name(const std::string& name) { return name.rfind("seed-", 0) == 0; }

// "<file>.tmp.<digits>": what write_file_atomic leaves when it is killed.
bool is_temporary(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at + 5 == name.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(at + 5), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// Refuses symbolic links among the names a run reads, writes or deletes, and (unless overwriting)
// anything else a run does not write.
void check_folder_contents(const std::string& dir, const RunOptions& options) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool ours = is_run_file(name) || is_seed_folder_name(name) || is_temporary(name) || name == kLockFile ||
                      name == kProvenanceFile;
    BASTION_CHECK(!ours || !entry.is_symlink(error), "'", entry.path().string(),
                  "' is a symbolic link: a results folder's run files and seed folders must be its own (remove the "
                  "link, or choose another --out)");
    BASTION_CHECK(ours || options.overwrite, "'", dir, "' holds '", name, "', which a run does not write: choose an ",
                  "empty or new folder with --out, or pass --overwrite (other files are left alone)");
  }
}

// --overwrite: the previous run's files go first, so that an old checkpoint (or seed folder) can never be
// taken for this run's by a later --resume. Only the names a run writes are touched, and no link is
// followed (check_folder_contents refused them).
void remove_previous_results(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_symlink(error) || !entry.is_directory(error) || !is_seed_folder_name(name)) continue;
    for (const char* file : kRunFiles) std::filesystem::remove(entry.path() / file, error);
    std::filesystem::remove(entry.path(), error);  // only when empty now
  }
  for (const char* file : kRunFiles) std::filesystem::remove(std::filesystem::path(dir) / file, error);
}
}  // namespace

ResultsFolderLock::ResultsFolderLock(const std::string& dir) {
  BASTION_CHECK(!dir.empty(), "no output folder given");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  BASTION_CHECK(!error, "cannot create the output folder '", dir, "': ", error.message());
  const std::string path = dir + "/" + kLockFile;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0 && (errno == EACCES || errno == EPERM || errno == EROFS))
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);  // flock needs no write access
  // A folder this process cannot write: nothing to guard (the run's first write fails with the reason).
  if (fd_ < 0 && (errno == EACCES || errno == EPERM || errno == EROFS || errno == ENOENT)) return;
  BASTION_CHECK(fd_ >= 0, "cannot open the lock file '", path, "': ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int why = errno;
    ::close(fd_);
    fd_ = -1;
    BASTION_CHECK(why != EWOULDBLOCK, "'", dir, "' is in use by another bastion process (it holds ", path,
                  "): wait for that run to end, or choose another --out");
    BASTION_FAIL("cannot lock '", path, "': ", std::strerror(why));
  }
}

ResultsFolderLock::~ResultsFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

void prepare_out_dir(const std::string& dir, const RunOptions& options) {
  BASTION_CHECK(!dir.empty(), "no output folder given");
  const bool has_results =
      std::filesystem::exists(dir + "/rounds.csv") || std::filesystem::exists(dir + "/summary.json");
  BASTION_CHECK(!has_results || options.resume || options.overwrite, "'", dir,
                "' already holds results: pass --resume to continue that run, --overwrite to replace it, or --out "
                "for another folder");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  BASTION_CHECK(!error, "cannot create the output folder '", dir, "': ", error.message());
  check_folder_contents(dir, options);
  remove_stale_temporaries(dir);  // a killed run's temporaries: never read again, only clutter
  if (options.overwrite && !options.resume) remove_previous_results(dir);
}

}  // namespace bastion
