#include "autograd/flops.h"

namespace bastion {

namespace {
thread_local int64_t flops_on_this_thread = 0;
}  // namespace

void count_flops(int64_t flops) { flops_on_this_thread += flops; }

int64_t thread_flops() { return flops_on_this_thread; }

}  // namespace bastion
