// STUB: replaced by the real reader.
#include "data/formats.h"
namespace bastion {
DatasetSplit load_svhn_dir(const std::filesystem::path&) { BASTION_FAIL("load_svhn_dir: not implemented yet"); }
}
