#include <gtest/gtest.h>
#include "autograd/ops.h"
#include "autograd/gradcheck.h"
using namespace bastion;
TEST(Smoke, LinearGrad) {
  Generator gen(1);
  Tensor x = Tensor::randn({3, 4}, gen).set_requires_grad(true);
  Tensor w = Tensor::randn({2, 4}, gen).set_requires_grad(true);
  Tensor b = Tensor::randn({2}, gen).set_requires_grad(true);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
  EXPECT_TRUE(r.ok) << r.first_failure;
}
