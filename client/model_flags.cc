#include "client/model_flags.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/flag_file.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "spec/model_spec.h"

namespace autoaccel {
namespace {

constexpr int64_t kMaxConfigBytes = int64_t{64} << 20;

}  // namespace

void ModelFlags::Add(CLI::App* cmd, const Use& use) {
  takes_torchscript = use.torchscript;
  // The family table's names; torchscript is named by use.torchscript.
  std::vector<std::string> families;
  for (const std::string& name : KnownModelFamilies()) {
    if (name != "torchscript") families.push_back(name);
  }
  cmd->add_option(
      "--model", family,
      absl::StrCat(use.when, "model family: ", absl::StrJoin(families, ", "), " (docs/MODELS.md)",
                   use.torchscript ? ", or torchscript" : "", use.family_note));
  cmd->add_option("--model-config", config_file,
                  absl::StrCat(use.when, "Hugging Face style config.json",
                               use.torchscript ? " (every family but torchscript)" : ""));
  cmd->add_option("--override", overrides,
                  absl::StrCat(use.when,
                               "KEY=VALUE change to a key the config has (repeatable; dotted keys "
                               "reach nested ones), e.g. --override num_hidden_layers=2"));
  cmd->add_option("--override-new", new_overrides,
                  absl::StrCat(use.when,
                               "KEY=VALUE adding a key the config does not have (repeatable; "
                               "applied after --override)"));
  if (!use.torchscript) return;
  cmd->add_option("--model-file", model_file,
                  "torchscript: torch.jit.save file of a module whose forward returns the loss");
  cmd->add_option("--input-spec", input_spec,
                  "torchscript: the forward's inputs, e.g. "
                  "\"input_ids:int64[B,T]<50257; labels=input_ids\" (docs/CLI.md)");
}

absl::Status ModelFlags::Fill(v1::ModelSpec* model, bool optional) const {
  if (family.empty()) {
    const bool described = !config_file.empty() || !overrides.empty() || !new_overrides.empty();
    if (optional && !described) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("--model FAMILY is required", described ? " with --model-config" : ""));
  }
  model->set_family(family);
  for (const std::string& o : overrides) model->add_overrides(o);
  for (const std::string& o : new_overrides) model->add_new_overrides(o);
  if (family == "torchscript") {
    if (!takes_torchscript) {
      return absl::InvalidArgumentError(
          "--model torchscript: this command takes a model its config describes (`tune` takes "
          "a TorchScript module)");
    }
    if (model_file.empty() || input_spec.empty()) {
      return absl::InvalidArgumentError(
          "--model torchscript needs --model-file FILE.pt and --input-spec SPEC");
    }
    ASSIGN_OR_RETURN(*model->mutable_script(),
                     ReadFlagFile("--model-file", model_file, kMaxModelFileBytes));
    model->set_input_spec(input_spec);
    return absl::OkStatus();
  }
  if (config_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", family, " needs --model-config FILE"));
  }
  ASSIGN_OR_RETURN(*model->mutable_config_json(),
                   ReadFlagFile("--model-config", config_file, kMaxConfigBytes));
  return absl::OkStatus();
}

}  // namespace autoaccel
