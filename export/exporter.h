// Export: a strategy turned into the configuration of a training framework
// (DeepSpeed, Hugging Face Trainer, accelerate, Megatron-LM, torchtitan,
// Lightning, ATorch, autoaccel.torch, ColossalAI, FlagAI, torchrun), with a
// fidelity report saying, for every dimension of the strategy (one row per row
// of kStrategyFields,
// spec/strategy_fields.h), whether the framework expresses it exactly,
// approximately, not at all (the user must do it in code), or rejects it;
// and, for a format that builds the network from flags of its own (megatron),
// an architecture section saying the same of each feature of the model.
//
// Pure library: no I/O, no gRPC, no LibTorch. Values only; any thread.
// The formats and what each writes: docs/CLI.md, "export".
#ifndef AUTOACCEL_EXPORT_EXPORTER_H_
#define AUTOACCEL_EXPORT_EXPORTER_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

enum class FidelityStatus {
  kExact,           // "exact": the framework does what the strategy says
  kApproximated,    // "approximated": something close; the note says how it differs
  kNotExpressible,  // "not_expressible": no configuration for it; the note says what
                    // to do in code instead
  kRejected,        // "rejected": the framework refuses this combination
};
absl::string_view FidelityStatusName(FidelityStatus s);

// One dimension of the strategy as the format renders it.
struct FidelityRow {
  std::string dimension;  // the field's JSON key: "sharding", "precision", ...
  std::string value;      // the strategy's value, in the canonical text's spelling
  FidelityStatus status = FidelityStatus::kExact;
  std::string note;  // how, or why not; may be empty for an exact row
};

// One feature of the model's architecture (query groups, biases, rope
// scaling, soft-capping, ...) as the format's flags build it. Only formats
// that build the network from flags of their own have these rows (megatron,
// export/megatron_model.cc); the formats whose script loads the Hugging Face
// model from its config.json have none, since the model class builds every
// feature the config names.
struct ArchitectureRow {
  std::string feature;  // "query_groups", "biases", "rope_scaling", ...
  std::string value;    // the model's value, as its config says it
  // kExact: the flags build it. kApproximated: something close, the note
  // says how it differs. kNotExpressible: the framework has no flag for it,
  // the network it builds lacks it or computes it otherwise, and the note
  // says what to do in code. Never kRejected: the flags are written and the
  // row says what they do not build.
  FidelityStatus status = FidelityStatus::kExact;
  std::string note;  // the flags that build it, or how it differs
};

struct ExportInput {
  Strategy strategy;
  int world_size = 1;         // must equal strategy.world_size()
  int global_batch_size = 1;  // must equal mbs * ga * data_parallel
  int seq_len = 1;
  // The model, when known: Megatron's model flags and their architecture
  // section, the number of layers a checkpoint_percent means (Megatron
  // --recompute-num-layers), torchtitan's base config. Without it those are
  // left for the user and said so.
  std::optional<ModelSpec> model;
  // GPUs per node of the cluster the export launches on; 0: min(world_size,
  // 8), i.e. one node up to 8 ranks, then nodes of 8. Must divide world_size.
  int devices_per_node = 0;
  // A name of the format table (format_registry.h): "deepspeed", ...,
  // "torchrun", or "torchrun:F" (format F launched by torchrun).
  std::string format;
  // The directory the files will be written to. Non-empty: every reference
  // one exported file (or the entry point and command) makes to another
  // names it as file_dir + "/" + name (hf-trainer's --deepspeed= and
  // --fsdp_config=, accelerate's deepspeed_config_file, ...), so the files
  // work from any working directory. Empty: bare names, relative to where
  // the files are.
  std::string file_dir;
};

struct ExportResult {
  std::string format;
  // File name -> content, in the order they are best read. Empty when
  // rejected().
  std::vector<std::pair<std::string, std::string>> files;
  // The launch command, for node 0 of the layout (other nodes: the same
  // with their node rank). Empty when rejected().
  std::string command;
  // Exactly one row per strategy dimension, in kStrategyFields' order.
  std::vector<FidelityRow> fidelity;
  // The architecture section: one row per feature of ExportInput::model, in
  // the format's order. Empty without a model and for the formats that load
  // the Hugging Face model from its config (see ArchitectureRow). Kept when
  // rejected(), to say what the flags would have built.
  std::vector<ArchitectureRow> architecture;
  int nnodes = 1;
  int nproc_per_node = 1;

  // Some row is kRejected: the framework refuses the combination, and no
  // file or command is given (never an invalid file written silently).
  bool rejected() const;
};

// The export of `in`. INVALID_ARGUMENT naming the input for an unknown
// format (listing the known ones), a strategy whose layout CheckLayout
// refuses, a world size other than the strategy's, a global batch size
// other than mbs * ga * dp, seq_len < 1, devices_per_node that does not
// divide the world size. A combination the framework refuses is not an
// error: the result has rejected() and says which rows and why.
absl::StatusOr<ExportResult> Export(const ExportInput& in);

}  // namespace autoaccel

#endif  // AUTOACCEL_EXPORT_EXPORTER_H_
