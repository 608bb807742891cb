#include "export/format_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace autoaccel {
namespace {

constexpr ExportFormat kExportFormats[] = {
    {"deepspeed", "DeepSpeed ds_config.json (ZeRO stage, offload, precision, AutoTP size)",
     &ExportDeepSpeed},
    {"hf-trainer",
     "Hugging Face TrainingArguments flags, plus from_pretrained kwargs (attn_implementation)",
     &ExportHfTrainer},
    {"accelerate", "accelerate config YAML (FSDP, DeepSpeed or DDP; parallelism_config for TP)",
     &ExportAccelerate,
     "accelerate_config.yaml is read by `accelerate launch` (it hands the script its settings "
     "in the environment); under torchrun the script trains without them: use --format "
     "accelerate"},
    {"megatron", "Megatron-LM training flags", &ExportMegatron},
    {"torchtitan", "torchtitan 0.2.2 job file (TOML) and model flavor, run with --job.config_file",
     &ExportTorchtitan},
    {"lightning", "Lightning Trainer and strategy arguments as JSON", &ExportLightning},
    {"atorch", "ATorch auto_accelerate load_strategy list (what --load-strategy reads)",
     &ExportAtorch},
    {"torch",
     "strategy.json for autoaccel.torch.apply(), which applies it to your own PyTorch model",
     &ExportTorch},
    {"colossalai",
     "ColossalAI 0.5.0 Booster plugin (make_plugin() in a Python module): Hybrid, LowLevelZero, "
     "Gemini or TorchDDP",
     &ExportColossalAI},
    {"flagai", "FlagAI 1.8.4 Trainer keyword arguments as JSON (env_type, batch, DeepSpeed config)",
     &ExportFlagAI,
     "FlagAI's Trainer starts its ranks itself (`python train.py`: its distributed env types "
     "relaunch the script): use --format flagai"},
    {"torchrun", "the torchrun launch command for the layout; torchrun:F launches format F",
     &ExportTorchrun},
};

}  // namespace

absl::Span<const ExportFormat> ExportFormats() { return kExportFormats; }

const ExportFormat* FindExportFormat(absl::string_view name) {
  for (const ExportFormat& f : kExportFormats) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string ExportFormatList() {
  return absl::StrCat(
      absl::StrJoin(kExportFormats, ", ",
                    [](std::string* out, const ExportFormat& f) { absl::StrAppend(out, f.name); }),
      ", torchrun:F");
}

}  // namespace autoaccel
