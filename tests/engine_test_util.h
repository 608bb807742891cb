// Helpers shared by the engine tests.
#ifndef AUTOACCEL_TESTS_ENGINE_TEST_UTIL_H_
#define AUTOACCEL_TESTS_ENGINE_TEST_UTIL_H_

#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/model.h"
#include "engine/trainer.h"
#include "gtest/gtest.h"
#include "tests/model_test_util.h"

namespace autoaccel::testing {

// A GPT-2 trial whose strategies' memory effects show: 4 layers, T=64 (math
// attention keeps [B, heads, T, T] scores per layer), mbs 8, one measured step.
inline TrialSpec MediumGptTrialSpec() {
  TrialSpec spec = TinyTrialSpec(TinyModelSpec("gpt2"), 8, 1);
  spec.model.n_layer = 4;
  spec.model.n_positions = 64;
  spec.seq_len = 64;
  spec.warmup_steps = 0;
  spec.measured_steps = 1;
  return spec;
}

inline std::unique_ptr<Trainer> MakeTrainer(const TrialSpec& spec) {
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(spec);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

inline double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Every parameter of `a` and `b` has a gradient, and they agree within `tol`
// (max absolute difference relative to the gradient's own scale, floored at 1).
inline void ExpectSameGrads(const std::shared_ptr<TrainableModel>& a,
                            const std::shared_ptr<TrainableModel>& b, double tol) {
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i].key(), pb[i].key());
    const torch::Tensor ga = pa[i].value().grad(), gb = pb[i].value().grad();
    ASSERT_TRUE(ga.defined()) << pa[i].key();
    ASSERT_TRUE(gb.defined()) << pb[i].key();
    const double scale = std::max(1.0, ga.abs().max().item<double>());
    EXPECT_LE(MaxAbsDiff(ga, gb), tol * scale) << pa[i].key();
  }
}

// How many nodes of the autograd graph behind `root` have a name() that
// contains `name_part` (each node counted once).
inline int CountGraphNodes(const torch::Tensor& root, const std::string& name_part) {
  std::vector<torch::autograd::Node*> stack;
  std::unordered_set<torch::autograd::Node*> seen;
  if (root.grad_fn()) stack.push_back(root.grad_fn().get());
  int count = 0;
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (node->name().find(name_part) != std::string::npos) ++count;
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      if (edge.function) stack.push_back(edge.function.get());
    }
  }
  return count;
}

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_ENGINE_TEST_UTIL_H_
