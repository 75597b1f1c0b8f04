// STUB: replaced by the real generator.
#include "data/formats.h"
namespace bastion {
DatasetSplit load_synthetic_default() { BASTION_FAIL("synthetic: not implemented yet"); }
}
