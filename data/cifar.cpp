// STUB: replaced by the real reader.
#include "data/formats.h"
namespace bastion {
DatasetSplit load_cifar10_dir(const std::filesystem::path&) { BASTION_FAIL("load_cifar10_dir: not implemented yet"); }
DatasetSplit load_cifar100_dir(const std::filesystem::path&) { BASTION_FAIL("load_cifar100_dir: not implemented yet"); }
}
