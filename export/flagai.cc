// The flagai format: flagai_trainer.json, keyword arguments of FlagAI
// 1.8.4's flagai.trainer.Trainer (the script calls Trainer(**json, lr=...,
// weight_decay=..., epochs=...) with its own hyperparameters), and
// ds_config.json for its DeepSpeed env types. env_type:
//   pp > 1                                      rejected: the Trainer has no pipeline
//   tp > 1                                      deepspeed+mpu, model_parallel_size
//   sharding, offload, or precision not fp32    deepspeed (ds_config.json)
//   dp > 1                                      pytorchDDP
//   otherwise                                   pytorch: one process
// FlagAI has no bf16 flag (its fp16 flag halves the model): precision other
// than fp32 goes through DeepSpeed's config. The Trainer launches its ranks
// itself (flagai/launch.py), so the command is `python train.py` on the first
// node. What each key does is read from flagai 1.8.4's trainer.py, launch.py
// and optimizers.py.
#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {

FormatOutput ExportFlagAI(const FormatContext& c, FidelityBuilder& rows) {
  using OJson = nlohmann::ordered_json;
  const Strategy& s = c.s;
  FormatOutput out;
  const bool deepspeed = s.tensor_parallel > 1 || s.sharding != Sharding::kNone ||
                         s.offload == Offload::kCpu || s.precision != Precision::kFp32;
  std::string env_type = "pytorch";
  if (s.tensor_parallel > 1) {
    env_type = "deepspeed+mpu";
  } else if (deepspeed) {
    env_type = "deepspeed";
  } else if (s.data_parallel > 1) {
    env_type = "pytorchDDP";
  }

  OJson trainer;
  trainer["env_type"] = env_type;
  if (env_type == "pytorch") trainer["pytorch_device"] = "cuda";
  trainer["batch_size"] = s.micro_batch_size;
  trainer["gradient_accumulation_steps"] = s.grad_accum_steps;
  trainer["fp16"] = false;
  trainer["checkpoint_activations"] = s.checkpointing != Checkpointing::kNone;
  if (env_type != "pytorch") {
    trainer["model_parallel_size"] = s.tensor_parallel;
    trainer["num_nodes"] = c.nnodes;
    trainer["num_gpus"] = c.nproc_per_node;
    // launch_dist reads it even on one node (None raises "hostfile is not
    // valid"; a missing file means this node only).
    trainer["hostfile"] = FileRef(c, "hostfile");
    trainer["training_script"] = "train.py";
  }

  // Layout.
  const std::string hosts =
      c.nnodes > 1 ? "; over several nodes write hostfile, one 'host slots=G' line a node" : "";
  if (env_type == "pytorch") {
    rows.Exact(&Strategy::data_parallel, "env_type pytorch: one process on pytorch_device");
  } else if (env_type == "pytorchDDP") {
    rows.NotExpressible(
        &Strategy::data_parallel,
        absl::StrCat("env_type pytorchDDP with num_nodes x num_gpus ranks, which the Trainer "
                     "starts by running train.py again under torch.distributed.launch; since "
                     "torch 2.0 that passes --local-rank=N, which FlagAI 1.8.4's own parser "
                     "(--local_rank) refuses (exit 2): give Trainer extra_args=, an "
                     "argparse.ArgumentParser(add_help=False) with \"--local-rank\", "
                     "\"--local_rank\" (dest local_rank) and \"--not_call_launch\" "
                     "(store_true)",
                     hosts));
  } else {
    rows.Exact(&Strategy::data_parallel,
               absl::StrCat("num_nodes x num_gpus ranks, which the Trainer starts by running "
                            "train.py again under the deepspeed launcher; data-parallel size = "
                            "world size / model_parallel_size",
                            hosts));
  }
  if (s.tensor_parallel == 1) {
    rows.Exact(&Strategy::tensor_parallel);
  } else {
    rows.NotExpressible(
        &Strategy::tensor_parallel,
        absl::StrCat("env_type deepspeed+mpu with model_parallel_size ", s.tensor_parallel,
                     " makes flagai.mpu's groups (and feeds a model-parallel group the same "
                     "data), but only models built from flagai.mpu's parallel layers (FlagAI's "
                     "own GLM, ...) are split: a Hugging Face model trains whole on every "
                     "rank; split it in your code (ds_config.json gets no AutoTP section)"));
  }
  NoPipelineRows(s, rows, FidelityStatus::kRejected,
                 "the FlagAI Trainer has no pipeline parallelism (its DeepSpeed env types wrap "
                 "the model in a DeepSpeed engine, never a PipelineModule)");
  if (s.sequence_parallel) {
    rows.NotExpressible(&Strategy::sequence_parallel, "flagai.mpu has no sequence parallelism");
  } else {
    rows.Exact(&Strategy::sequence_parallel);
  }
  NoExpertParallelRows(s, rows, "FlagAI's Trainer has no expert parallelism");
  NoContextParallelRows(
      s, rows,
      "FlagAI's Trainer has no context parallelism: flagai.mpu splits weights over "
      "model-parallel ranks, never a sequence");
  rows.Exact(&Strategy::micro_batch_size,
             "batch_size: the DataLoader the Trainer builds over your dataset, per rank");

  // ZeRO, precision, offload and the optimizer: DeepSpeed's, or the plain
  // PyTorch loop's.
  if (deepspeed) {
    OJson ds =
        DeepSpeedConfigJson(c, rows, DeepSpeedOptimizerSource::kScriptBuildsIt,
                            "trainer.train(model, optimizer=optimizer, ...), which hands it to "
                            "deepspeed.initialize");
    ds.erase("tensor_parallel");  // AutoTP: see the tensor_parallel row
    out.files.emplace_back("ds_config.json", JsonFile(ds));
    trainer["deepspeed_config"] = FileRef(c, "ds_config.json");
    rows.Exact(&Strategy::grad_accum_steps,
               "gradient_accumulation_steps: the Trainer marks every Nth micro-batch a boundary "
               "and DeepSpeed steps there (ds_config.json has it too)");
  } else {
    rows.Exact(&Strategy::sharding,
               env_type == "pytorch" ? "one process" : "DistributedDataParallel");
    rows.Exact(&Strategy::offload);
    rows.Exact(&Strategy::precision, "fp16 false: the model stays fp32");
    rows.NotExpressible(
        &Strategy::optimizer,
        absl::StrCat(
            "the optimizer is your script's: build torch.optim.AdamW(model.parameters(), "
            "lr=..., betas=..., eps=..., weight_decay=..., ",
            s.optimizer == Optimizer::kFusedAdamW ? "fused=True" : "foreach=False",
            ") and call trainer.train(model, optimizer=optimizer, lr_scheduler=your scheduler, "
            "...). The Trainer's own (train() without one) is DeepSpeedCPUAdam(lr, "
            "weight_decay) with DeepSpeed's default betas (0.9, 0.999) and eps 1e-8, whatever "
            "optimizer_type says (get_optimizer(cpu_optimizer=True)); without lr_scheduler= it "
            "builds AnnealingLR (warm_up 0.1, cosine decay) from Trainer(lr=...) over any "
            "optimizer, so give the Trainer your lr and weight_decay too; and it clips "
            "gradients to clip_grad (default 1.0) after every micro-batch: pass yours"));
    rows.Approximated(&Strategy::grad_accum_steps,
                      "gradient_accumulation_steps: the loss is divided by N and the optimizer "
                      "steps every Nth micro-batch, but env_type pytorch / pytorchDDP never "
                      "zero the gradients after a step (flagai/trainer.py: zero_grad() only "
                      "under fp16), so every step adds to the last: register "
                      "optimizer.register_step_post_hook(lambda opt, *_: opt.zero_grad())");
  }

  if (s.checkpointing == Checkpointing::kNone) {
    rows.Exact(&Strategy::checkpointing);
  } else {
    rows.NotExpressible(
        &Strategy::checkpointing,
        absl::StrCat("checkpoint_activations true: the Trainer sets "
                     "model.config['checkpoint_activations'], which FlagAI's own models read "
                     "(every layer); a Hugging Face model's config takes no item assignment "
                     "(TypeError), so with one set it false and call "
                     "model.gradient_checkpointing_enable() (every layer)",
                     s.checkpointing == Checkpointing::kSelective
                         ? ": whole layers, not the attention core alone"
                         : ""));
  }
  AllLayersCheckpointRow(s, rows, "checkpoint_activations / gradient_checkpointing_enable()");
  AttentionAtLoadRow(s, rows, "FlagAI Trainer");

  out.files.insert(out.files.begin(), {"flagai_trainer.json", JsonFile(trainer)});
  out.entry = "train.py";
  // The Trainer starts the other ranks (and, through the hostfile, nodes).
  out.command = "python train.py";
  return out;
}

}  // namespace autoaccel
