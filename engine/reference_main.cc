// autoaccel-reference --model FAMILY --config CONFIG.json --weights W.safetensors
//                     --batch BATCH.safetensors --out OUT.safetensors
//                     [--attention math|sdpa] [--checkpointing none|selective|full]
//
// The engine's side of the reference tests (tests/reference/): builds the
// FAMILY network from a Hugging Face config.json, loads its weights by name,
// and for the batch's "input" and "target" ([B, T] int64; target -100 where
// there is nothing to predict) writes, in fp32, to OUT:
//   "logits"        [B, T, vocab]  Forward(input)
//   "loss"          []             Loss(input, target)
//   "grad.NAME"     d loss / d NAME for every parameter (one backward pass)
// and metadata "parameter_count" (ModelSpec::ParameterCount()) and
// "parameter_numel" (the built module's parameters, counted).
// --attention, --checkpointing and --out may be comma-separated lists of as
// many entries: one run per entry, each written to its OUT.
// Exit status 0 on success, 1 on any error (said on stderr), 2 for bad
// arguments.
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/build_model.h"
#include "engine/model.h"
#include "engine/weights.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {
namespace {

constexpr char kUsage[] =
    "usage: autoaccel-reference --model FAMILY --config CONFIG.json --weights W.safetensors\n"
    "                           --batch BATCH.safetensors --out OUT.safetensors\n"
    "                           [--attention math|sdpa] [--checkpointing none|selective|full]\n";

struct Args {
  std::map<std::string, std::string> values{{"--attention", "math"}, {"--checkpointing", "none"}};
};

bool ParseArgs(int argc, char** argv, Args* args, std::string* error) {
  const char* known[] = {"--model", "--config",    "--weights",      "--batch",
                         "--out",   "--attention", "--checkpointing"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = arg + " needs a value";
      return false;
    }
    if (std::find(std::begin(known), std::end(known), arg) == std::end(known)) {
      *error = "unknown argument '" + arg + "'";
      return false;
    }
    args->values[arg] = value;
  }
  for (const char* required : {"--model", "--config", "--weights", "--batch", "--out"}) {
    if (args->values.count(required) == 0) {
      *error = std::string(required) + " is required";
      return false;
    }
  }
  return true;
}

absl::StatusOr<torch::Tensor> Find(const NamedTensors& tensors, const std::string& name,
                                   const std::string& path) {
  for (const auto& [key, value] : tensors) {
    if (key == name) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": no tensor '", name, "'"));
}

absl::Status Run(const Args& args) {
  const auto& v = args.values;
  std::ifstream in(v.at("--config"));
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", v.at("--config")));
  const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSIGN_OR_RETURN(ModelSpec spec, ParseModelConfig(v.at("--model"), config));
  // One run per entry of the comma-separated lists (one process for all of
  // a case's runs: loading LibTorch costs more than the tiny model).
  const std::vector<std::string> attentions = absl::StrSplit(v.at("--attention"), ',');
  const std::vector<std::string> checkpointings = absl::StrSplit(v.at("--checkpointing"), ',');
  const std::vector<std::string> outs = absl::StrSplit(v.at("--out"), ',');
  if (attentions.size() != outs.size() || checkpointings.size() != outs.size()) {
    return absl::InvalidArgumentError(
        "--attention, --checkpointing and --out need as many comma-separated entries");
  }

  ASSIGN_OR_RETURN(std::shared_ptr<TrainableModel> model, BuildModel(spec, /*seed=*/0));
  RETURN_IF_ERROR(LoadWeights(*model, v.at("--weights")));
  ASSIGN_OR_RETURN(NamedTensors batch, ReadSafetensors(v.at("--batch")));
  ASSIGN_OR_RETURN(torch::Tensor input, Find(batch, "input", v.at("--batch")));
  ASSIGN_OR_RETURN(torch::Tensor target, Find(batch, "target", v.at("--batch")));
  input = input.to(torch::kLong);
  target = target.to(torch::kLong);

  for (size_t run = 0; run < outs.size(); ++run) {
    RunOptions options;
    ASSIGN_OR_RETURN(options.attention, ParseAttention(attentions[run]));
    ASSIGN_OR_RETURN(options.checkpointing, ParseCheckpointing(checkpointings[run]));
    NamedTensors out;
    {
      torch::NoGradGuard no_grad;
      out.emplace_back("logits", model->Forward(input, options).to(torch::kFloat));
    }
    model->zero_grad();
    const torch::Tensor loss = model->Loss(input, target, options);
    loss.backward();
    out.emplace_back("loss", loss.detach().to(torch::kFloat));
    int64_t numel = 0;
    for (const auto& item : model->named_parameters()) {
      numel += item.value().numel();
      const torch::Tensor& grad = item.value().grad();
      if (!grad.defined()) {
        return absl::InternalError(absl::StrCat("no gradient for ", item.key()));
      }
      out.emplace_back("grad." + item.key(), grad.to(torch::kFloat));
    }
    RETURN_IF_ERROR(WriteSafetensors(outs[run], out,
                                     {{"parameter_count", std::to_string(spec.ParameterCount())},
                                      {"parameter_numel", std::to_string(numel)}}));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace autoaccel

int main(int argc, char** argv) {
  autoaccel::Args args;
  std::string error;
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(autoaccel::kUsage, stdout);
    return 0;
  }
  if (!autoaccel::ParseArgs(argc, argv, &args, &error)) {
    std::fprintf(stderr, "autoaccel-reference: %s\n%s", error.c_str(), autoaccel::kUsage);
    return 2;
  }
  at::set_num_threads(2);
  absl::Status status;
  try {
    status = autoaccel::Run(args);
  } catch (const c10::Error& e) {
    status = absl::InternalError(e.what_without_backtrace());
  } catch (const std::exception& e) {
    status = absl::InternalError(e.what());
  }
  if (!status.ok()) {
    std::fprintf(stderr, "autoaccel-reference: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
