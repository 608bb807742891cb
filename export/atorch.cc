// The atorch format: ATorch auto_accelerate's load_strategy list (ATorch
// 0.2.5), a Python literal that ast.literal_eval reads (dtypes are ATorch's
// strings "bf16" / "fp16", layer classes names), in the vocabulary
// ParseAtorchStrategy (search/atorch_strategy.h) reads, so that exporting
// and loading it back (--load-strategy) gives the exact rows' fields back.
//
// What ATorch does with each method is from its source (atorch/auto/
// opt_lib/) and tests/export/check_atorch.py, which hands the lists to
// auto_accelerate on CPU ranks: validate_strategy refuses the whole list
// for a name ATorch does not register (the optimizer and the offload are no
// methods of its); a bare "checkpoint" fails (it needs the layer class) and
// a bare "sequence_parallel" too (no sp_size); parallel_mode's first group
// varies fastest and ATorch's pipeline reads the group "pipe".
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/formats.h"
#include "spec/model_families.h"

namespace autoaccel {
namespace {

// Hugging Face's class of one transformer block of `f`, the module ATorch's
// checkpoint and fsdp wrap; empty for a TorchScript model.
std::string LayerClass(const ModelFamilyInfo& f) {
  switch (f.network) {
    case Network::kGpt2:
      return "GPT2Block";
    case Network::kBert:
      return "BertLayer";
    case Network::kDecoder:
      return absl::StrCat(f.architecture, "DecoderLayer");
    case Network::kTorchScript:
      return "";
  }
  return "";
}

// The layer classes as a Python tuple of names: the model's own with
// --model, else every known family's. ATorch matches the names against the
// model's modules (to_module_class_by_name) and drops the ones it does not
// find. Empty for a TorchScript model (its classes are the user's).
std::string LayerClasses(const FormatContext& c) {
  std::vector<std::string> names;
  if (c.in.model.has_value()) {
    const std::string name = LayerClass(c.in.model->Info());
    if (!name.empty()) names.push_back(absl::StrCat("\"", name, "\""));
  } else {
    for (const ModelFamilyInfo& f : ModelFamilies()) {
      const std::string name = LayerClass(f);
      if (!name.empty()) names.push_back(absl::StrCat("\"", name, "\""));
    }
  }
  if (names.empty()) return "";
  return absl::StrCat("(", absl::StrJoin(names, ", "), names.size() == 1 ? ",)" : ")");
}

std::string WhichLayers(const FormatContext& c) {
  return c.in.model.has_value() ? "the model's layer class"
                                : "the layer classes of every family autoaccel knows (ATorch "
                                  "drops the names the model lacks; add your own class's name "
                                  "for another model, or export with --model)";
}

}  // namespace

FormatOutput ExportAtorch(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  std::vector<std::string> methods;
  const std::string layers = LayerClasses(c);

  // parallel_mode: ATorch numbers ranks with the first group fastest
  // (_get_pg_ranks), so tensor, data, pipe gives strategy.h's layout
  // rank = (pp_rank * dp + dp_rank) * tp + tp_rank. ATorch's pipeline code
  // reads the group "pipe".
  std::vector<std::string> groups;
  if (s.tensor_parallel > 1)
    groups.push_back(absl::StrCat("(\"tensor\", ", s.tensor_parallel, ")"));
  if (s.data_parallel > 1) groups.push_back(absl::StrCat("(\"data\", ", s.data_parallel, ")"));
  if (s.pipeline_parallel > 1)
    groups.push_back(absl::StrCat("(\"pipe\", ", s.pipeline_parallel, ")"));
  if (!groups.empty()) {
    methods.push_back(
        absl::StrCat("(\"parallel_mode\", ([", absl::StrJoin(groups, ", "), "], None))"));
  }
  rows.Exact(&Strategy::data_parallel,
             s.data_parallel > 1 ? "parallel_mode data: DistributedDataParallel over the group"
                                 : "no data group");
  // A tensor or pipe group alone only makes the process groups: the
  // semi-automatic methods split the model, each planning its own split of
  // the traced graph. Their "size" is ours (ParseAtorchStrategy reads it;
  // ATorch reads the sizes from parallel_mode and ignores the key).
  if (s.tensor_parallel > 1) {
    methods.push_back(absl::StrCat("(\"tensor_parallel\", {\"size\": ", s.tensor_parallel, "})"));
    rows.Approximated(
        &Strategy::tensor_parallel,
        absl::StrCat("parallel_mode tensor and tensor_parallel: ATorch's shard planner splits "
                     "the traced model's operators over the group, its own plan rather than "
                     "Megatron's column/row-parallel layers",
                     s.pipeline_parallel > 1
                         ? " (beside pipeline_parallel; ATorch advises its mixed_parallel for "
                           "both, which --load-strategy does not read)"
                         : ""));
  } else {
    rows.Exact(&Strategy::tensor_parallel, "no tensor group");
  }
  if (s.pipeline_parallel > 1) {
    const bool interleaved = s.pipeline_schedule == PipelineSchedule::kInterleaved;
    methods.push_back(absl::StrCat("(\"pipeline_parallel\", {\"size\": ", s.pipeline_parallel,
                                   ", \"pipe_schedule\": \"",
                                   interleaved ? "Interleaved1F1B" : "1F1B",
                                   "\", \"nstages\": ", s.pipeline_parallel * s.virtual_stages,
                                   ", \"chunks\": ", s.grad_accum_steps, "})"));
    rows.Approximated(&Strategy::pipeline_parallel,
                      "parallel_mode pipe and pipeline_parallel: ATorch's compiler splits the "
                      "traced model into stages where it chooses (with the pippy package)");
    rows.Approximated(&Strategy::pipeline_schedule,
                      absl::StrCat("pipe_schedule ", interleaved ? "Interleaved1F1B" : "1F1B",
                                   ": PiPPy's driver"));
    rows.Approximated(&Strategy::virtual_stages,
                      absl::StrCat("nstages ", s.pipeline_parallel * s.virtual_stages,
                                   ": stages over the pipe group, split where ATorch chooses"));
  } else {
    rows.Exact(&Strategy::pipeline_parallel, "no pipe group");
    rows.Exact(&Strategy::pipeline_schedule, "no pipeline");
    rows.Exact(&Strategy::virtual_stages, "no pipeline");
  }

  switch (s.sharding) {
    case Sharding::kNone:
      rows.Exact(&Strategy::sharding);
      break;
    case Sharding::kZero1:
      methods.push_back("\"zero1\"");
      rows.Approximated(&Strategy::sharding,
                        "zero1 shards the optimizer state with fairscale's OSS, which ATorch "
                        "does not install: without fairscale ATorch logs \"Zero1 ignored as "
                        "fairscale is not installed!\" and trains plain DDP");
      break;
    case Sharding::kZero2:
      methods.push_back("\"zero2\"");
      rows.Exact(&Strategy::sharding,
                 "zero2: FSDP SHARD_GRAD_OP on GPUs (gradients and optimizer state sharded)");
      break;
    case Sharding::kFsdp:
      break;  // below, with the offload
  }
  if (s.sharding == Sharding::kFsdp) {
    std::vector<std::string> config;
    if (!layers.empty()) config.push_back(absl::StrCat("\"atorch_wrap_cls\": ", layers));
    if (s.offload == Offload::kCpu) config.push_back("\"cpu_offload\": True");
    methods.push_back(config.empty()
                          ? std::string("\"fsdp\"")
                          : absl::StrCat("(\"fsdp\", {", absl::StrJoin(config, ", "), "})"));
    if (layers.empty()) {
      rows.Approximated(&Strategy::sharding,
                        "fsdp (FULL_SHARD) wraps modules of 1e5 parameters and more: add "
                        "{\"atorch_wrap_cls\": (\"YourBlock\",)} for one unit per block");
    } else {
      rows.Exact(&Strategy::sharding,
                 absl::StrCat("fsdp (FULL_SHARD), one unit per block: atorch_wrap_cls names ",
                              WhichLayers(c)));
    }
  }
  if (s.offload == Offload::kNone) {
    rows.Exact(&Strategy::offload);
  } else if (s.sharding == Sharding::kFsdp) {
    rows.Approximated(&Strategy::offload,
                      "fsdp cpu_offload: FSDP's CPUOffload(offload_params=True) keeps the "
                      "parameters and gradients in host memory too");
  } else {
    rows.NotExpressible(&Strategy::offload,
                        "ATorch offloads only under fsdp (its DeepSpeed ZeRO path, "
                        "use_ds_zero, fails with deepspeed 0.19: DeepSpeedZeroOptimizer "
                        "wants optimizer_params)");
  }

  if (!s.sequence_parallel) {
    rows.Exact(&Strategy::sequence_parallel);
  } else {
    rows.NotExpressible(&Strategy::sequence_parallel,
                        "ATorch's sequence_parallel is Ulysses-style (heads split over an "
                        "sp group through the model's own set_sp), not Megatron's sequence "
                        "parallelism inside tensor parallelism");
  }
  NoExpertParallelRows(s, rows, "ATorch has no expert parallelism for Hugging Face models");
  NoContextParallelRows(
      s, rows,
      "ATorch has no context parallelism: its sequence_parallel is Ulysses (heads "
      "over an sp group) for models with their own set_sp method, which Hugging "
      "Face models lack");

  if (s.pipeline_parallel == 1) {
    rows.NotExpressible(
        &Strategy::micro_batch_size,
        absl::StrCat("not in load_strategy: dataloader_args={\"batch_size\": ",
                     s.micro_batch_size * s.data_parallel,
                     "} (ATorch's batch_size is the total over the ", s.data_parallel,
                     " data-parallel rank(s): each gets ", s.micro_batch_size, ")"));
    rows.NotExpressible(&Strategy::grad_accum_steps,
                        absl::StrCat("not in load_strategy: step the optimizer every ",
                                     s.grad_accum_steps, " micro-batches in your loop"));
  } else {
    // The pipeline splits each batch into `chunks` micro-batches and steps
    // the optimizer once per batch.
    rows.NotExpressible(
        &Strategy::micro_batch_size,
        absl::StrCat("not in load_strategy: dataloader_args={\"batch_size\": ",
                     s.micro_batch_size * s.grad_accum_steps * s.data_parallel,
                     "} (the total over the data-parallel ranks), which chunks ",
                     s.grad_accum_steps, " splits into micro-batches of ", s.micro_batch_size));
    rows.Approximated(&Strategy::grad_accum_steps,
                      absl::StrCat("pipeline_parallel chunks ", s.grad_accum_steps,
                                   ": the pipeline's micro-batches, one optimizer step a batch"));
  }

  switch (s.precision) {
    case Precision::kFp32:
      rows.Exact(&Strategy::precision, "no amp method");
      break;
    case Precision::kBf16:
      methods.push_back("(\"amp_native\", {\"dtype\": \"bf16\"})");
      rows.Exact(&Strategy::precision, "amp_native bf16: CUDA autocast, fp32 weights");
      break;
    case Precision::kFp16:
      methods.push_back("(\"amp_native\", {\"dtype\": \"fp16\"})");
      rows.Exact(&Strategy::precision,
                 "amp_native fp16: CUDA autocast with a GradScaler (torch's defaults, as "
                 "ours): compute the loss with the returned loss_func, which scales it");
      break;
    case Precision::kPureBf16:
      // A bare "half" is bf16 in ATorch's wrapper but fp16 where it records
      // the dtype: the dtype is always written.
      methods.push_back("(\"half\", \"bf16\")");
      rows.Exact(&Strategy::precision,
                 "half bf16: bf16 weights, ATorch's BF16Optimizer keeps fp32 master copies");
      break;
    case Precision::kFp8:
      rows.Rejected(&Strategy::precision,
                    "ATorch's auto_accelerate has no fp8 optimization method for Hugging Face "
                    "models");
      break;
  }

  // The first n layers: ATorch's check_fn counts the matching modules in
  // model.modules() order and stops at max_checkpoint_module_num.
  int ckpt_layers = 0;  // 0: every layer
  if (c.in.model.has_value() && s.checkpoint_percent < 100) {
    const int n_layer = c.in.model->n_layer;
    ckpt_layers = (n_layer * s.checkpoint_percent + 99) / 100;
    if (ckpt_layers >= n_layer) ckpt_layers = 0;
  }
  if (s.checkpointing != Checkpointing::kNone && !layers.empty()) {
    methods.push_back(ckpt_layers == 0
                          ? absl::StrCat("(\"checkpoint\", ", layers, ")")
                          : absl::StrCat("(\"checkpoint\", {\"wrap_class\": ", layers,
                                         ", \"max_checkpoint_module_num\": ", ckpt_layers, "})"));
  }
  // ATorch wraps the layers from outside the model, which therefore does not
  // turn its key/value cache off as gradient_checkpointing_enable() does:
  // the recomputed forward appends to the cache again (tested with
  // transformers 4.57 and 5.23: wrong gradients with sdpa, a shape error
  // with eager).
  constexpr absl::string_view kNoCache =
      "; load the model with use_cache=False, or transformers' key/value cache grows again "
      "in the recomputed forward (wrong gradients with sdpa, an error with eager)";
  const std::string wraps = absl::StrCat("checkpoint wraps ", WhichLayers(c));
  switch (s.checkpointing) {
    case Checkpointing::kNone:
      rows.Exact(&Strategy::checkpointing, "no checkpoint method");
      break;
    case Checkpointing::kFull:
      if (layers.empty()) {
        rows.NotExpressible(&Strategy::checkpointing,
                            "add (\"checkpoint\", (\"YourBlock\",)) with your layer class's "
                            "name: ATorch's checkpoint needs the class to wrap");
      } else {
        rows.Exact(&Strategy::checkpointing, absl::StrCat(wraps, ": whole layers", kNoCache));
      }
      break;
    case Checkpointing::kSelective:
      if (layers.empty()) {
        rows.NotExpressible(&Strategy::checkpointing,
                            "add (\"checkpoint\", (\"YourBlock\",)) with your layer class's "
                            "name (whole layers: ATorch has no selective mode)");
      } else {
        rows.Approximated(&Strategy::checkpointing,
                          absl::StrCat(wraps,
                                       ": ATorch recomputes whole layers; it has no "
                                       "selective mode",
                                       kNoCache));
      }
      break;
  }
  if (s.checkpointing == Checkpointing::kNone || s.checkpoint_percent == 100) {
    rows.Exact(&Strategy::checkpoint_percent);
  } else if (ckpt_layers > 0) {
    rows.Exact(&Strategy::checkpoint_percent,
               absl::StrCat("max_checkpoint_module_num ", ckpt_layers, ": the first ", ckpt_layers,
                            " of ", c.in.model->n_layer, " layers"));
  } else {
    rows.Approximated(&Strategy::checkpoint_percent,
                      c.in.model.has_value()
                          ? "every layer (the percentage rounds up to all of them)"
                          : "every layer: export with --model for max_checkpoint_module_num");
  }

  rows.NotExpressible(
      &Strategy::attention,
      absl::StrCat("not in load_strategy: load the model with attn_implementation=\"",
                   s.attention == Attention::kSdpa ? "sdpa" : "eager",
                   "\" (ATorch's module_replace swaps attention for flash-attn only with "
                   "transformers < 4.38; with newer ones it swaps LayerNorm for Apex's)"));
  rows.NotExpressible(
      &Strategy::optimizer,
      absl::StrCat("not in load_strategy: optim_func=torch.optim.AdamW, optim_args={your lr, "
                   "betas, eps, weight_decay, ",
                   s.optimizer == Optimizer::kFusedAdamW ? "\"fused\": True" : "\"foreach\": False",
                   "}"));

  out.files.emplace_back("load_strategy.txt",
                         absl::StrCat("[", absl::StrJoin(methods, ", "), "]\n"));
  out.entry = "train.py";
  out.command = TorchrunCommand(c, out.entry);
  return out;
}

}  // namespace autoaccel
