// The flags that describe a model, one definition for every command that
// takes one (tune, estimate, export): --model, --model-config, --override,
// --override-new and, where the command can run one, torchscript's
// --model-file and --input-spec; read into a v1::ModelSpec. Not
// thread-safe (flags are parsed once, on the main thread).
#ifndef AUTOACCEL_CLIENT_MODEL_FLAGS_H_
#define AUTOACCEL_CLIENT_MODEL_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

struct ModelFlags {
  std::string family;
  std::string config_file;
  std::string model_file;  // torchscript
  std::string input_spec;  // torchscript
  std::vector<std::string> overrides, new_overrides;
  bool takes_torchscript = false;  // set by Add

  struct Use {
    // The command runs a torchscript module (tune): --model-file and
    // --input-spec, and "torchscript" among the families.
    bool torchscript = false;
    // What the family's help adds, e.g. " (optional with --launcher)".
    std::string family_note;
    // Put before every flag's help, e.g. "with --strategy: ".
    std::string when;
  };
  // Adds the flags to `cmd`, bound to this struct.
  void Add(CLI::App* cmd, const Use& use);

  // The model the flags name, its files read in (at most 64 MiB of config,
  // proto/convert.h's bound for a model file). With no --model: nothing
  // when `optional` and no other model flag was given; otherwise
  // INVALID_ARGUMENT "--model FAMILY is required[ with --model-config]".
  // INVALID_ARGUMENT naming the flag for a missing --model-config (every
  // family but torchscript), torchscript's missing --model-file or
  // --input-spec, and a file that cannot be read (client/flag_file.h).
  absl::Status Fill(v1::ModelSpec* model, bool optional) const;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_MODEL_FLAGS_H_
