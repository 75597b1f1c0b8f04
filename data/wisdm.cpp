// STUB: replaced by the real reader.
#include "data/formats.h"
namespace bastion {
DatasetSplit load_wisdm_raw_dir(const std::filesystem::path&) { BASTION_FAIL("load_wisdm_raw_dir: not implemented yet"); }
DatasetSplit load_wisdm_features_dir(const std::filesystem::path&) { BASTION_FAIL("load_wisdm_features_dir: not implemented yet"); }
}
