#include "fl/core/run_setup.h"

#include <filesystem>

#include "fl/registry.h"
#include "tensor/error.h"

namespace bastion {

SharedData load_shared_data(const ExperimentConfig& c) {
  DatasetSplit split = load_dataset(c.data.text("dataset"), c.data.text("data_dir"));
  // FedFSA pools the two sets before partitioning; the test set stays the global test set.
  if (c.data.boolean("pool_train_test")) split.train = concat_datasets(split.train, split.test);
  SharedData shared{std::move(split.train), std::move(split.test), {}, {}, {}};
  apply_normalization_preset(shared.train, c.data.text("normalization"));
  apply_normalization_preset(shared.test, c.data.text("normalization"));
  if (c.data.text("augment") == "default") shared.train_transform = default_train_transform(shared.train.name);
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
    if (entry.kind == AttackKind::Data || entry.kind == AttackKind::Training) set.data = attack;
    else if (entry.kind == AttackKind::Collusion) set.collusion = attack;
    else set.upload.push_back(attack);
  }
  return set;
}

std::string without_rounds(const std::string& toml) {
  std::string out, line;
  for (size_t begin = 0; begin < toml.size();) {
    size_t end = toml.find('\n', begin);
    if (end == std::string::npos) end = toml.size();
    line = toml.substr(begin, end - begin);
    if (line.rfind("rounds =", 0) != 0) out += line + "\n";
    begin = end + 1;
  }
  return out;
}
void prepare_out_dir(const std::string& dir, const RunOptions& options) {
  BASTION_CHECK(!dir.empty(), "no output folder given");
  const bool has_results = std::filesystem::exists(dir + "/rounds.csv") || std::filesystem::exists(dir + "/summary.json");
  BASTION_CHECK(!has_results || options.resume || options.overwrite, "'", dir,
                "' already holds results: pass --resume to continue that run, --overwrite to replace it, or --out "
                "for another folder");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  BASTION_CHECK(!error, "cannot create the output folder '", dir, "': ", error.message());
}

}  // namespace bastion
