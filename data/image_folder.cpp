// STUB: replaced by the real reader.
#include "data/formats.h"
namespace bastion {
DatasetSplit load_tinyimagenet_dir(const std::filesystem::path&) { BASTION_FAIL("load_tinyimagenet_dir: not implemented yet"); }
DatasetSplit load_image_folder_dir(const std::filesystem::path&) { BASTION_FAIL("load_image_folder_dir: not implemented yet"); }
}
