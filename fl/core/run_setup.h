// The parts of a run that are set up once, before the round loop (fl/core/seed_run.cpp): the data
// shared by every seed, the partition spec, the attacks sorted by where they act, and the results
// folder checks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/partition.h"
#include "data/transforms.h"
#include "fl/attacks/attack.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "nn/model.h"

namespace bastion {

// Data shared by every seed of a run: loaded and normalised once, read-only afterwards.
struct SharedData {
  Dataset train, test;
  TransformSpec train_transform, eval_transform;
  InputShape input;
};
SharedData load_shared_data(const ExperimentConfig& c);

PartitionSpec partition_spec(const Params& data);

// The attacks of a run, sorted by where they act (fl/attacks/attack.h).
struct AttackSet {
  std::vector<std::unique_ptr<Attack>> owned;
  const Attack* data = nullptr;  // Data or Training
  const Attack* collusion = nullptr;
  std::string collusion_name;         // its registered name (summary.json's resolved values)
  std::vector<const Attack*> upload;  // in config order
};
AttackSet make_attacks(const ExperimentConfig& c);

// The resolved config without the keys a resumed run may change: the top-level `rounds` (to extend a
// run) and the [run] table (threads and checkpoint frequency change how the rounds are computed, not
// what they compute). Anything else that changed would make the continuation a different experiment.
std::string resumable_part(const std::string& toml);
// The resolved config without the [run] table: two configs with the same computed part give the same
// results (a finished run made with other threads or checkpoint frequency needs no rerun).
std::string computed_part(const std::string& toml);
// The first line where two configs' texts differ, as "[table] 'a' there, 'b' here" ("none" when equal).
std::string first_config_difference(const std::string& there, const std::string& here);
// Throws, naming `what` and the first differing line, unless the two configs' resumable parts agree.
void check_resumable(const std::string& what, const std::string& recorded_toml, const std::string& config_toml);
// --resume: checks the config against the folder's config.toml (when there is one) before anything in
// the folder is written, so a refused resume leaves the folder as it was.
void check_resume_folder(const std::string& dir, const std::string& config_toml);

// Creates `dir`; refuses a folder that already holds results unless resuming or overwriting, a folder that
// holds anything a run does not write unless overwriting (the foreign files are then left alone), and a
// folder whose run files or seed-<s> folders are symbolic links (never followed, never deleted through);
// removes the temporaries ("<file>.tmp.<pid>") a killed run left there, and with overwrite (without resume)
// the previous run's files (its checkpoint included) and seed-<s> folders.
void prepare_out_dir(const std::string& dir, const RunOptions& options);

// The results folder is one process's for the run's lifetime: an exclusive flock on `dir`/.bastion-lock,
// released when this object goes (or the process dies). A second process on the same folder fails in its
// constructor with one line, before it reads or deletes anything there. Creates `dir` if needed.
class ResultsFolderLock {
 public:
  explicit ResultsFolderLock(const std::string& dir);
  ~ResultsFolderLock();
  ResultsFolderLock(const ResultsFolderLock&) = delete;
  ResultsFolderLock& operator=(const ResultsFolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace bastion
