// --load-strategy in ATorch's form (search/atorch_strategy.h): a method list
// written as a Python literal (search/python_literal.h).
#include <string>

#include "absl/status/status.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/load_strategy.h"
#include "spec/partial_strategy.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

TEST(LoadStrategy, AtorchExampleFromTheDocs) {
  const PartialStrategy p = Load(R"(["zero2", ("amp_native", {"dtype": "bf16"}), "checkpoint"])");
  EXPECT_EQ(p.sharding, Sharding::kZero2);
  EXPECT_EQ(p.precision, Precision::kBf16);
  EXPECT_EQ(p.checkpointing, Checkpointing::kFull);
  EXPECT_EQ(p.CountSet(), 3);
  EXPECT_FALSE(p.data_parallel.has_value());
  EXPECT_FALSE(p.checkpoint_percent.has_value());
  EXPECT_EQ(p.ToText(), "sharding=zero2,precision=bf16,checkpoint=full");
  EXPECT_EQ(Load(p.ToText()), p);
}

// A strategy as ATorch users write it in Python, comments and all.
TEST(LoadStrategy, AtorchListAsWrittenInPython) {
  const PartialStrategy p = Load(R"(
    [
        ("parallel_mode", ([("data", 4)], None)),
        "module_replace",  # fused attention kernels
        ("fsdp", {"sync_module_states": True, "atorch_wrap_cls": {GPT2Block,}, "x": -1.5e-3}),
        ("amp_native", {"dtype": torch.bfloat16, "skip_if_nonfinite": True}, False),
        ("checkpoint", {"wrap_class": (LlamaDecoderLayer,), "no_reentrant": False}),
    ]
  )");
  EXPECT_EQ(p.ToText(), "dp=4,sharding=fsdp,precision=bf16,checkpoint=full,attention=sdpa");
}

TEST(LoadStrategy, AmpNativeDtypes) {
  EXPECT_EQ(Load(R"([("amp_native", {"dtype": torch.float16})])").precision, Precision::kFp16);
  EXPECT_EQ(Load(R"([("amp_native", {"dtype": torch.bfloat16})])").precision, Precision::kBf16);
  EXPECT_EQ(Load(R"([('amp_native', 'float16')])").precision, Precision::kFp16);
  EXPECT_EQ(Load(R"([("amp_native", torch.half)])").precision, Precision::kFp16);
  EXPECT_EQ(Load(R"(["amp_native"])").precision, Precision::kBf16);
  EXPECT_EQ(Load(R"([("amp_native", None)])").precision, Precision::kBf16);
  EXPECT_EQ(Load(R"([("amp_native", {"skip_if_nonfinite": True})])").precision, Precision::kBf16);
  EXPECT_THAT(ParseLoadStrategy(R"([("amp_native", {"dtype": torch.int8})])").status(),
              InvalidArgument(StartsWith("load_strategy: amp_native: unknown dtype 'torch.int8' "
                                         "(allowed: bf16, ")));
}

TEST(LoadStrategy, HalfIsPureBf16AndRefusesFloat16) {
  EXPECT_EQ(Load(R"(["half"])").precision, Precision::kPureBf16);
  EXPECT_EQ(Load(R"([("half", "bf16")])").precision, Precision::kPureBf16);
  constexpr absl::string_view kNoPureFp16 =
      "load_strategy: half with float16 is not supported (pure fp16 training); use amp_native "
      "with fp16";
  EXPECT_THAT(ParseLoadStrategy(R"([("half", "fp16")])").status(),
              InvalidArgument(Eq(kNoPureFp16)));
  EXPECT_THAT(ParseLoadStrategy(R"([("half", {"dtype": torch.float16})])").status(),
              InvalidArgument(Eq(kNoPureFp16)));
}

TEST(LoadStrategy, ParallelMode) {
  PartialStrategy p =
      Load(R"([("parallel_mode", ([("data", 4), ("tensor", 2), ("pipeline", 2)], None))])");
  EXPECT_EQ(p.ToText(), "dp=4,tp=2,pp=2");
  // "pipe" for pipeline, the bare list of pairs, ATorch's third (tunable) item.
  p = Load(R"([("parallel_mode", [("pipe", 4), ("data", 2)], False), "zero1"])");
  EXPECT_EQ(p.ToText(), "dp=2,pp=4,sharding=zero1");
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", ([("expert", 2)], None))])").status(),
              InvalidArgument(Eq("load_strategy: parallel_mode: unknown group 'expert' "
                                 "(allowed: data, tensor, pipeline, pipe)")));
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", ([("data", 0)], None))])").status(),
              InvalidArgument(Eq("load_strategy: parallel_mode data: expected a positive "
                                 "integer size, got 0")));
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", "data")])").status(),
              InvalidArgument(StartsWith("load_strategy: parallel_mode: expected ([(")));
  // The degrees must allow the other methods: sharding over one rank cannot be.
  EXPECT_THAT(ParseLoadStrategy(R"([("parallel_mode", ([("data", 1)], None)), "fsdp"])").status(),
              InvalidArgument(StartsWith("load_strategy: strategy.sharding: fsdp shards")));
}

TEST(LoadStrategy, TensorAndPipelineParallelSizes) {
  PartialStrategy p =
      Load(R"([("tensor_parallel", {"size": 4}), ("pipeline_parallel", 2), "sequence_parallel"])");
  EXPECT_EQ(p.ToText(), "tp=4,pp=2,sp=1");
  EXPECT_THAT(ParseLoadStrategy(R"(["tensor_parallel"])").status(),
              InvalidArgument(StartsWith("load_strategy: tensor_parallel needs a size")));
  EXPECT_THAT(ParseLoadStrategy(R"([("pipeline_parallel", {"chunks": 4})])").status(),
              InvalidArgument(StartsWith("load_strategy: pipeline_parallel needs a size")));
  EXPECT_THAT(ParseLoadStrategy(R"([("tensor_parallel", -2)])").status(),
              InvalidArgument(Eq("load_strategy: tensor_parallel: expected a positive integer "
                                 "size, got -2")));
  EXPECT_THAT(ParseLoadStrategy(R"([("pipeline_parallel", 2.0)])").status(),
              InvalidArgument(HasSubstr("expected a positive integer size, got 2.0")));
}

TEST(LoadStrategy, OtherAtorchMethods) {
  EXPECT_EQ(Load(R"(["zero1"])").ToText(), "sharding=zero1");
  EXPECT_EQ(Load(R"([("fsdp", {"cpu_offload": True})])").ToText(), "sharding=fsdp");
  EXPECT_EQ(Load(R"(["module_replace"])").ToText(), "attention=sdpa");
  EXPECT_EQ(Load(R"(["fused_optimizer"])").ToText(), "optimizer=fused_adamw");
  EXPECT_EQ(Load(R"(["FUSED_ADAMW"])").ToText(), "optimizer=fused_adamw");
  EXPECT_EQ(Load(R"(["offload"])").ToText(), "offload=cpu");
  EXPECT_EQ(Load(R"(("cpu_offload",))").ToText(), "offload=cpu");
  EXPECT_EQ(Load(R"(["sequence_parallel"])").ToText(), "sp=1");
  // ("module_replace") is a parenthesised string in Python, not a tuple.
  EXPECT_EQ(Load(R"([("module_replace"), ("checkpoint", (GPT2Block,))])").ToText(),
            "checkpoint=full,attention=sdpa");
  EXPECT_TRUE(Load("[]").empty());
  EXPECT_TRUE(Load("()").empty());
}

TEST(LoadStrategy, UnknownAtorchMethodListsTheAllowed) {
  EXPECT_THAT(ParseLoadStrategy(R"(["zero2", "amp_apex_o2"])").status(),
              InvalidArgument(Eq("load_strategy: unknown method 'amp_apex_o2' (allowed: zero1, "
                                 "zero2, fsdp, amp_native, half, checkpoint, module_replace, "
                                 "fused_optimizer, fused_adamw, offload, cpu_offload, "
                                 "sequence_parallel, parallel_mode, tensor_parallel, "
                                 "pipeline_parallel)")));
}

TEST(LoadStrategy, ConflictingAtorchElements) {
  EXPECT_THAT(ParseLoadStrategy(R"(["zero1", "checkpoint", "zero2"])").status(),
              InvalidArgument(Eq("load_strategy: conflicting settings of sharding: 'zero1' sets "
                                 "zero1, 'zero2' sets zero2")));
  EXPECT_THAT(ParseLoadStrategy(R"(["amp_native", "half"])").status(),
              InvalidArgument(Eq("load_strategy: conflicting settings of precision: "
                                 "'amp_native' sets bf16, 'half' sets pure_bf16")));
  EXPECT_THAT(
      ParseLoadStrategy(R"([("parallel_mode", ([("tensor", 2)], None)), ("tensor_parallel", 4)])")
          .status(),
      InvalidArgument(Eq("load_strategy: conflicting settings of tensor_parallel: "
                         "'parallel_mode' sets 2, 'tensor_parallel' sets 4")));
  EXPECT_THAT(
      ParseLoadStrategy(R"([("parallel_mode", ([("data", 2), ("data", 4)], None))])").status(),
      InvalidArgument(HasSubstr("conflicting settings of data_parallel")));
  // Agreeing elements are fine.
  EXPECT_EQ(Load(R"(["zero2", ("zero2", {}), ("amp_native", "bf16"), "amp_native"])").ToText(),
            "sharding=zero2,precision=bf16");
  EXPECT_EQ(
      Load(R"([("parallel_mode", ([("tensor", 2)], None)), ("tensor_parallel", 2)])").ToText(),
      "tp=2");
}

TEST(LoadStrategy, ElementsOfTheWrongShape) {
  EXPECT_THAT(ParseLoadStrategy(R"(["zero2", 5])").status(),
              InvalidArgument(Eq("load_strategy: element 2: expected a method name or a "
                                 "(name, config) tuple, got 5")));
  EXPECT_THAT(ParseLoadStrategy(R"([("zero2", None, 1)])").status(),
              InvalidArgument(StartsWith("load_strategy: element 1: expected a method name")));
  EXPECT_THAT(ParseLoadStrategy(R"([()])").status(),
              InvalidArgument(StartsWith("load_strategy: element 1: expected a method name")));
  EXPECT_THAT(ParseLoadStrategy(R"(("zero2"))").status(),
              InvalidArgument(Eq("load_strategy: expected a list of methods, got \"zero2\"")));
}

// Quotes and escapes are Python's; they show in the method names read.
TEST(LoadStrategy, PythonStringQuotesAndEscapes) {
  EXPECT_EQ(Load(R"(['zer\x6f2'])").sharding, Sharding::kZero2);
  EXPECT_EQ(Load(R"(["\u0066sdp"])").sharding, Sharding::kFsdp);
  EXPECT_EQ(Load(R"(['\172ero1'])").sharding, Sharding::kZero1);
  EXPECT_EQ(Load(R"(["\U0000007aero1"])").sharding, Sharding::kZero1);
  EXPECT_EQ(Load("['check\\\npoint']").checkpointing, Checkpointing::kFull);  // line continuation
  // Quotes of the other kind need no escape; the same kind does.
  EXPECT_EQ(Load(R"([("amp_native", {"dtype": 'bf16', 'note': "it's \"x\" \\ \t"})])").precision,
            Precision::kBf16);
  EXPECT_THAT(ParseLoadStrategy(R"(['it\'s'])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method 'it's' (allowed: ")));
  EXPECT_THAT(ParseLoadStrategy(R"(["say \"hi\""])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method 'say \"hi\"' (")));
  // An unknown escape keeps its backslash, as in Python.
  EXPECT_THAT(ParseLoadStrategy(R"(["a\qb"])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method 'a\\qb' (")));
  // Non-ASCII code points come out as UTF-8.
  EXPECT_THAT(ParseLoadStrategy(R"(["\u00e9"])").status(),
              InvalidArgument(StartsWith("load_strategy: unknown method '\xc3\xa9' (")));
}

TEST(LoadStrategy, MalformedLiteralsSayWhere) {
  const auto error = [](absl::string_view text) {
    return std::string(ParseLoadStrategy(text).status().message());
  };
  //           0123456789012345
  EXPECT_EQ(error(R"(["zero2", "fsdp")"), "load_strategy: expected ']' at offset 16");
  EXPECT_EQ(error(R"(["zero2" "fsdp"])"), "load_strategy: expected ']' at offset 9");
  EXPECT_EQ(error(R"(["zero2", ("amp_native", {"dtype": "bf16"), "checkpoint"])"),
            "load_strategy: expected '}' at offset 41");
  EXPECT_EQ(error(R"([("amp_native" {"dtype": "bf16"})])"),
            "load_strategy: expected ')' at offset 15");
  EXPECT_EQ(error(R"([("amp_native", {"dtype" "bf16"})])"),
            "load_strategy: expected ':' at offset 25");
  EXPECT_EQ(error(R"([("amp_native", {"dtype": "bf16" "x": 1})])"),
            "load_strategy: expected '}' at offset 33");
  EXPECT_EQ(error(R"(['zero2])"), "load_strategy: unterminated string at offset 1");
  EXPECT_EQ(error("['zero2\n']"), "load_strategy: unterminated string at offset 1");
  EXPECT_EQ(error(R"(["zero2"] extra)"), "load_strategy: expected end of input at offset 10");
  EXPECT_EQ(error(R"([@])"), "load_strategy: unexpected '@' at offset 1");
  EXPECT_EQ(error(R"([,])"), "load_strategy: unexpected ',' at offset 1");
  EXPECT_EQ(error(R"(["a",,])"), "load_strategy: unexpected ',' at offset 5");
  EXPECT_EQ(error(R"(["zero2", )"), "load_strategy: unexpected end of input at offset 10");
  EXPECT_EQ(error(R"(["\x4g"])"), "load_strategy: invalid \\x escape at offset 2");
  EXPECT_EQ(error(R"(["\ud800"])"), "load_strategy: invalid \\u escape at offset 2");
  EXPECT_EQ(error(R"([1e])"), "load_strategy: expected exponent digits at offset 3");
  EXPECT_EQ(error(R"([-x])"), "load_strategy: expected a number at offset 1");
  EXPECT_EQ(error(R"([99999999999999999999])"), "load_strategy: integer out of range at offset 1");
  EXPECT_EQ(error(R"([torch.])"), "load_strategy: expected a name after '.' at offset 7");
  EXPECT_EQ(error(std::string(300, '[')), "load_strategy: nesting deeper than 100 at offset 100");
}

// Found by tests/fuzz/atorch_strategy_fuzz: a string that is not UTF-8 (or
// 1e999, which JSON cannot hold) was kept, and printing it in the next error
// message threw, ending the process. Python itself refuses such source.
TEST(LoadStrategy, RefusesTextThatIsNotUtf8AndNumbersJsonCannotHold) {
  const auto error = [](const std::string& text) {
    return std::string(ParseLoadStrategy(text).status().message());
  };
  EXPECT_EQ(error("['\xff"
                  "444']"),
            "load_strategy: invalid UTF-8 at offset 2");
  EXPECT_EQ(error("['zero2'] # \xc3"), "load_strategy: invalid UTF-8 at offset 12");
  EXPECT_EQ(error("[1e999]"), "load_strategy: number out of range at offset 1");
  // An escape still gives any code point, written as UTF-8.
  EXPECT_THAT(error(R"(['\xff'])"), StartsWith("load_strategy: unknown method '\xc3\xbf'"));
}

}  // namespace
}  // namespace autoaccel
