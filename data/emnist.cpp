// STUB: replaced by the real reader.
#include "data/formats.h"
namespace bastion {
DatasetSplit load_emnist_byclass_dir(const std::filesystem::path&) { BASTION_FAIL("load_emnist_byclass_dir: not implemented yet"); }
DatasetSplit load_emnist_letters_dir(const std::filesystem::path&) { BASTION_FAIL("load_emnist_letters_dir: not implemented yet"); }
}
