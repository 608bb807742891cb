// What each format's file provides to Export(): the format functions of the
// table in format_registry.cc, and the pieces several formats share.
// Internal to export/.
#ifndef AUTOACCEL_EXPORT_FORMATS_H_
#define AUTOACCEL_EXPORT_FORMATS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "export/exporter.h"
#include "export/fidelity.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

// The input, checked (Export's rules hold), and the layout it launches on.
struct FormatContext {
  const ExportInput& in;
  const Strategy& s;
  int nnodes = 1;
  int nproc_per_node = 1;
};

struct FormatOutput {
  std::vector<std::pair<std::string, std::string>> files;
  // What a launcher runs on each rank (script and arguments), e.g.
  // "train.py --deepspeed_config ds_config.json"; torchrun:F wraps it.
  std::string entry;
  // "VAR=value " words the entry needs in its environment whichever launcher
  // starts it (PYTHONPATH for a module beside the files, Megatron's
  // CUDA_DEVICE_MAX_CONNECTIONS); the command and torchrun:F's begin with
  // them. "" for none.
  std::string environment;
  // The framework's own launch command for the layout.
  std::string command;
  // ExportResult::architecture: the rows of a format that builds the network
  // from its own flags; empty for the others.
  std::vector<ArchitectureRow> architecture;
};

// A format: fills `rows` with one row per dimension (a kRejected row when
// the framework refuses the combination; the files are then dropped).
using FormatFunction = FormatOutput (*)(const FormatContext& c, FidelityBuilder& rows);

FormatOutput ExportDeepSpeed(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportHfTrainer(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportAccelerate(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportMegatron(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportTorchtitan(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportLightning(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportAtorch(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportTorchrun(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportTorch(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportColossalAI(const FormatContext& c, FidelityBuilder& rows);
FormatOutput ExportFlagAI(const FormatContext& c, FidelityBuilder& rows);

// Megatron-LM's model flags for c.in.model (megatron_model.cc), for the
// megatron format: appends one "--flag" or "--flag=value" entry per flag to
// `args` and one row per feature of the model to `architecture`, and returns
// the training script that builds it ("pretrain_gpt.py"; "pretrain_bert.py"
// for bert). REQUIRES: c.in.model is set.
std::string MegatronModelFlags(const FormatContext& c, std::vector<std::string>& args,
                               std::vector<ArchitectureRow>& architecture);

// torchtitan 0.2.2's model for c.in.model (torchtitan_model.cc), for the
// torchtitan format: the module that registers the flavor "autoaccel" of
// `model_name` ("llama3"; "qwen3" for Qwen3, Qwen3-MoE and Mixtral) with the
// config's sizes, and one row per feature of the model appended to
// `architecture`. REQUIRES: c.in.model is set.
struct TorchtitanModelFile {
  std::string model_name;
  std::string module;  // Python source
  // The flavor's layers have torchtitan's mixture of experts (moe_enabled),
  // which expert_parallel_degree spreads over ranks.
  bool experts = false;
};
TorchtitanModelFile TorchtitanModelModule(const FormatContext& c,
                                          std::vector<ArchitectureRow>& architecture);

// Who builds the optimizer that DeepSpeed steps. Never a value the user did
// not choose: DeepSpeed builds an optimizer section's AdamW with torch's
// defaults (lr 1e-3, weight decay 0.01) for every hyperparameter the section
// leaves out, so a section is written only where the framework fills lr,
// betas, eps and weight decay from the user's own arguments.
enum class DeepSpeedOptimizerSource {
  // The Hugging Face Trainer: an optimizer section whose lr, betas, eps and
  // weight_decay (and gradient_clipping) are "auto", which the Trainer
  // replaces with --learning_rate, --adam_beta1/2, --adam_epsilon,
  // --weight_decay (and --max_grad_norm) before DeepSpeed reads them.
  kTrainerFillsAuto,
  // deepspeed.initialize(optimizer=...) or accelerator.prepare(optimizer):
  // no optimizer section; the script builds its own (the optimizer row says
  // which class and arguments), with its own hyperparameters.
  kScriptBuildsIt,
};

// DeepSpeed's ds_config.json for the strategy, shared by the deepspeed,
// hf-trainer and accelerate formats, and the rows of what it decides:
// sharding (ZeRO stage), precision, optimizer and offload. The caller fills
// the other rows. `who` says who builds the optimizer (see above);
// `script_call` how the script hands its optimizer over, for the optimizer
// row ("deepspeed.initialize(optimizer=...)").
nlohmann::ordered_json DeepSpeedConfigJson(const FormatContext& c, FidelityBuilder& rows,
                                           DeepSpeedOptimizerSource who,
                                           absl::string_view script_call = "");

// "torchrun --nnodes=N --nproc-per-node=G [rendezvous flags] ENTRY".
std::string TorchrunCommand(const FormatContext& c, const std::string& entry);

// The rows every format writes the same way when it has no pipeline
// parallelism: pipeline_parallel 1 exact, pp > 1 `status` with `note`;
// pipeline_schedule and virtual_stages exact at pp 1 (nothing to
// schedule), else as pipeline_parallel.
void NoPipelineRows(const Strategy& s, FidelityBuilder& rows, FidelityStatus status,
                    const std::string& note);

// The rows of a format without context parallelism: context_parallel 1 and
// its exchange exact (nothing to write), cp > 1 rejected with `why` (a
// dropped cp would hand its ranks to data parallelism and change the global
// batch).
void NoContextParallelRows(const Strategy& s, FidelityBuilder& rows, const std::string& why);

// The expert_parallel row of a format without expert parallelism: 1 exact,
// ep > 1 rejected with `why` (every rank would hold every expert: the same
// training, but not the memory the strategy was tuned to fit).
void NoExpertParallelRows(const Strategy& s, FidelityBuilder& rows, const std::string& why);

// The architecture rows, each kNotExpressible, of the mixture-of-experts
// and attention features the megatron and torchtitan exports write nothing
// for: an expert width of its own (moe_intermediate_size), dense layers
// among the expert layers, a router other than Mixtral's (a softmax over
// the top k, renormalised), shared experts, multi-head latent attention.
// `experts_built` and `attention_built` say what the export's network has in
// their place. Empty for families without them.
std::vector<ArchitectureRow> UnwrittenModelRows(const ModelSpec& m,
                                                const std::string& experts_built,
                                                const std::string& attention_built);

// The context-parallel exchange under accelerate (torch's context_parallel,
// its cp_comm_strategy): all_gather is "allgather", p2p comes closest as
// "alltoall" (torch's ring passing K/V with all-to-all collectives). Sets
// the context_parallel_comm row, naming the setting as `spelled(value)`,
// and returns the value to write. REQUIRES: context_parallel > 1.
std::string TorchCommStrategy(const Strategy& s, FidelityBuilder& rows,
                              const std::function<std::string(const char*)>& spelled);

// checkpoint_percent when the framework checkpoints whole models only: 100
// exact, else approximated (every layer) or, with checkpointing none,
// exact (always 100 there).
void AllLayersCheckpointRow(const Strategy& s, FidelityBuilder& rows, const std::string& how);

// attention when the framework leaves it to loading the model: not
// expressible, with the attn_implementation to pass to from_pretrained.
void AttentionAtLoadRow(const Strategy& s, FidelityBuilder& rows, absl::string_view framework);

// How one exported file names another file `name` of the export: the bare
// name, or ExportInput::file_dir + "/" + name when file_dir is given.
std::string FileRef(const FormatContext& c, absl::string_view name);

// A JSON document as a file's content (2-space indent, final newline).
std::string JsonFile(const nlohmann::ordered_json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_EXPORT_FORMATS_H_
