// The export formats (export/): every format gives one fidelity row per
// strategy dimension for every strategy, refuses what its framework refuses
// without writing a file, and writes what each framework reads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "export/export_json.h"
#include "export/exporter.h"
#include "export/format_registry.h"
#include "nlohmann/json.hpp"
#include "search/atorch_strategy.h"
#include "search/python_literal.h"
#include "spec/strategy_fields.h"
#include "tests/model_test_util.h"

namespace autoaccel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

Strategy S(const std::string& text) {
  absl::StatusOr<Strategy> s = ParseStrategyText(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

ExportInput Input(const Strategy& s, const std::string& format) {
  ExportInput in;
  in.strategy = s;
  in.world_size = s.world_size();
  in.global_batch_size = s.micro_batch_size * s.grad_accum_steps * s.data_parallel;
  in.seq_len = 1024;
  in.format = format;
  return in;
}

ExportResult ExportOf(const std::string& text, const std::string& format,
                      std::optional<ModelSpec> model = std::nullopt) {
  ExportInput in = Input(S(text), format);
  in.model = model;
  absl::StatusOr<ExportResult> r = Export(in);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ExportResult{};
}

std::string File(const ExportResult& r, const std::string& name) {
  for (const auto& [n, content] : r.files) {
    if (n == name) return content;
  }
  ADD_FAILURE() << r.format << " wrote no " << name;
  return "";
}

const FidelityRow& Row(const ExportResult& r, const std::string& dimension) {
  for (const FidelityRow& row : r.fidelity) {
    if (row.dimension == dimension) return row;
  }
  static const FidelityRow kNone{"?", "?", FidelityStatus::kExact, "missing"};
  ADD_FAILURE() << r.format << " has no row for " << dimension;
  return kNone;
}

ModelSpec Model(int layers) {
  ModelSpec m = testing::TinyModelSpec("llama");
  m.n_layer = layers;
  return m;
}

// Strategies over every dimension: layouts of 1..8 ranks and each per-rank choice.
std::vector<Strategy> ManyStrategies() {
  const char* layouts[] = {"",
                           "dp=2,tp=1,pp=1,sharding=none,",
                           "dp=2,tp=1,pp=1,sharding=zero1,",
                           "dp=2,tp=1,pp=1,sharding=zero2,",
                           "dp=4,tp=1,pp=1,sharding=fsdp,",
                           "dp=1,tp=2,pp=1,sharding=none,sp=1,",
                           "dp=2,tp=2,pp=1,sharding=none,",
                           "dp=2,tp=2,pp=1,sharding=fsdp,",
                           "dp=1,tp=1,pp=2,sharding=none,pp_schedule=1f1b,",
                           "dp=2,tp=2,pp=2,sharding=zero1,sp=1,pp_schedule=interleaved,vpp=2,"};
  const char* rest[] = {
      "precision=fp32,checkpoint=none,attention=math,optimizer=adamw,offload=none",
      "precision=bf16,checkpoint=full,attention=sdpa,optimizer=fused_adamw,"
      "offload=none",
      "precision=fp16,checkpoint=selective,ckpt_pct=50,attention=sdpa,"
      "optimizer=adamw,offload=cpu",
      "precision=pure_bf16,checkpoint=full,ckpt_pct=25,attention=math,"
      "optimizer=fused_adamw,offload=cpu",
      "precision=fp8,checkpoint=selective,attention=sdpa,optimizer=fused_adamw,offload=none"};
  std::vector<Strategy> out;
  for (const char* l : layouts) {
    for (const char* r : rest) out.push_back(S(std::string(l) + "mbs=2,ga=4," + r));
  }
  return out;
}

std::vector<std::string> AllFormatNames() {
  std::vector<std::string> names;
  for (const ExportFormat& f : ExportFormats()) names.emplace_back(f.name);
  names.push_back("torchrun:deepspeed");
  names.push_back("torchrun:megatron");
  return names;
}

TEST(ExportTest, EveryFormatHasOneRowPerStrategyDimensionInTableOrder) {
  std::vector<std::string> dimensions;
  ForEachRow(kStrategyFields, [&](const auto& f) { dimensions.emplace_back(f.name); });
  for (const std::string& format : AllFormatNames()) {
    for (const Strategy& s : ManyStrategies()) {
      absl::StatusOr<ExportResult> r = Export(Input(s, format));
      ASSERT_TRUE(r.ok()) << format << " " << StrategyToText(s) << ": " << r.status();
      ASSERT_EQ(r->fidelity.size(), dimensions.size()) << format;
      for (size_t i = 0; i < dimensions.size(); ++i) {
        EXPECT_EQ(r->fidelity[i].dimension, dimensions[i]) << format;
        if (r->fidelity[i].status != FidelityStatus::kExact) {
          EXPECT_FALSE(r->fidelity[i].note.empty())
              << format << " " << dimensions[i] << " of " << StrategyToText(s)
              << " is not exact and says nothing about it";
        }
      }
    }
  }
}

TEST(ExportTest, ARejectedCombinationWritesNoFileAndNoCommand) {
  int rejected = 0, written = 0;
  for (const std::string& format : AllFormatNames()) {
    for (const Strategy& s : ManyStrategies()) {
      absl::StatusOr<ExportResult> r = Export(Input(s, format));
      ASSERT_TRUE(r.ok());
      if (r->rejected()) {
        ++rejected;
        EXPECT_TRUE(r->files.empty()) << format << " " << StrategyToText(s);
        EXPECT_TRUE(r->command.empty());
      } else {
        ++written;
        EXPECT_FALSE(r->files.empty()) << format << " " << StrategyToText(s);
        EXPECT_FALSE(r->command.empty());
      }
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(written, rejected);
}

TEST(ExportTest, ValueIsTheCanonicalTextsSpelling) {
  ExportResult r = ExportOf(
      "dp=2,tp=1,pp=1,sharding=zero1,mbs=4,ga=2,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=fused_adamw,offload=none",
      "deepspeed");
  EXPECT_EQ(Row(r, "sharding").value, "zero1");
  EXPECT_EQ(Row(r, "micro_batch_size").value, "4");
  EXPECT_EQ(Row(r, "sequence_parallel").value, "0");
}

TEST(ExportTest, DeepSpeedConfigCarriesBatchZeroPrecisionAndAutoTp) {
  ExportResult r = ExportOf(
      "dp=2,tp=2,pp=1,sharding=zero1,mbs=4,ga=2,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=fused_adamw,offload=none",
      "deepspeed");
  nlohmann::json ds = nlohmann::json::parse(File(r, "ds_config.json"));
  EXPECT_EQ(ds["train_batch_size"], 16);
  EXPECT_EQ(ds["train_micro_batch_size_per_gpu"], 4);
  EXPECT_EQ(ds["gradient_accumulation_steps"], 2);
  EXPECT_EQ(ds["zero_optimization"]["stage"], 1);
  EXPECT_EQ(ds["torch_autocast"]["dtype"], "bfloat16");
  EXPECT_FALSE(ds.contains("bf16"));
  EXPECT_EQ(ds["tensor_parallel"]["autotp_size"], 2);
  EXPECT_THAT(r.command, HasSubstr("deepspeed --num_nodes=1 --num_gpus=4"));
}

// DeepSpeed builds an optimizer section's AdamW with torch's defaults for
// every hyperparameter it leaves out: a section is written only where the
// framework fills them from the user's own arguments.
TEST(ExportTest, DeepSpeedNeverChoosesTheUsersLearningRate) {
  const std::string strategy =
      "dp=2,tp=1,pp=1,sharding=zero2,mbs=4,ga=2,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=fused_adamw,offload=none";
  // The script builds the optimizer: no section at all.
  for (const char* format : {"deepspeed", "accelerate"}) {
    ExportResult r = ExportOf(strategy, format);
    nlohmann::json ds = nlohmann::json::parse(File(r, "ds_config.json"));
    EXPECT_FALSE(ds.contains("optimizer")) << format;
    EXPECT_FALSE(ds.contains("scheduler")) << format;
    EXPECT_EQ(Row(r, "optimizer").status, FidelityStatus::kNotExpressible) << format;
    EXPECT_THAT(Row(r, "optimizer").note, HasSubstr("torch.optim.AdamW(model.parameters(), "
                                                    "lr=..., fused=True)"));
  }
  // The Trainer fills "auto" from its flags.
  ExportResult r = ExportOf(strategy, "hf-trainer");
  nlohmann::json ds = nlohmann::json::parse(File(r, "ds_config.json"));
  for (const char* key : {"lr", "betas", "eps", "weight_decay"}) {
    EXPECT_EQ(ds["optimizer"]["params"][key], "auto") << key;
  }
  EXPECT_EQ(ds["optimizer"]["params"]["fused"], true);
  EXPECT_EQ(ds["gradient_clipping"], "auto");
  EXPECT_FALSE(ds.contains("scheduler"));
  EXPECT_THAT(Row(r, "optimizer").note, HasSubstr("--learning_rate"));
}

TEST(ExportTest, AccelerateWithDeepSpeedLeavesPrecisionToTheDeepSpeedConfig) {
  ExportResult r = ExportOf(
      "dp=2,tp=1,pp=1,sharding=zero1,mbs=4,ga=2,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=fused_adamw,offload=none",
      "accelerate");
  // `accelerate launch` refuses mixed_precision beside deepspeed_config_file.
  EXPECT_THAT(File(r, "accelerate_config.yaml"), Not(HasSubstr("mixed_precision")));
  EXPECT_EQ(nlohmann::json::parse(File(r, "ds_config.json"))["torch_autocast"]["dtype"],
            "bfloat16");
}

TEST(ExportTest, DeepSpeedFp16UsesOurDynamicLossScalerSettings) {
  ExportResult r = ExportOf(
      "dp=2,tp=1,pp=1,sharding=zero2,mbs=1,ga=1,precision=fp16,checkpoint=none,"
      "attention=sdpa,optimizer=adamw,offload=cpu",
      "deepspeed");
  nlohmann::json ds = nlohmann::json::parse(File(r, "ds_config.json"));
  EXPECT_EQ(ds["fp16"]["loss_scale"], 0);  // dynamic
  EXPECT_EQ(ds["fp16"]["initial_scale_power"], 16);
  EXPECT_EQ(ds["fp16"]["loss_scale_window"], 2000);
  EXPECT_EQ(ds["fp16"]["hysteresis"], 1);
  EXPECT_EQ(ds["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(Row(r, "precision").status, FidelityStatus::kApproximated);
}

TEST(ExportTest, DeepSpeedPipelineAndCheckpointingNeedCode) {
  ExportResult r = ExportOf(
      "dp=1,tp=1,pp=2,sharding=none,pp_schedule=1f1b,mbs=1,ga=4,precision=fp32,"
      "checkpoint=full,attention=math,optimizer=adamw,offload=none",
      "deepspeed");
  EXPECT_EQ(Row(r, "pipeline_parallel").status, FidelityStatus::kNotExpressible);
  EXPECT_THAT(Row(r, "pipeline_parallel").note, HasSubstr("PipelineModule"));
  EXPECT_EQ(Row(r, "checkpointing").status, FidelityStatus::kNotExpressible);
}

TEST(ExportTest, DeepSpeedRefusesOffloadWithoutZeroOverSeveralRanks) {
  ExportResult r = ExportOf(
      "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=1,precision=fp32,checkpoint=none,"
      "attention=math,optimizer=adamw,offload=cpu",
      "deepspeed");
  EXPECT_TRUE(r.rejected());
  EXPECT_EQ(Row(r, "offload").status, FidelityStatus::kRejected);
}

TEST(ExportTest, HfTrainerFlags) {
  ExportResult r = ExportOf(
      "dp=4,tp=1,pp=1,sharding=none,mbs=4,ga=2,precision=bf16,checkpoint=selective,"
      "attention=sdpa,optimizer=fused_adamw,offload=none",
      "hf-trainer");
  const std::string args = File(r, "training_args.txt");
  EXPECT_THAT(args, HasSubstr("--per_device_train_batch_size=4\n"));
  EXPECT_THAT(args, HasSubstr("--gradient_accumulation_steps=2\n"));
  EXPECT_THAT(args, HasSubstr("--bf16\n"));
  EXPECT_THAT(args, HasSubstr("--optim=adamw_torch_fused\n"));
  EXPECT_THAT(args, HasSubstr("--activation_checkpointing\n"));
  EXPECT_THAT(args, Not(HasSubstr(" ")));  // $(cat training_args.txt) keeps each whole
  // HF recomputes whole layers: selective is only approximated.
  EXPECT_EQ(Row(r, "checkpointing").status, FidelityStatus::kApproximated);
  EXPECT_EQ(nlohmann::json::parse(File(r, "from_pretrained_kwargs.json"))["attn_implementation"],
            "sdpa");
  EXPECT_THAT(r.command, HasSubstr("torchrun --nnodes=1 --nproc-per-node=4 train.py"));
}

TEST(ExportTest, HfTrainerFsdpAndDeepSpeedRoutes) {
  ExportResult fsdp = ExportOf(
      "dp=8,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=bf16,checkpoint=full,"
      "attention=math,optimizer=adamw,offload=none",
      "hf-trainer");
  EXPECT_THAT(File(fsdp, "training_args.txt"), HasSubstr("--fsdp\n--fsdp_config=fsdp_config.json"));
  nlohmann::json fc = nlohmann::json::parse(File(fsdp, "fsdp_config.json"));
  EXPECT_EQ(fc["version"], 2);
  EXPECT_EQ(fc["activation_checkpointing"], true);
  EXPECT_EQ(nlohmann::json::parse(File(fsdp, "from_pretrained_kwargs.json"))["attn_implementation"],
            "eager");
  ExportResult zero = ExportOf(
      "dp=2,tp=1,pp=1,sharding=zero2,mbs=1,ga=1,precision=pure_bf16,"
      "checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
      "hf-trainer");
  EXPECT_THAT(File(zero, "training_args.txt"), HasSubstr("--deepspeed=ds_config.json"));
  EXPECT_THAT(File(zero, "training_args.txt"), HasSubstr("--bf16"));  // matches ds bf16
  EXPECT_EQ(nlohmann::json::parse(File(zero, "ds_config.json"))["zero_optimization"]["stage"], 2);
}

// A launcher trial's files live in the trial directory while the script runs
// elsewhere: with file_dir, every file names the others by absolute path.
TEST(ExportTest, FileDirMakesEveryReferenceToAnotherFileAbsolute) {
  const std::string zero2 =
      "dp=2,tp=1,pp=1,sharding=zero2,mbs=1,ga=1,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=adamw,offload=none";
  const std::string fsdp =
      "dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=bf16,checkpoint=full,"
      "attention=sdpa,optimizer=adamw,offload=none";
  auto with_dir = [](const std::string& text, const std::string& format) {
    ExportInput in = Input(S(text), format);
    in.file_dir = "/runs/t1";
    absl::StatusOr<ExportResult> r = Export(in);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ExportResult{};
  };
  EXPECT_THAT(File(with_dir(zero2, "hf-trainer"), "training_args.txt"),
              HasSubstr("--deepspeed=/runs/t1/ds_config.json\n"));
  const ExportResult hf_fsdp = with_dir(fsdp, "hf-trainer");
  EXPECT_THAT(File(hf_fsdp, "training_args.txt"),
              HasSubstr("--fsdp_config=/runs/t1/fsdp_config.json\n"));
  EXPECT_THAT(hf_fsdp.command, HasSubstr("$(cat /runs/t1/training_args.txt)"));
  const ExportResult acc = with_dir(zero2, "accelerate");
  EXPECT_THAT(File(acc, "accelerate_config.yaml"),
              HasSubstr("deepspeed_config_file: \"/runs/t1/ds_config.json\""));
  EXPECT_THAT(acc.command, HasSubstr("--config_file /runs/t1/accelerate_config.yaml"));
  EXPECT_THAT(with_dir(zero2, "deepspeed").command,
              HasSubstr("--deepspeed_config /runs/t1/ds_config.json"));
  EXPECT_THAT(with_dir(zero2, "lightning").command, HasSubstr("--config /runs/t1/lightning.json"));
  // Without file_dir the names stay bare, as before.
  EXPECT_THAT(File(ExportOf(zero2, "accelerate"), "accelerate_config.yaml"),
              HasSubstr("deepspeed_config_file: \"ds_config.json\""));
}

TEST(ExportTest, HfTrainerAndAccelerateRejectTensorParallelismWithReplicatedData) {
  for (const char* format : {"hf-trainer", "accelerate"}) {
    ExportResult r = ExportOf(
        "dp=2,tp=2,pp=1,sharding=none,mbs=1,ga=1,precision=bf16,checkpoint=none,"
        "attention=sdpa,optimizer=adamw,offload=none",
        format);
    EXPECT_TRUE(r.rejected()) << format;
    EXPECT_EQ(Row(r, "tensor_parallel").status, FidelityStatus::kRejected);
    EXPECT_THAT(Row(r, "tensor_parallel").note, HasSubstr("replicated"));
  }
}

TEST(ExportTest, AccelerateYamlWithFsdpAndTensorParallelism) {
  ExportResult r = ExportOf(
      "dp=2,tp=2,pp=1,sharding=fsdp,mbs=1,ga=4,precision=bf16,checkpoint=full,"
      "attention=sdpa,optimizer=adamw,offload=none",
      "accelerate");
  const std::string yaml = File(r, "accelerate_config.yaml");
  EXPECT_THAT(yaml, HasSubstr("distributed_type: \"FSDP\"\n"));
  EXPECT_THAT(yaml, HasSubstr("num_processes: 4\n"));
  EXPECT_THAT(yaml, HasSubstr("mixed_precision: \"bf16\"\n"));
  EXPECT_THAT(yaml, HasSubstr("  parallelism_config_tp_size: 2\n"));
  EXPECT_THAT(yaml, HasSubstr("  parallelism_config_dp_shard_size: 2\n"));
  EXPECT_THAT(yaml, HasSubstr("  fsdp_activation_checkpointing: true\n"));
  // accelerate 1.x's config file has no accumulation key outside DeepSpeed's.
  EXPECT_THAT(yaml, Not(HasSubstr("gradient_accumulation_steps")));
  EXPECT_EQ(Row(r, "grad_accum_steps").status, FidelityStatus::kNotExpressible);
}

TEST(ExportTest, MegatronFlags) {
  ExportResult r = ExportOf(
      "dp=2,tp=2,pp=2,sharding=zero1,sp=1,pp_schedule=interleaved,vpp=2,mbs=1,"
      "ga=8,precision=pure_bf16,checkpoint=selective,attention=sdpa,"
      "optimizer=adamw,offload=none",
      "megatron", Model(16));
  const std::string args = File(r, "megatron_args.txt");
  for (const char* flag :
       {"--tensor-model-parallel-size=2\n", "--pipeline-model-parallel-size=2\n",
        "--num-virtual-stages-per-pipeline-rank=2\n", "--sequence-parallel\n",
        "--use-distributed-optimizer\n", "--micro-batch-size=1\n", "--global-batch-size=16\n",
        "--bf16\n", "--recompute-granularity=selective\n", "--attention-backend=flash\n",
        "--num-layers=16\n", "--seq-length=1024\n"}) {
    EXPECT_THAT(args, HasSubstr(flag));
  }
  // One argument per line, none with a space: `$(cat megatron_args.txt)` and a
  // launcher's {*megatron_args} (one argument per line) read the same.
  EXPECT_THAT(args, Not(HasSubstr(" ")));
  // Megatron has no unfused AdamW.
  EXPECT_EQ(Row(r, "optimizer").status, FidelityStatus::kApproximated);
  EXPECT_EQ(Row(r, "precision").status, FidelityStatus::kExact);
}

TEST(ExportTest, MegatronRecomputesTheFirstLayersOfACheckpointPercent) {
  ExportResult r = ExportOf(
      "mbs=1,ga=1,precision=bf16,checkpoint=full,ckpt_pct=50,attention=math,"
      "optimizer=fused_adamw,offload=none",
      "megatron", Model(12));
  EXPECT_THAT(File(r, "megatron_args.txt"),
              HasSubstr("--recompute-granularity=full\n--recompute-method=block\n"
                        "--recompute-num-layers=6\n"));
  EXPECT_EQ(Row(r, "checkpoint_percent").status, FidelityStatus::kExact);
  EXPECT_EQ(Row(r, "attention").status, FidelityStatus::kExact);  // unfused
  // Without the model the layer count is unknown.
  ExportResult blind = ExportOf(
      "mbs=1,ga=1,precision=bf16,checkpoint=full,ckpt_pct=50,attention=math,"
      "optimizer=fused_adamw,offload=none",
      "megatron");
  EXPECT_EQ(Row(blind, "checkpoint_percent").status, FidelityStatus::kApproximated);
}

// The architecture section of a Megatron export of `model` (one rank).
ExportResult MegatronOf(const ModelSpec& model, const std::string& layout = "") {
  return ExportOf(layout +
                      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,"
                      "optimizer=fused_adamw,offload=none",
                  "megatron", model);
}

const ArchitectureRow& Feature(const ExportResult& r, const std::string& feature) {
  for (const ArchitectureRow& row : r.architecture) {
    if (row.feature == feature) return row;
  }
  static const ArchitectureRow kNone{"?", "?", FidelityStatus::kExact, "missing"};
  ADD_FAILURE() << r.format << " has no architecture row for " << feature;
  return kNone;
}

TEST(ExportTest, MegatronGivesQwen2ItsQkvBiases) {
  ExportResult r = MegatronOf(testing::TinyModelSpec("qwen2"));
  const std::string args = File(r, "megatron_args.txt");
  EXPECT_THAT(args, HasSubstr("--disable-bias-linear\n--add-qkv-bias\n"));
  EXPECT_EQ(Feature(r, "biases").value, "q, k, v");
  EXPECT_EQ(Feature(r, "biases").status, FidelityStatus::kExact);
}

TEST(ExportTest, MegatronGivesQwen3ItsQkLayerNormAndHeadDim) {
  ExportResult r = MegatronOf(testing::TinyModelSpec("qwen3"));
  const std::string args = File(r, "megatron_args.txt");
  EXPECT_THAT(args, HasSubstr("--qk-layernorm\n"));
  EXPECT_THAT(args, HasSubstr("--kv-channels=12\n"));
  EXPECT_THAT(args, HasSubstr("--group-query-attention\n--num-query-groups=2\n"));
  EXPECT_THAT(args, Not(HasSubstr("--add-qkv-bias")));
  EXPECT_EQ(Feature(r, "qk_norm").status, FidelityStatus::kExact);
}

TEST(ExportTest, MegatronScalesRopeAsLlama31AndSaysWhenItCannot) {
  ModelSpec m = testing::TinyModelSpec("llama");
  m.rope_theta = 500000;
  m.rope_type = "llama3";
  m.rope_factor = 8;
  m.rope_low_freq_factor = 1;
  m.rope_high_freq_factor = 4;
  m.rope_original_max_positions = 8192;
  ExportResult r = MegatronOf(m);
  const std::string args = File(r, "megatron_args.txt");
  EXPECT_THAT(args, HasSubstr("--use-rope-scaling\n--rope-scaling-factor=8\n"));
  EXPECT_THAT(args, HasSubstr("--rotary-base=500000\n"));
  EXPECT_EQ(Feature(r, "rope_scaling").status, FidelityStatus::kExact);
  // Llama 3.2's factor 32: pretrain_gpt.py builds factor 8 whatever the flag says.
  m.rope_factor = 32;
  ExportResult llama32 = MegatronOf(m);
  EXPECT_THAT(File(llama32, "megatron_args.txt"), HasSubstr("--rope-scaling-factor=32\n"));
  EXPECT_EQ(Feature(llama32, "rope_scaling").status, FidelityStatus::kNotExpressible);
  EXPECT_THAT(Feature(llama32, "rope_scaling").note, HasSubstr("factor 8"));
}

TEST(ExportTest, DynamicYarnAndLongRopeSayWhatMegatronAndTorchtitanBuild) {
  const std::string kOneRank =
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
  auto rows = [&](const ModelSpec& m) {
    return std::pair{Feature(MegatronOf(m), "rope_scaling"),
                     Feature(ExportOf(kOneRank, "torchtitan", m), "rope_scaling")};
  };
  // Dynamic NTK up to max_position_embeddings (the export's seq_len is
  // 1024): the default frequencies, which both build.
  ModelSpec dynamic = testing::TinyModelSpec("llama");
  dynamic.rope_type = "dynamic";
  dynamic.rope_factor = 2;
  dynamic.n_positions = 4096;
  for (const ArchitectureRow& row : {rows(dynamic).first, rows(dynamic).second}) {
    EXPECT_EQ(row.status, FidelityStatus::kExact) << row.note;
    EXPECT_THAT(row.note, HasSubstr("starts past max_position_embeddings (4096)"));
  }
  // Past it the base grows: neither has that.
  dynamic.n_positions = 512;
  for (const ArchitectureRow& row : {rows(dynamic).first, rows(dynamic).second}) {
    EXPECT_EQ(row.status, FidelityStatus::kNotExpressible) << row.note;
    EXPECT_THAT(row.note, HasSubstr("rope_type dynamic"));
  }
  // YaRN: Megatron's GPTModel has it only through config attributes set in
  // code; the exported flags keep plain rope.
  ModelSpec yarn = testing::TinyModelSpec("llama");
  yarn.rope_type = "yarn";
  yarn.rope_factor = 4;
  yarn.rope_original_max_positions = 16;
  yarn.rope_attention_factor = 1.1;
  ASSERT_TRUE(yarn.Validate().ok()) << yarn.Validate();
  const ExportResult megatron_yarn = MegatronOf(yarn);
  EXPECT_THAT(File(megatron_yarn, "megatron_args.txt"),
              HasSubstr("--position-embedding-type=rope\n"));
  EXPECT_EQ(Feature(megatron_yarn, "rope_scaling").status, FidelityStatus::kNotExpressible);
  EXPECT_THAT(Feature(megatron_yarn, "rope_scaling").note,
              AllOf(HasSubstr("rope_type yarn"), HasSubstr("yarn_rotary_scaling_factor")));
  EXPECT_THAT(Feature(megatron_yarn, "rope_scaling").value, HasSubstr("attention_factor 1.1"));
  EXPECT_EQ(rows(yarn).second.status, FidelityStatus::kNotExpressible);
  EXPECT_THAT(rows(yarn).second.note, HasSubstr("rope_type yarn"));
  // LongRoPE: neither.
  ModelSpec longrope = testing::TinyModelSpec("llama");
  longrope.rope_type = "longrope";
  longrope.rope_original_max_positions = 16;
  longrope.rope_short_factor = {1, 1.5, 2, 3};
  longrope.rope_long_factor = {2, 3, 4, 5};
  ASSERT_TRUE(longrope.Validate().ok()) << longrope.Validate();
  for (const ArchitectureRow& row : {rows(longrope).first, rows(longrope).second}) {
    EXPECT_EQ(row.status, FidelityStatus::kNotExpressible) << row.note;
    EXPECT_THAT(row.note, HasSubstr("rope_type longrope"));
  }
  EXPECT_THAT(rows(longrope).first.value, HasSubstr("long factors at seq_len 1024"));
}

TEST(ExportTest, MegatronGivesMixtralItsExperts) {
  ModelSpec m = testing::TinyModelSpec("mixtral");
  m.rope_theta = 1e6;  // MixtralConfig's default
  ExportResult r = MegatronOf(m);
  const std::string args = File(r, "megatron_args.txt");
  EXPECT_THAT(args, HasSubstr("--num-experts=4\n--moe-router-topk=2\n"));
  EXPECT_THAT(args, HasSubstr("--swiglu\n"));
  // 1e6, as the integer Megatron's --rotary-base takes.
  EXPECT_THAT(args, HasSubstr("--rotary-base=1000000\n"));
  EXPECT_EQ(Feature(r, "experts").value, "4 experts, top 2 per token");
  EXPECT_EQ(Feature(r, "experts").status, FidelityStatus::kExact);
}

// transformers' auxiliary loss pools all expert layers; Megatron's adds one
// per layer, with a coefficient that gives each layer the same gradient.
TEST(ExportTest, MegatronWeighsTheRouterLossPerLayer) {
  ModelSpec m = testing::TinyModelSpec("mixtral");  // top 2
  m.n_layer = 4;
  EXPECT_THAT(File(MegatronOf(m), "megatron_args.txt"), Not(HasSubstr("--moe-aux-loss-coeff")));
  m.router_aux_loss_coef = 0.02;
  ExportResult r = MegatronOf(m);
  EXPECT_THAT(File(r, "megatron_args.txt"),
              HasSubstr("--moe-router-load-balancing-type=aux_loss\n--moe-aux-loss-coeff=0.01\n"));
  EXPECT_EQ(Feature(r, "router_aux_loss").status, FidelityStatus::kApproximated);
  EXPECT_THAT(Feature(r, "router_aux_loss").note, HasSubstr("4 expert layers"));
}

TEST(ExportTest, MegatronSaysWhatOfGemma2ItCannotBuild) {
  ExportResult r = MegatronOf(testing::TinyModelSpec("gemma2"));
  for (const char* feature :
       {"attn_logit_softcapping", "final_logit_softcapping", "sandwich_norm", "embedding_scale"}) {
    EXPECT_EQ(Feature(r, feature).status, FidelityStatus::kNotExpressible) << feature;
    EXPECT_THAT(Feature(r, feature).note, HasSubstr(" in ")) << feature << ": says where to do it";
  }
  EXPECT_EQ(Feature(r, "attn_logit_softcapping").value, "50");
  EXPECT_EQ(Feature(r, "activation").status, FidelityStatus::kApproximated);  // --quick-geglu
  // query_pre_attn_scalar equal to head_dim: Megatron's own scaling.
  EXPECT_EQ(Feature(r, "query_pre_attn_scalar").status, FidelityStatus::kExact);
  const std::string args = File(r, "megatron_args.txt");
  EXPECT_THAT(args, HasSubstr("--apply-layernorm-1p\n"));
  // Layer 1 of 2 slides (window 6: itself and 5 before), layer 2 is full.
  EXPECT_THAT(args, HasSubstr("--window-size=5,0\n--window-attn-skip-freq=2\n"));
  EXPECT_EQ(Feature(r, "sliding_window").status, FidelityStatus::kExact);
  // The strategy's rows are unaffected: the export is not rejected.
  EXPECT_FALSE(r.rejected());
}

TEST(ExportTest, MegatronSlidesTheConfigsLayersOnly) {
  ModelSpec m = testing::TinyModelSpec("qwen2");
  m.n_layer = 4;
  m.sliding_window = 8;
  m.layer_types = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  ExportResult r = MegatronOf(m);
  EXPECT_THAT(File(r, "megatron_args.txt"),
              HasSubstr("--window-size=7,0\n--window-attn-skip-freq=[0,1,1,0]\n"));
  EXPECT_EQ(Feature(r, "sliding_window").value, "8 on 2 of 4 layers");
  // Every layer: no pattern.
  ExportResult mistral = MegatronOf(testing::TinyModelSpec("mistral"));
  EXPECT_THAT(File(mistral, "megatron_args.txt"), HasSubstr("--window-size=5,0\n"));
  EXPECT_THAT(File(mistral, "megatron_args.txt"), Not(HasSubstr("--window-attn-skip-freq")));
}

TEST(ExportTest, MegatronArchitectureCoversEveryFamily) {
  for (const std::string& family : KnownModelFamilies()) {
    if (family == "torchscript") continue;
    ExportResult r = MegatronOf(testing::TinyModelSpec(family));
    ASSERT_FALSE(r.architecture.empty()) << family;
    std::set<std::string> seen;
    for (const ArchitectureRow& row : r.architecture) {
      EXPECT_TRUE(seen.insert(row.feature).second) << family << ": " << row.feature << " twice";
      EXPECT_NE(row.status, FidelityStatus::kRejected) << family << " " << row.feature;
      if (row.status != FidelityStatus::kExact) {
        EXPECT_FALSE(row.note.empty()) << family << " " << row.feature << " says nothing";
      }
    }
    for (const char* feature :
         {"network", "sizes", "query_groups", "head_dim", "normalization", "norm_epsilon",
          "activation", "biases", "position_embedding", "vocab_size", "embeddings", "dropout"}) {
      Feature(r, feature);
    }
    EXPECT_THAT(r.command, HasSubstr(family == "bert" ? "pretrain_bert.py" : "pretrain_gpt.py"));
  }
  // Formats that load the Hugging Face model from its config have no section.
  EXPECT_TRUE(ExportOf("mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,"
                       "optimizer=fused_adamw,offload=none",
                       "hf-trainer", testing::TinyModelSpec("gemma2"))
                  .architecture.empty());
}

TEST(ExportTest, MoeAndLatentAttentionTheExportsDoNotBuildAreNotExpressible) {
  const std::string kOneRank =
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
  const ModelSpec qwen = testing::TinyModelSpec("qwen3_moe");
  const ModelSpec deepseek = testing::TinyModelSpec("deepseek_v3");
  for (const char* feature : {"expert_width", "dense_layers", "router"}) {
    EXPECT_EQ(Feature(MegatronOf(qwen), feature).status, FidelityStatus::kNotExpressible)
        << feature;
  }
  // torchtitan's MoE builds Qwen3-MoE's experts, but on every layer.
  EXPECT_EQ(Feature(ExportOf(kOneRank, "torchtitan", qwen), "dense_layers").status,
            FidelityStatus::kNotExpressible);
  for (const ExportResult& r : {MegatronOf(deepseek), ExportOf(kOneRank, "torchtitan", deepseek)}) {
    for (const char* feature :
         {"latent_attention", "expert_width", "dense_layers", "router", "shared_experts"}) {
      EXPECT_EQ(Feature(r, feature).status, FidelityStatus::kNotExpressible)
          << r.format << " " << feature;
    }
    EXPECT_THAT(Feature(r, "latent_attention").note, HasSubstr("standard attention"));
  }
  // Mixtral's experts are what Megatron's flags build: no such rows.
  for (const ArchitectureRow& row : MegatronOf(testing::TinyModelSpec("mixtral")).architecture) {
    EXPECT_NE(row.status, FidelityStatus::kNotExpressible) << row.feature;
  }
}

TEST(ExportTest, MegatronPadsTheVocabularyOnlyWhereTensorParallelismMust) {
  ModelSpec m = testing::TinyModelSpec("llama");
  ExportResult even = MegatronOf(m, "dp=1,tp=2,pp=1,sharding=none,");
  EXPECT_THAT(File(even, "megatron_args.txt"), HasSubstr("--padded-vocab-size=96\n"));
  EXPECT_EQ(Feature(even, "vocab_size").status, FidelityStatus::kExact);
  m.vocab_size = 97;
  ExportResult odd = MegatronOf(m, "dp=1,tp=2,pp=1,sharding=none,");
  EXPECT_THAT(File(odd, "megatron_args.txt"), HasSubstr("--padded-vocab-size=98\n"));
  EXPECT_EQ(Feature(odd, "vocab_size").status, FidelityStatus::kApproximated);
}

TEST(ExportTest, MegatronRejectsTensorParallelismThatSplitsAQueryGroup) {
  // gemma's tiny spec has one key/value head: it cannot be split over 2 ranks.
  ExportResult r = MegatronOf(testing::TinyModelSpec("gemma"), "dp=1,tp=2,pp=1,sharding=none,");
  EXPECT_TRUE(r.rejected());
  EXPECT_THAT(Row(r, "tensor_parallel").note, HasSubstr("1 query groups"));
  EXPECT_FALSE(r.architecture.empty());  // still says what the flags would build
}

// What Megatron-LM's validate_args refuses with --use-torch-fsdp2, and the
// environment its tensor parallelism needs, as read by hand from Megatron-LM
// core_v0.16.1's megatron/training/arguments.py (no test runs validate_args:
// that file is not in the megatron-core wheel).
TEST(ExportTest, MegatronFsdpAndTensorParallelismPassMegatronsOwnChecks) {
  ExportResult fsdp = ExportOf(
      "dp=4,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=fused_adamw,offload=cpu",
      "megatron", Model(4));
  const std::string args = File(fsdp, "megatron_args.txt");
  EXPECT_THAT(args, HasSubstr("--use-torch-fsdp2\n--no-gradient-accumulation-fusion\n"));
  EXPECT_THAT(args, Not(HasSubstr("--use-distributed-optimizer")));
  EXPECT_THAT(fsdp.command, Not(HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS")));
  // FSDP2 needs untied embeddings, and has no fp16.
  ModelSpec tied = Model(4);
  tied.tie_word_embeddings = true;
  EXPECT_EQ(Row(MegatronOf(tied, "dp=2,tp=1,pp=1,sharding=fsdp,"), "sharding").status,
            FidelityStatus::kRejected);
  ExportResult fp16 = ExportOf(
      "dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=fp16,checkpoint=none,"
      "attention=sdpa,optimizer=fused_adamw,offload=none",
      "megatron");
  EXPECT_EQ(Row(fp16, "precision").status, FidelityStatus::kRejected);

  ExportResult tp = MegatronOf(Model(4), "dp=1,tp=2,pp=1,sharding=none,");
  EXPECT_THAT(tp.command, StartsWith("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun "));
  EXPECT_THAT(Row(tp, "tensor_parallel").note, HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS=1"));
}

// The flag names of megatron_args.txt, pinned: each was checked by hand
// against Megatron-LM core_v0.16.1's megatron/training/arguments.py, which is
// not in the megatron-core wheel, so no test parses them with Megatron's own
// parser (tests/export/check_megatron.py maps them onto megatron.core's
// TransformerConfig and GPTModel). A new or renamed flag fails here until it
// is checked the same way and added.
TEST(ExportTest, MegatronWritesOnlyFlagNamesCheckedAgainstMegatronLm) {
  const std::set<std::string> kChecked = {
      // The strategy's.
      "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
      "--num-virtual-stages-per-pipeline-rank", "--sequence-parallel",
      "--use-distributed-optimizer", "--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
      "--micro-batch-size", "--global-batch-size", "--bf16", "--fp16", "--fp8-format",
      "--fp8-recipe", "--initial-loss-scale", "--loss-scale-window", "--hysteresis",
      "--min-loss-scale", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
      "--attention-backend", "--optimizer", "--optimizer-cpu-offload",
      "--use-precision-aware-optimizer", "--seq-length",
      // The model's (megatron_model.cc).
      "--bert-no-binary-head", "--num-layers", "--hidden-size", "--num-attention-heads",
      "--ffn-hidden-size", "--group-query-attention", "--num-query-groups", "--kv-channels",
      "--qk-layernorm", "--normalization", "--apply-layernorm-1p", "--norm-epsilon", "--swiglu",
      "--quick-geglu", "--disable-bias-linear", "--add-qkv-bias", "--position-embedding-type",
      "--max-position-embeddings", "--rotary-base", "--rotary-percent", "--use-rope-scaling",
      "--rope-scaling-factor", "--rotary-seq-len-interpolation-factor", "--padded-vocab-size",
      "--untie-embeddings-and-output-weights", "--window-size", "--window-attn-skip-freq",
      "--num-experts", "--moe-router-topk", "--hidden-dropout", "--attention-dropout"};
  std::set<std::string> written;
  auto collect = [&written](const ExportResult& r) {
    if (r.rejected()) return;
    for (absl::string_view line :
         absl::StrSplit(File(r, "megatron_args.txt"), '\n', absl::SkipEmpty())) {
      written.emplace(line.substr(0, line.find('=')));
    }
  };
  for (const Strategy& s : ManyStrategies()) {
    ExportInput in = Input(s, "megatron");
    in.model = Model(8);
    absl::StatusOr<ExportResult> r = Export(in);
    ASSERT_TRUE(r.ok()) << r.status();
    collect(*r);
  }
  for (const std::string& family : KnownModelFamilies()) {
    if (family != "torchscript") collect(MegatronOf(testing::TinyModelSpec(family)));
  }
  ModelSpec rope = testing::TinyModelSpec("llama");
  rope.rope_type = "llama3";
  rope.rope_factor = 8;
  collect(MegatronOf(rope));
  rope.rope_type = "linear";
  rope.rope_factor = 2;
  collect(MegatronOf(rope));
  EXPECT_EQ(written, kChecked);
}

TEST(ExportTest, MegatronWithoutTheModelHasNoArchitectureSection) {
  ExportResult r = ExportOf(
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
      "offload=none",
      "megatron");
  EXPECT_TRUE(r.architecture.empty());
  EXPECT_THAT(File(r, "megatron_args.txt"), Not(HasSubstr("--num-layers")));
}

TEST(ExportTest, TorchtitanHasNoZeroOneNorFp16) {
  ExportResult zero1 = ExportOf(
      "dp=2,tp=1,pp=1,sharding=zero1,mbs=1,ga=1,precision=bf16,"
      "checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
      "torchtitan");
  EXPECT_TRUE(zero1.rejected());
  EXPECT_THAT(Row(zero1, "sharding").note, HasSubstr("no ZeRO-1"));
  ExportResult fp16 = ExportOf(
      "mbs=1,ga=1,precision=fp16,checkpoint=none,attention=sdpa,"
      "optimizer=adamw,offload=none",
      "torchtitan");
  EXPECT_TRUE(fp16.rejected());
}

// fp8 (e4m3 inputs and weights, e5m2 gradients, per-tensor current scaling,
// the LM head in bf16): Megatron's Transformer Engine recipe is the same,
// torchtitan's and accelerate's torchao float8 the same around other
// weights; the formats with no such recipe reject it saying where to go.
TEST(ExportTest, Fp8GoesToMegatronTorchtitanAndAccelerateAndIsRejectedElsewhere) {
  const std::string fsdp =
      "dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=fp8,checkpoint=none,attention=sdpa,"
      "optimizer=fused_adamw,offload=none";
  ExportResult megatron = ExportOf(fsdp, "megatron");
  EXPECT_FALSE(megatron.rejected());
  EXPECT_THAT(File(megatron, "megatron_args.txt"),
              HasSubstr("--bf16\n--fp8-format=hybrid\n--fp8-recipe=tensorwise\n"));
  EXPECT_EQ(Row(megatron, "precision").status, FidelityStatus::kExact);

  ExportResult titan = ExportOf(fsdp, "torchtitan");
  EXPECT_FALSE(titan.rejected());
  const std::string toml = File(titan, "autoaccel_torchtitan.toml");
  EXPECT_THAT(toml, HasSubstr("converters = [\"quantize.linear.float8\"]"));
  EXPECT_THAT(toml, HasSubstr("[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n"
                              "filter_fqns = [\"output\"]\n"));
  EXPECT_EQ(Row(titan, "precision").status, FidelityStatus::kApproximated);
  EXPECT_TRUE(ExportOf("dp=1,tp=2,pp=1,sharding=none,sp=1,mbs=1,ga=1,precision=fp8,"
                       "checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
                       "torchtitan")
                  .rejected());

  ExportResult accelerate = ExportOf(fsdp, "accelerate");
  EXPECT_FALSE(accelerate.rejected());
  const std::string yaml = File(accelerate, "accelerate_config.yaml");
  EXPECT_THAT(yaml, HasSubstr("mixed_precision: \"fp8\""));
  EXPECT_THAT(yaml, HasSubstr("fp8_config:\n  backend: \"AO\"\n"));
  EXPECT_THAT(Row(accelerate, "precision").note, HasSubstr("first linear layer"));

  for (const char* format :
       {"deepspeed", "hf-trainer", "lightning", "colossalai", "atorch", "flagai", "torch"}) {
    ExportResult r = ExportOf(fsdp, format);
    EXPECT_TRUE(r.rejected()) << format;
    EXPECT_EQ(Row(r, "precision").status, FidelityStatus::kRejected) << format;
    EXPECT_THAT(Row(r, "precision").note, HasSubstr("fp8")) << format;
  }
}

TEST(ExportTest, TorchtitanJobFile) {
  ExportResult r = ExportOf(
      "dp=4,tp=2,pp=1,sharding=fsdp,sp=1,mbs=2,ga=2,precision=bf16,"
      "checkpoint=full,attention=sdpa,optimizer=fused_adamw,offload=none",
      "torchtitan");
  const std::string toml = File(r, "autoaccel_torchtitan.toml");
  EXPECT_THAT(toml, HasSubstr("torchtitan 0.2.2"));
  EXPECT_THAT(toml, HasSubstr("[parallelism]\ndata_parallel_replicate_degree = 1\n"
                              "data_parallel_shard_degree = 4\n"));
  EXPECT_THAT(toml, HasSubstr("tensor_parallel_degree = 2\n"));
  EXPECT_THAT(toml, HasSubstr("[training]\nlocal_batch_size = 2\nglobal_batch_size = 16\n"));
  EXPECT_THAT(toml, HasSubstr("[activation_checkpoint]\nmode = \"full\"\n"));
  EXPECT_THAT(toml, HasSubstr("[optimizer]\nname = \"AdamW\"\nimplementation = \"fused\"\n"));
  // The user's hyperparameters are theirs: never written.
  EXPECT_THAT(toml, Not(HasSubstr("lr =")));
  EXPECT_THAT(toml, Not(HasSubstr("[lr_scheduler]")));
  // Without the model, no model section nor module.
  EXPECT_THAT(toml, Not(HasSubstr("\n[model]\n")));
  EXPECT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.command,
            "torchrun --nnodes=1 --nproc-per-node=8 -m torchtitan.train --job.config_file "
            "autoaccel_torchtitan.toml");
}

TEST(ExportTest, TorchtitanRefusesDdpBesideTensorOrPipelineParallelism) {
  ExportResult r = ExportOf(
      "dp=2,tp=2,pp=1,sharding=none,sp=1,mbs=1,ga=1,precision=bf16,"
      "checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
      "torchtitan");
  EXPECT_TRUE(r.rejected());
  EXPECT_THAT(Row(r, "sharding").note, HasSubstr("use sharding fsdp"));
}

TEST(ExportTest, TorchtitanCheckpointsOneBlockInKForAPercentDividingAHundred) {
  ExportResult quarter = ExportOf(
      "mbs=1,ga=1,precision=bf16,checkpoint=full,ckpt_pct=25,attention=sdpa,"
      "optimizer=adamw,offload=none",
      "torchtitan");
  EXPECT_THAT(File(quarter, "autoaccel_torchtitan.toml"),
              HasSubstr("mode = \"selective\"\nselective_ac_option = \"4\"\n"));
  EXPECT_EQ(Row(quarter, "checkpoint_percent").status, FidelityStatus::kApproximated);
  ExportResult odd = ExportOf(
      "mbs=1,ga=1,precision=bf16,checkpoint=full,ckpt_pct=30,attention=sdpa,"
      "optimizer=adamw,offload=none",
      "torchtitan");
  EXPECT_THAT(File(odd, "autoaccel_torchtitan.toml"), HasSubstr("mode = \"full\""));
  EXPECT_THAT(Row(odd, "checkpoint_percent").note, HasSubstr("every layer"));
}

TEST(ExportTest, TorchtitanRegistersTheModelsFlavor) {
  const std::string kOneRank =
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
  ModelSpec llama = testing::TinyModelSpec("llama");
  llama.n_inner = 200;
  llama.rope_type = "llama3";
  llama.rope_factor = 8;
  llama.rope_low_freq_factor = 1;
  llama.rope_high_freq_factor = 4;
  llama.rope_original_max_positions = 8192;
  ExportResult r = ExportOf(kOneRank, "torchtitan", llama);
  const std::string toml = File(r, "autoaccel_torchtitan.toml");
  EXPECT_THAT(toml, HasSubstr("[model]\nname = \"llama3\"\nflavor = \"autoaccel\"\n"));
  EXPECT_THAT(toml, HasSubstr("custom_import = \"autoaccel_torchtitan_model\""));
  const std::string py = File(r, "autoaccel_torchtitan_model.py");
  EXPECT_THAT(py, HasSubstr("flavors[\"autoaccel\"] = Args("));
  EXPECT_THAT(py, HasSubstr("multiple_of=1,\n"));
  EXPECT_THAT(py, HasSubstr("scaling_factor=8.0, low_freq_factor=1.0"));
  EXPECT_THAT(r.command, HasSubstr("PYTHONPATH=. torchrun"));
  EXPECT_EQ(Feature(r, "ffn").status, FidelityStatus::kExact);
  EXPECT_EQ(Feature(r, "rope_scaling").status, FidelityStatus::kExact);

  ExportResult qwen2 = ExportOf(kOneRank, "torchtitan", testing::TinyModelSpec("qwen2"));
  EXPECT_EQ(Feature(qwen2, "biases").status, FidelityStatus::kNotExpressible);
  ExportResult qwen3 = ExportOf(kOneRank, "torchtitan", testing::TinyModelSpec("qwen3"));
  EXPECT_THAT(File(qwen3, "autoaccel_torchtitan.toml"), HasSubstr("name = \"qwen3\""));
  EXPECT_THAT(File(qwen3, "autoaccel_torchtitan_model.py"), HasSubstr("qk_norm=True"));
}

// Qwen3-MoE and Mixtral are torchtitan's qwen3 model with its MoE
// (models/moe/moe.py), routing as transformers does.
TEST(ExportTest, TorchtitanBuildsQwen3MoeAndMixtralWithItsMixtureOfExperts) {
  const std::string kFp32 =
      "mbs=1,ga=1,precision=fp32,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
  ModelSpec qwen = testing::TinyModelSpec("qwen3_moe");
  qwen.dense_mlp_layers.clear();
  ExportResult r = ExportOf(kFp32, "torchtitan", qwen);
  EXPECT_THAT(File(r, "autoaccel_torchtitan.toml"), HasSubstr("name = \"qwen3\""));
  const std::string py = File(r, "autoaccel_torchtitan_model.py");
  EXPECT_THAT(py, HasSubstr("from torchtitan.models.moe import MoEArgs\n"));
  EXPECT_THAT(py, HasSubstr("qk_norm=True,\n"));
  EXPECT_THAT(py, HasSubstr("moe_enabled=True,\n    moe_inter_dim=24,\n"));
  EXPECT_THAT(py, HasSubstr("MoEArgs(num_experts=4, num_shared_experts=0, top_k=2, "
                            "score_func=\"softmax\", route_norm=False, route_scale=1.0, "
                            "gate_bias=False, score_before_experts=False, "
                            "load_balance_coeff=None, use_grouped_mm=False)"));
  for (const ArchitectureRow& row : r.architecture) {
    EXPECT_EQ(row.status, FidelityStatus::kExact) << row.feature << ": " << row.note;
  }
  EXPECT_EQ(Feature(r, "expert_width").value, "24");
  EXPECT_EQ(Feature(r, "router").value, "softmax, top 2, not renormalised");
  // bf16: torch._grouped_mm, which computes the experts in bf16.
  EXPECT_THAT(File(ExportOf("mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,"
                            "optimizer=adamw,offload=none",
                            "torchtitan", qwen),
                   "autoaccel_torchtitan_model.py"),
              HasSubstr("use_grouped_mm=True"));

  // Mixtral: qwen3's network without q/k norms, always renormalised.
  ExportResult mixtral = ExportOf(kFp32, "torchtitan", testing::TinyModelSpec("mixtral"));
  const std::string mixtral_py = File(mixtral, "autoaccel_torchtitan_model.py");
  EXPECT_THAT(mixtral_py, HasSubstr("qk_norm=False,\n"));
  EXPECT_THAT(mixtral_py, HasSubstr("route_norm=True"));
  EXPECT_THAT(Feature(mixtral, "network").note, HasSubstr("no Mixtral model"));
  for (const ArchitectureRow& row : mixtral.architecture) {
    EXPECT_EQ(row.status, FidelityStatus::kExact) << row.feature << ": " << row.note;
    EXPECT_NE(row.feature, "qk_norm");
  }
  // torchtitan's MoE has no auxiliary load-balancing loss.
  ModelSpec with_loss = testing::TinyModelSpec("mixtral");
  with_loss.router_aux_loss_coef = 0.02;
  EXPECT_EQ(Feature(ExportOf(kFp32, "torchtitan", with_loss), "router_aux_loss").status,
            FidelityStatus::kNotExpressible);
  // DeepSeek-V3's router, shared experts and latent attention are not
  // qwen3's: still a dense llama3 flavor.
  ExportResult deepseek = ExportOf(kFp32, "torchtitan", testing::TinyModelSpec("deepseek_v3"));
  EXPECT_THAT(File(deepseek, "autoaccel_torchtitan.toml"), HasSubstr("name = \"llama3\""));
  EXPECT_EQ(Feature(deepseek, "experts").status, FidelityStatus::kNotExpressible);
}

TEST(ExportTest, TorchtitanSpreadsExpertsOverItsFsdpRanksOnly) {
  const ModelSpec qwen = testing::TinyModelSpec("qwen3_moe");
  const std::string kRest =
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
  ExportResult fsdp = ExportOf("dp=4,tp=1,pp=1,sharding=fsdp,ep=2," + kRest, "torchtitan", qwen);
  ASSERT_FALSE(fsdp.rejected());
  EXPECT_THAT(File(fsdp, "autoaccel_torchtitan.toml"),
              HasSubstr("expert_parallel_degree = 2\nexpert_tensor_parallel_degree = 1\n"));
  EXPECT_EQ(Row(fsdp, "expert_parallel").status, FidelityStatus::kExact);
  EXPECT_THAT(Row(fsdp, "expert_parallel").note, HasSubstr("all-to-all, dropless"));
  // The experts split over the tensor-parallel ranks, as ours (torchtitan's
  // default expert_tensor_parallel_degree 1 would not).
  ExportResult tp = ExportOf("dp=2,tp=2,pp=1,sharding=fsdp,sp=1,ep=2," + kRest, "torchtitan", qwen);
  ASSERT_FALSE(tp.rejected());
  EXPECT_THAT(File(tp, "autoaccel_torchtitan.toml"),
              HasSubstr("expert_parallel_degree = 2\nexpert_tensor_parallel_degree = 2\n"));
  // Replicated data parallelism replicates the experts; with context
  // parallelism FSDP runs over the cp ranks, which ep may divide.
  ExportResult ddp = ExportOf("dp=4,tp=1,pp=1,sharding=none,ep=2," + kRest, "torchtitan", qwen);
  EXPECT_EQ(Row(ddp, "expert_parallel").status, FidelityStatus::kRejected);
  EXPECT_THAT(Row(ddp, "expert_parallel").note, HasSubstr("use sharding fsdp"));
  ExportResult cp = ExportOf("dp=2,tp=1,pp=1,sharding=none,cp=2,ep=2," + kRest, "torchtitan", qwen);
  EXPECT_EQ(Row(cp, "expert_parallel").status, FidelityStatus::kExact);
  // Models without torchtitan experts.
  ExportResult llama = ExportOf("dp=4,tp=1,pp=1,sharding=fsdp,ep=2," + kRest, "torchtitan",
                                testing::TinyModelSpec("llama"));
  EXPECT_THAT(Row(llama, "expert_parallel").note, HasSubstr("llama model has no experts"));
  EXPECT_EQ(Row(llama, "expert_parallel").status, FidelityStatus::kRejected);
  ExportResult deepseek = ExportOf("dp=4,tp=1,pp=1,sharding=fsdp,ep=2," + kRest, "torchtitan",
                                   testing::TinyModelSpec("deepseek_v3"));
  EXPECT_EQ(Row(deepseek, "expert_parallel").status, FidelityStatus::kRejected);
  EXPECT_THAT(Row(deepseek, "expert_parallel").note, HasSubstr("deepseek_v3 model"));
  // No model: the key is written for the user's flavor.
  ExportResult none = ExportOf("dp=4,tp=1,pp=1,sharding=fsdp,ep=2," + kRest, "torchtitan");
  EXPECT_EQ(Row(none, "expert_parallel").status, FidelityStatus::kExact);
  EXPECT_THAT(File(none, "autoaccel_torchtitan.toml"), HasSubstr("expert_parallel_degree = 2\n"));
}

TEST(ExportTest, TorchtitanRefusesPipelinesForItsQwen3Model) {
  const std::string kPipeline =
      "dp=1,tp=1,pp=2,sharding=none,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,"
      "optimizer=adamw,offload=none";
  for (const char* family : {"qwen3", "qwen3_moe", "mixtral"}) {
    ExportResult r = ExportOf(kPipeline, "torchtitan", testing::TinyModelSpec(family));
    EXPECT_EQ(Row(r, "pipeline_parallel").status, FidelityStatus::kRejected) << family;
  }
  EXPECT_FALSE(ExportOf(kPipeline, "torchtitan", testing::TinyModelSpec("llama")).rejected());
}

TEST(ExportTest, TorchtitanKeepsTheRoutersOutOfFloat8) {
  ExportResult r = ExportOf(
      "dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=fp8,checkpoint=none,attention=sdpa,"
      "optimizer=adamw,offload=none",
      "torchtitan", testing::TinyModelSpec("qwen3_moe"));
  EXPECT_THAT(File(r, "autoaccel_torchtitan.toml"),
              HasSubstr("filter_fqns = [\"output\", \"router.gate\"]"));
  EXPECT_THAT(Row(r, "precision").note, HasSubstr("the experts (GroupedExperts, no nn.Linear)"));
}

TEST(ExportTest, LightningStrategyArguments) {
  ExportResult r = ExportOf(
      "dp=8,tp=1,pp=1,sharding=zero2,mbs=2,ga=2,precision=fp16,"
      "checkpoint=none,attention=sdpa,optimizer=adamw,offload=cpu",
      "lightning");
  nlohmann::json j = nlohmann::json::parse(File(r, "lightning.json"));
  EXPECT_EQ(j["trainer"]["strategy"]["class_path"],
            "lightning.pytorch.strategies.DeepSpeedStrategy");
  EXPECT_EQ(j["trainer"]["strategy"]["init_args"]["stage"], 2);
  EXPECT_EQ(j["trainer"]["strategy"]["init_args"]["offload_optimizer"], true);
  EXPECT_EQ(j["trainer"]["precision"], "16-mixed");
  EXPECT_EQ(j["trainer"]["accumulate_grad_batches"], 2);
  EXPECT_EQ(j["trainer"]["devices"], 8);
  // LightningCLI takes the config after its subcommand.
  EXPECT_EQ(r.command, "python train.py fit --config lightning.json");
}

TEST(ExportTest, AtorchListLoadsBackToTheSameFields) {
  for (const Strategy& s : ManyStrategies()) {
    absl::StatusOr<ExportResult> r = Export(Input(s, "atorch"));
    ASSERT_TRUE(r.ok());
    if (r->rejected()) continue;  // fp8
    const std::string list = File(*r, "load_strategy.txt");
    absl::StatusOr<PartialStrategy> back = ParseAtorchStrategy(list);
    ASSERT_TRUE(back.ok()) << list << ": " << back.status();
    // Every exact row comes back: set to the strategy's value, or unset
    // where the strategy holds the default (ATorch names no "fp32", "none").
    const Strategy defaults;
    ForEachRow(kStrategyFields, [&](const auto& field) {
      const FidelityRow& row = Row(*r, std::string(field.name));
      if (row.status != FidelityStatus::kExact) return;
      const auto& got = (*back).*(field.partial);
      if (got.has_value()) {
        EXPECT_TRUE(*got == s.*(field.member)) << field.name << " in " << list;
      } else {
        EXPECT_TRUE(s.*(field.member) == defaults.*(field.member))
            << field.name << " lost in " << list << " for " << StrategyToText(s);
      }
    });
  }
}

// ATorch 0.2.5's get_strategy takes a name or a (name, config) pair, and
// validate_strategy refuses the whole list for a name it does not register
// (tests/export/check_atorch.py hands the lists to ATorch itself).
TEST(ExportTest, AtorchListHoldsOnlyWhatAtorchsOwnParserTakes) {
  const std::set<std::string> registered = {"zero1",
                                            "zero2",
                                            "fsdp",
                                            "fsdp2",
                                            "parallel_mode",
                                            "auto_ddp",
                                            "amp_native",
                                            "fp8",
                                            "tensor_parallel",
                                            "module_replace",
                                            "checkpoint",
                                            "native_dynamo",
                                            "pipeline_parallel",
                                            "mixed_parallel",
                                            "sequence_parallel",
                                            "half",
                                            "deepspeed_3d_parallel"};
  for (const std::optional<ModelSpec>& model :
       {std::optional<ModelSpec>(), std::optional(Model(8))}) {
    for (const Strategy& s : ManyStrategies()) {
      ExportInput in = Input(s, "atorch");
      in.model = model;
      absl::StatusOr<ExportResult> r = Export(in);
      ASSERT_TRUE(r.ok());
      if (r->rejected()) continue;  // fp8
      const std::string text = File(*r, "load_strategy.txt");
      absl::StatusOr<nlohmann::json> list = ParsePythonLiteral(text);
      ASSERT_TRUE(list.ok() && list->is_array()) << text;
      for (const nlohmann::json& element : *list) {
        const bool pair = element.is_array() && element.size() == 2 && element[0].is_string();
        ASSERT_TRUE(element.is_string() || pair) << element.dump() << " in " << text;
        const std::string name = pair ? element[0].get<std::string>() : element.get<std::string>();
        EXPECT_TRUE(registered.count(name)) << name << " in " << text;
        // A bare "checkpoint" fails in ATorch (isinstance with None), a bare
        // "half" is bf16 in one place and fp16 in another, a bare
        // "sequence_parallel" has no sp_size.
        if (name == "checkpoint" || name == "half") {
          EXPECT_TRUE(pair) << text;
        }
        if (name == "half") {
          EXPECT_EQ(element[1], "bf16") << text;
        }
        EXPECT_NE(name, "sequence_parallel") << text;
        EXPECT_NE(name, "module_replace") << text;
      }
    }
  }
}

TEST(ExportTest, AtorchParallelModeNamesTheFastestGroupFirstAndThePipeGroupPipe) {
  ExportResult r = ExportOf(
      "dp=2,tp=2,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=1,ga=4,precision=bf16,"
      "checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
      "atorch");
  const std::string list = File(r, "load_strategy.txt");
  // strategy.h's rank = (pp_rank * dp + dp_rank) * tp + tp_rank; ATorch's
  // first group varies fastest.
  EXPECT_THAT(list, HasSubstr("(\"parallel_mode\", ([(\"tensor\", 2), (\"data\", 2), "
                              "(\"pipe\", 2)], None))"));
  EXPECT_THAT(list, HasSubstr("(\"tensor_parallel\", {\"size\": 2})"));
  EXPECT_THAT(list, HasSubstr("(\"pipeline_parallel\", {\"size\": 2, \"pipe_schedule\": "
                              "\"Interleaved1F1B\", \"nstages\": 4, \"chunks\": 4})"));
}

TEST(ExportTest, AtorchCheckpointsTheModelsLayerClassWithoutItsCache) {
  ExportResult r = ExportOf(
      "mbs=2,ga=1,precision=fp32,checkpoint=full,ckpt_pct=25,attention=sdpa,optimizer=adamw,"
      "offload=none",
      "atorch", Model(8));
  EXPECT_EQ(File(r, "load_strategy.txt"),
            "[(\"checkpoint\", {\"wrap_class\": (\"LlamaDecoderLayer\",), "
            "\"max_checkpoint_module_num\": 2})]\n");
  EXPECT_EQ(Row(r, "checkpoint_percent").status, FidelityStatus::kExact);
  EXPECT_THAT(Row(r, "checkpointing").note, HasSubstr("use_cache=False"));
  // Without --model, every family's layer class (ATorch drops the others).
  r = ExportOf(
      "mbs=2,ga=1,precision=pure_bf16,checkpoint=full,ckpt_pct=25,attention=sdpa,"
      "optimizer=adamw,offload=none",
      "atorch");
  const std::string list = File(r, "load_strategy.txt");
  EXPECT_THAT(list, HasSubstr("(\"half\", \"bf16\")"));
  EXPECT_THAT(list, HasSubstr("(\"checkpoint\", (\"GPT2Block\", \"LlamaDecoderLayer\", "
                              "\"BertLayer\", \"MixtralDecoderLayer\""));
  EXPECT_THAT(list, HasSubstr("\"Qwen2DecoderLayer\""));
  EXPECT_EQ(Row(r, "checkpoint_percent").status, FidelityStatus::kApproximated);
}

TEST(ExportTest, AtorchLeavesTheOptimizerAttentionAndBatchToTheScript) {
  ExportResult r = ExportOf(
      "dp=2,tp=1,pp=1,sharding=zero1,mbs=3,ga=2,precision=fp16,checkpoint=none,attention=sdpa,"
      "optimizer=fused_adamw,offload=cpu",
      "atorch");
  EXPECT_EQ(File(r, "load_strategy.txt"),
            "[(\"parallel_mode\", ([(\"data\", 2)], None)), \"zero1\", "
            "(\"amp_native\", {\"dtype\": \"fp16\"})]\n");
  EXPECT_EQ(Row(r, "optimizer").status, FidelityStatus::kNotExpressible);
  EXPECT_THAT(Row(r, "optimizer").note, HasSubstr("optim_args={your lr, betas, eps, "
                                                  "weight_decay, \"fused\": True}"));
  EXPECT_EQ(Row(r, "attention").status, FidelityStatus::kNotExpressible);
  EXPECT_THAT(Row(r, "attention").note, HasSubstr("attn_implementation=\"sdpa\""));
  EXPECT_THAT(Row(r, "micro_batch_size").note, HasSubstr("dataloader_args={\"batch_size\": 6}"));
  EXPECT_EQ(Row(r, "offload").status, FidelityStatus::kNotExpressible);
  EXPECT_EQ(Row(r, "sharding").status, FidelityStatus::kApproximated);
  EXPECT_THAT(Row(r, "sharding").note, HasSubstr("Zero1 ignored as fairscale is not installed!"));
  // Under fsdp the offload is FSDP's (parameters too).
  r = ExportOf(
      "dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=bf16,checkpoint=none,attention=math,"
      "optimizer=adamw,offload=cpu",
      "atorch", testing::TinyModelSpec("qwen2"));
  EXPECT_EQ(File(r, "load_strategy.txt"),
            "[(\"parallel_mode\", ([(\"data\", 2)], None)), (\"fsdp\", {\"atorch_wrap_cls\": "
            "(\"Qwen2DecoderLayer\",), \"cpu_offload\": True}), (\"amp_native\", "
            "{\"dtype\": \"bf16\"})]\n");
  EXPECT_EQ(Row(r, "offload").status, FidelityStatus::kApproximated);
  EXPECT_EQ(Row(r, "sharding").status, FidelityStatus::kExact);
  EXPECT_THAT(Row(r, "optimizer").note, HasSubstr("\"foreach\": False"));
}

TEST(ExportTest, ColossalAIHybridPluginCarriesTheWholeLayout) {
  ExportResult r = ExportOf(
      "dp=2,tp=2,pp=2,sharding=zero1,sp=1,pp_schedule=interleaved,vpp=2,mbs=1,ga=4,"
      "precision=pure_bf16,checkpoint=full,ckpt_pct=50,attention=sdpa,optimizer=fused_adamw,"
      "offload=cpu",
      "colossalai");
  ASSERT_FALSE(r.rejected());
  const std::string py = File(r, "autoaccel_colossalai.py");
  EXPECT_THAT(py, HasSubstr("def make_plugin():\n    return HybridParallelPlugin(\n"));
  for (const char* arg :
       {"tp_size=2,", "pp_size=2,", "zero_stage=1,", "precision=\"bf16\",", "cpu_offload=True,",
        "pp_style=\"interleaved\",", "num_model_chunks=2,", "num_microbatches=4,",
        "microbatch_size=1,", "enable_sequence_parallelism=True,",
        "sequence_parallelism_mode=\"split_gather\",",
        "gradient_checkpoint_config=PipelineGradientCheckpointConfig("
        "gradient_checkpointing_ratio=0.5),"}) {
    EXPECT_THAT(py, HasSubstr(absl::StrCat("        ", arg, "\n"))) << arg;
  }
  EXPECT_THAT(py, HasSubstr("from colossalai.shardformer import PipelineGradientCheckpointConfig"));
  EXPECT_THAT(py, HasSubstr("GRADIENT_CHECKPOINTING = True"));
  EXPECT_THAT(py, HasSubstr("ATTN_IMPLEMENTATION = \"sdpa\""));
  EXPECT_THAT(py, HasSubstr("def make_booster():\n    return Booster(plugin=make_plugin())\n"));
  EXPECT_EQ(r.command, "PYTHONPATH=. torchrun --nnodes=1 --nproc-per-node=8 train.py");
  EXPECT_EQ(Row(r, "precision").status, FidelityStatus::kExact);
  EXPECT_EQ(Row(r, "checkpoint_percent").status, FidelityStatus::kApproximated);
  EXPECT_EQ(Row(r, "optimizer").status, FidelityStatus::kNotExpressible);
  // The optimizer is the script's: no plugin argument carries a hyperparameter.
  for (const char* never : {"lr", "weight_decay", "betas", "eps", "max_norm"}) {
    EXPECT_THAT(py, Not(HasSubstr(absl::StrCat(never, "=")))) << never;
  }
}

TEST(ExportTest, ColossalAIPicksThePluginForShardingAndPrecision) {
  const std::string rest = "checkpoint=none,attention=math,optimizer=adamw,";
  ExportResult ddp =
      ExportOf("dp=2,tp=1,pp=1,sharding=none,mbs=2,ga=2,precision=bf16," + rest + "offload=none",
               "colossalai");
  std::string py = File(ddp, "autoaccel_colossalai.py");
  EXPECT_THAT(py, HasSubstr("return TorchDDPPlugin()"));
  // Our bf16 autocasts fp32 weights: the plugin's precision="bf16" would not.
  EXPECT_THAT(py, HasSubstr("AUTOCAST_DTYPE = \"bfloat16\""));
  EXPECT_EQ(Row(ddp, "precision").status, FidelityStatus::kNotExpressible);
  EXPECT_THAT(Row(ddp, "grad_accum_steps").note, HasSubstr("booster.no_sync"));

  ExportResult fp16 =
      ExportOf("dp=2,tp=1,pp=1,sharding=none,mbs=2,ga=2,precision=fp16," + rest + "offload=none",
               "colossalai");
  EXPECT_THAT(File(fp16, "autoaccel_colossalai.py"),
              HasSubstr("return Booster(plugin=make_plugin(), mixed_precision=\"fp16\")"));
  EXPECT_EQ(Row(fp16, "precision").status, FidelityStatus::kExact);

  ExportResult pure =
      ExportOf("mbs=2,ga=2,precision=pure_bf16," + rest + "offload=none", "colossalai");
  py = File(pure, "autoaccel_colossalai.py");
  EXPECT_THAT(py, HasSubstr("HybridParallelPlugin(\n        tp_size=1,\n        pp_size=1,\n"
                            "        zero_stage=0,\n        precision=\"bf16\",\n    )"));
  EXPECT_THAT(py, HasSubstr("AUTOCAST_DTYPE = None"));

  ExportResult zero =
      ExportOf("dp=2,tp=1,pp=1,sharding=zero2,mbs=2,ga=2,precision=fp16," + rest + "offload=cpu",
               "colossalai");
  py = File(zero, "autoaccel_colossalai.py");
  for (const char* arg : {"stage=2,", "cpu_offload=True,", "precision=\"fp16\",",
                          "initial_scale=2**16,", "growth_interval=2000,", "hysteresis=1,"}) {
    EXPECT_THAT(py, HasSubstr(absl::StrCat("        ", arg, "\n"))) << arg;
  }
  EXPECT_THAT(py, HasSubstr("return LowLevelZeroPlugin("));
  EXPECT_EQ(Row(zero, "precision").status, FidelityStatus::kApproximated);
  EXPECT_THAT(Row(zero, "grad_accum_steps").note, HasSubstr("ZeRO-2 has no no_sync"));

  ExportResult gemini =
      ExportOf("dp=4,tp=1,pp=1,sharding=fsdp,mbs=1,ga=2,precision=bf16," + rest + "offload=none",
               "colossalai");
  py = File(gemini, "autoaccel_colossalai.py");
  for (const char* arg : {"placement_policy=\"static\",", "shard_param_frac=1.0,",
                          "precision=\"bf16\",", "enable_gradient_accumulation=True,"}) {
    EXPECT_THAT(py, HasSubstr(absl::StrCat("        ", arg, "\n"))) << arg;
  }
  EXPECT_EQ(Row(gemini, "precision").status, FidelityStatus::kApproximated);
  EXPECT_THAT(Row(gemini, "optimizer").note, HasSubstr("HybridAdam"));
}

TEST(ExportTest, ColossalAIRejectsWhatItsPluginsAssert) {
  const std::string rest = "checkpoint=none,attention=math,optimizer=adamw,offload=none";
  // Gemini trains in fp16/bf16 only.
  EXPECT_EQ(
      Row(ExportOf("dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=fp32," + rest, "colossalai"),
          "precision")
          .status,
      FidelityStatus::kRejected);
  // HybridParallelPlugin: ZeRO needs fp16/bf16; zero_stage <= 1 with pipelines.
  EXPECT_EQ(
      Row(ExportOf("dp=2,tp=2,pp=1,sharding=zero1,mbs=1,ga=1,precision=fp32," + rest, "colossalai"),
          "precision")
          .status,
      FidelityStatus::kRejected);
  EXPECT_EQ(
      Row(ExportOf("dp=2,tp=1,pp=2,sharding=zero2,mbs=1,ga=4,precision=bf16," + rest, "colossalai"),
          "sharding")
          .status,
      FidelityStatus::kRejected);
  // 1F1B needs at least pp_size micro-batches a step.
  ExportResult few =
      ExportOf("dp=1,tp=1,pp=4,sharding=none,pp_schedule=1f1b,mbs=1,ga=2,precision=bf16," + rest,
               "colossalai");
  EXPECT_TRUE(few.rejected());
  EXPECT_EQ(Row(few, "grad_accum_steps").status, FidelityStatus::kRejected);
  // Offload only under ZeRO.
  EXPECT_EQ(Row(ExportOf("dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=1,precision=bf16,"
                         "checkpoint=none,attention=math,optimizer=adamw,offload=cpu",
                         "colossalai"),
                "offload")
                .status,
            FidelityStatus::kRejected);
}

TEST(ExportTest, FlagAITrainerArgumentsOnOneProcess) {
  ExportResult r = ExportOf(
      "mbs=2,ga=4,precision=fp32,checkpoint=full,attention=sdpa,optimizer=fused_adamw,"
      "offload=none",
      "flagai");
  ASSERT_EQ(r.files.size(), 1u);
  nlohmann::json j = nlohmann::json::parse(File(r, "flagai_trainer.json"));
  EXPECT_EQ(j["env_type"], "pytorch");
  EXPECT_EQ(j["pytorch_device"], "cuda");
  EXPECT_EQ(j["batch_size"], 2);
  EXPECT_EQ(j["gradient_accumulation_steps"], 4);
  EXPECT_EQ(j["fp16"], false);
  EXPECT_EQ(j["checkpoint_activations"], true);
  EXPECT_EQ(r.command, "python train.py");
  // FlagAI 1.8.4's plain loop never zeroes the gradients after a step.
  EXPECT_EQ(Row(r, "grad_accum_steps").status, FidelityStatus::kApproximated);
  EXPECT_THAT(Row(r, "grad_accum_steps").note, HasSubstr("register_step_post_hook"));
  EXPECT_THAT(Row(r, "optimizer").note, HasSubstr("trainer.train(model, optimizer=optimizer"));
  EXPECT_THAT(Row(r, "checkpointing").note, HasSubstr("gradient_checkpointing_enable()"));
}

TEST(ExportTest, FlagAIGoesThroughDeepSpeedForZeroAndBf16) {
  ExportResult r = ExportOf(
      "dp=4,tp=1,pp=1,sharding=zero2,mbs=2,ga=2,precision=pure_bf16,checkpoint=none,"
      "attention=math,optimizer=adamw,offload=none",
      "flagai");
  nlohmann::json j = nlohmann::json::parse(File(r, "flagai_trainer.json"));
  EXPECT_EQ(j["env_type"], "deepspeed");
  EXPECT_EQ(j["deepspeed_config"], "ds_config.json");
  EXPECT_EQ(j["num_gpus"], 4);
  EXPECT_EQ(j["num_nodes"], 1);
  EXPECT_EQ(j["model_parallel_size"], 1);
  nlohmann::json ds = nlohmann::json::parse(File(r, "ds_config.json"));
  EXPECT_EQ(ds["zero_optimization"]["stage"], 2);
  EXPECT_EQ(ds["bf16"]["enabled"], true);
  EXPECT_EQ(ds["train_batch_size"], 16);
  // FlagAI hands the script's optimizer to deepspeed.initialize.
  EXPECT_FALSE(ds.contains("optimizer"));
  EXPECT_EQ(Row(r, "grad_accum_steps").status, FidelityStatus::kExact);

  ExportResult tp = ExportOf(
      "dp=2,tp=2,pp=1,sharding=none,mbs=1,ga=1,precision=fp32,checkpoint=none,"
      "attention=math,optimizer=adamw,offload=none",
      "flagai");
  j = nlohmann::json::parse(File(tp, "flagai_trainer.json"));
  EXPECT_EQ(j["env_type"], "deepspeed+mpu");
  EXPECT_EQ(j["model_parallel_size"], 2);
  EXPECT_FALSE(nlohmann::json::parse(File(tp, "ds_config.json")).contains("tensor_parallel"));
  EXPECT_EQ(Row(tp, "tensor_parallel").status, FidelityStatus::kNotExpressible);

  ExportResult ddp = ExportOf(
      "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=1,precision=fp32,checkpoint=none,"
      "attention=math,optimizer=adamw,offload=none",
      "flagai");
  EXPECT_EQ(nlohmann::json::parse(File(ddp, "flagai_trainer.json"))["env_type"], "pytorchDDP");
  EXPECT_THAT(Row(ddp, "data_parallel").note, HasSubstr("--local-rank"));

  EXPECT_TRUE(ExportOf("dp=1,tp=1,pp=2,sharding=none,pp_schedule=1f1b,mbs=1,ga=2,precision=fp32,"
                       "checkpoint=none,attention=math,optimizer=adamw,offload=none",
                       "flagai")
                  .rejected());
}

TEST(ExportTest, FlagAINeverChoosesTheUsersLearningRate) {
  for (const Strategy& s : ManyStrategies()) {
    absl::StatusOr<ExportResult> r = Export(Input(s, "flagai"));
    ASSERT_TRUE(r.ok());
    for (const auto& [name, content] : r->files) {
      nlohmann::json j = nlohmann::json::parse(content);
      for (const char* key : {"lr", "weight_decay", "warm_up", "clip_grad", "optimizer",
                              "optimizer_type", "gradient_clipping"}) {
        EXPECT_FALSE(j.contains(key)) << name << " of " << StrategyToText(s) << " sets " << key;
      }
    }
  }
}

TEST(ExportTest, TorchrunWrapsAFormatsEntryPoint) {
  ExportInput in = Input(S("dp=16,tp=1,pp=1,sharding=zero1,mbs=1,ga=1,precision=bf16,"
                           "checkpoint=none,attention=sdpa,optimizer=adamw,offload=none"),
                         "torchrun:deepspeed");
  absl::StatusOr<ExportResult> r = Export(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nnodes, 2);
  EXPECT_EQ(r->nproc_per_node, 8);
  EXPECT_EQ(r->command,
            "torchrun --nnodes=2 --nproc-per-node=8 --node-rank=$NODE_RANK "
            "--master-addr=$MASTER_ADDR --master-port=29500 train.py --deepspeed "
            "--deepspeed_config ds_config.json");
  in.devices_per_node = 4;
  in.format = "torchrun";
  r = Export(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nnodes, 4);
  EXPECT_THAT(File(*r, "launch.sh"), HasSubstr("--nproc-per-node=4"));
}

TEST(ExportTest, TorchrunKeepsTheEnvironmentTheEntryPointNeeds) {
  ExportResult megatron = ExportOf(
      "dp=1,tp=2,pp=1,sharding=none,sp=1,mbs=1,ga=1,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=adamw,offload=none",
      "torchrun:megatron");
  EXPECT_THAT(megatron.command, StartsWith("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun "));
  ExportResult colossalai = ExportOf(
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
      "torchrun:colossalai");
  EXPECT_THAT(colossalai.command, StartsWith("PYTHONPATH=. torchrun "));
}

TEST(ExportTest, TorchrunRefusesAFormatWhoseLauncherDoesMore) {
  for (const char* format : {"torchrun:accelerate", "torchrun:flagai"}) {
    absl::StatusOr<ExportResult> r =
        Export(Input(S("mbs=1,ga=1,precision=fp32,checkpoint=none,attention=sdpa,optimizer=adamw,"
                       "offload=none"),
                     format));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << format;
    EXPECT_THAT(std::string(r.status().message()),
                AllOf(HasSubstr(absl::StrCat("--format ", format)), HasSubstr("use --format")));
  }
}

TEST(ExportTest, BadInputIsRefusedNamingTheFlag) {
  const Strategy s =
      S("dp=2,tp=1,pp=1,sharding=none,mbs=2,ga=2,precision=bf16,checkpoint=none,"
        "attention=sdpa,optimizer=adamw,offload=none");
  ExportInput in = Input(s, "nope");
  absl::StatusOr<ExportResult> r = Export(in);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("allowed: deepspeed, hf-trainer"));
  in = Input(s, "deepspeed");
  in.world_size = 4;
  EXPECT_THAT(std::string(Export(in).status().message()), HasSubstr("--world-size 4"));
  in = Input(s, "deepspeed");
  in.global_batch_size = 10;
  EXPECT_THAT(std::string(Export(in).status().message()), HasSubstr("--global-batch-size 10"));
  in = Input(s, "deepspeed");
  in.devices_per_node = 3;
  EXPECT_THAT(std::string(Export(in).status().message()), HasSubstr("--devices-per-node 3"));
  in = Input(s, "torchrun:torchrun");
  EXPECT_FALSE(Export(in).ok());
}

TEST(ExportTest, JsonDocumentHasTheDocumentedKeys) {
  ExportResult r = ExportOf(
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,"
      "optimizer=adamw,offload=none",
      "deepspeed");
  nlohmann::ordered_json j = ExportResultToJson(r);
  EXPECT_EQ(j["format"], "deepspeed");
  EXPECT_TRUE(j["files"].contains("ds_config.json"));
  EXPECT_EQ(j["command"], r.command);
  ASSERT_EQ(j["fidelity"].size(), kNumStrategyFields);
  EXPECT_EQ(j["fidelity"][0]["dimension"], "data_parallel");
  EXPECT_EQ(j["fidelity"][0]["status"], "exact");
  EXPECT_TRUE(j["fidelity"][0].contains("note"));
  EXPECT_EQ(j["architecture"], nlohmann::ordered_json::array());
  EXPECT_EQ(j["rejected"], false);
  nlohmann::ordered_json megatron = ExportResultToJson(MegatronOf(testing::TinyModelSpec("qwen2")));
  ASSERT_FALSE(megatron["architecture"].empty());
  EXPECT_EQ(megatron["architecture"][0]["feature"], "network");
  EXPECT_EQ(megatron["architecture"][0]["value"], "qwen2");
  EXPECT_EQ(megatron["architecture"][0]["status"], "exact");
  EXPECT_TRUE(megatron["architecture"][0].contains("note"));
}

}  // namespace
}  // namespace autoaccel
