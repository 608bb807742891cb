// Helpers shared by the search library's test files (search_test): how
// failures print strategies, a status matcher, and a few strategies, models
// and space requests to start from.
#ifndef AUTOACCEL_TESTS_SEARCH_TEST_UTIL_H_
#define AUTOACCEL_TESTS_SEARCH_TEST_UTIL_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/load_strategy.h"
#include "search/space.h"
#include "spec/model_spec.h"
#include "spec/partial_strategy.h"
#include "spec/strategy.h"
#include "spec/strategy_fields.h"
#include "spec/trial.h"
#include "spec/trial_metrics_fields.h"

namespace autoaccel {

// Failure messages show strategies as their canonical text.
inline void PrintTo(const Strategy& s, std::ostream* os) { *os << StrategyToText(s); }
inline void PrintTo(const PartialStrategy& p, std::ostream* os) { *os << "{" << p.ToText() << "}"; }

template <typename M>
auto InvalidArgument(M message_matcher) {
  return StatusIs(absl::StatusCode::kInvalidArgument, message_matcher);
}

// The strategy of a canonical text that must parse (a failure otherwise).
inline Strategy Parse(absl::string_view text) {
  absl::StatusOr<Strategy> s = ParseStrategyText(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.value_or(Strategy{});
}

// The partial strategy of a --load-strategy that must parse.
inline PartialStrategy Load(absl::string_view text) {
  absl::StatusOr<PartialStrategy> p = ParseLoadStrategy(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.value_or(PartialStrategy{});
}

inline Strategy MakeStrategy(int mbs, int ga, Precision p, Checkpointing c, Attention a) {
  Strategy s;
  s.micro_batch_size = mbs;
  s.grad_accum_steps = ga;
  s.precision = p;
  s.checkpointing = c;
  s.attention = a;
  return s;
}

// `s` with the given layout.
inline Strategy WithLayout(Strategy s, int dp, int tp, int pp,
                           Sharding sharding = Sharding::kNone) {
  s.data_parallel = dp;
  s.tensor_parallel = tp;
  s.pipeline_parallel = pp;
  s.sharding = sharding;
  return s;
}

inline std::vector<std::string> Texts(const std::vector<Strategy>& strategies) {
  std::vector<std::string> out;
  for (const Strategy& s : strategies) out.push_back(StrategyToText(s));
  return out;
}

inline constexpr absl::string_view kGpt2SmallConfig = R"({
  "model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
  "vocab_size": 50257, "n_positions": 1024, "n_inner": null,
  "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"
})";

inline ModelSpec Gpt2Small() {
  absl::StatusOr<ModelSpec> m = ParseModelConfig("gpt2", kGpt2SmallConfig);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.value_or(ModelSpec{});
}

// Llama-2-7B's shape: hidden 4096, 32 layers, 32 heads (no grouped-query
// attention), intermediate 11008, vocabulary 32000, 4096 positions.
inline constexpr absl::string_view kLlama7BConfig = R"({
  "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 11008,
  "vocab_size": 32000, "max_position_embeddings": 4096
})";

inline ModelSpec Llama7B() {
  absl::StatusOr<ModelSpec> m = ParseModelConfig("llama", kLlama7BConfig);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.value_or(ModelSpec{});
}

inline SpaceRequest BaseRequest(int global_batch_size, int world_size = 1) {
  SpaceRequest r;
  r.model = Gpt2Small();
  r.seq_len = 512;
  r.global_batch_size = global_batch_size;
  r.world_size = world_size;
  return r;
}

// The values the field-table tests give a field: counts 1, 2, 3, 7 and 100;
// both flags; every enumerator.
template <typename T>
std::vector<T> ValuesToTry(const StrategyField<T>& field) {
  if constexpr (std::is_same_v<T, bool>) {
    return {false, true};
  } else if constexpr (std::is_enum_v<T>) {
    std::vector<T> out;
    for (const auto& entry : field.names) out.push_back(entry.first);
    return out;
  } else {
    return {1, 2, 3, 7, 100};
  }
}

// Calls f(field, s) for every field and every value ValuesToTry() gives it,
// with s a valid strategy (CheckLayout, CheckCheckpointPercent) holding that
// value: the value set on the first of a few starting strategies (single-rank,
// every dimension set, pipelined 1f1b, 2100 data-parallel ranks, which every
// expert-parallel count tried divides) where the result is valid. Fails the
// test for a value that no starting strategy takes.
template <typename F>
void ForEveryFieldValue(F&& f) {
  const std::vector<Strategy> starts = {
      Strategy{},
      Parse("dp=2,tp=2,pp=2,sharding=zero1,sp=1,cp=2,cp_comm=all_gather,ep=2,"
            "pp_schedule=interleaved,vpp=2,mbs=4,ga=8,precision=bf16,checkpoint=selective,"
            "ckpt_pct=50,attention=sdpa,optimizer=fused_adamw,offload=cpu"),
      Parse("dp=2,tp=2,pp=2,sharding=none,checkpoint=full"),
      Parse("dp=2100,tp=1,pp=1,sharding=none,mbs=1,ga=1,precision=fp32,checkpoint=none,attention="
            "math,optimizer=adamw,offload=none")};
  ForEachRow(kStrategyFields, [&](const auto& field) {
    using T = RowValue<decltype(field)>;
    for (const T value : ValuesToTry(field)) {
      bool tried = false;
      for (Strategy s : starts) {
        s.*field.member = value;
        if (!CheckLayout(s).ok() || !CheckCheckpointPercent(s).ok()) continue;
        f(field, s);
        tried = true;
        break;
      }
      EXPECT_TRUE(tried) << field.name << ": no valid strategy for " << FieldText(field, value);
    }
  });
}

// Metrics with every field set to a value of its own, none zero (the k-th
// row: k + 1, 2^40 + k, k + 0.25, {k, 2^33 + k}).
inline TrialMetrics EveryMetricSet() {
  TrialMetrics m;
  int k = 0;
  ForEachRow(kTrialMetricsFields, [&](const auto& field) {
    using T = RowValue<decltype(field)>;
    if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      m.*field.member = {k, (int64_t{1} << 33) + k};
    } else if constexpr (std::is_same_v<T, double>) {
      m.*field.member = k + 0.25;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      m.*field.member = (int64_t{1} << 40) + k;
    } else {
      m.*field.member = k + 1;
    }
    ++k;
  });
  return m;
}

// Every field of `a` equals `b`'s (TrialMetrics has no operator==).
inline void ExpectSameMetrics(const TrialMetrics& a, const TrialMetrics& b) {
  ForEachRow(kTrialMetricsFields,
             [&](const auto& field) { EXPECT_EQ(a.*field.member, b.*field.member) << field.name; });
}

}  // namespace autoaccel

#endif  // AUTOACCEL_TESTS_SEARCH_TEST_UTIL_H_
