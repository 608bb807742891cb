// The megatron format: Megatron-LM's training flags (pretrain_gpt.py),
// one per line in megatron_args.txt, and the strategy's fidelity rows. The
// model's flags and the architecture section are megatron_model.cc's.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/formats.h"

namespace autoaccel {

FormatOutput ExportMegatron(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  std::vector<std::string> a;
  // "--flag=value": one argument per line, none with a space, so that
  // `$(cat megatron_args.txt)` and a launcher's {*megatron_args} (one
  // argument per line) read the same.
  auto flag = [&a](absl::string_view name, auto value) {
    a.push_back(absl::StrCat(name, "=", value));
  };
  flag("--tensor-model-parallel-size", s.tensor_parallel);
  flag("--pipeline-model-parallel-size", s.pipeline_parallel);
  rows.Exact(&Strategy::data_parallel, s.context_parallel > 1
                                           ? "world size / (tensor * pipeline * context)"
                                           : "world size / (tensor * pipeline)");
  rows.Exact(&Strategy::tensor_parallel, "--tensor-model-parallel-size");
  rows.Exact(&Strategy::pipeline_parallel, "--pipeline-model-parallel-size");
  if (s.pipeline_parallel == 1) {
    rows.Exact(&Strategy::pipeline_schedule, "no pipeline");
    rows.Exact(&Strategy::virtual_stages, "no pipeline");
  } else if (s.pipeline_schedule == PipelineSchedule::k1F1B) {
    rows.Exact(&Strategy::pipeline_schedule, "Megatron's 1F1B");
    rows.Exact(&Strategy::virtual_stages);
  } else {
    flag("--num-virtual-stages-per-pipeline-rank", s.virtual_stages);
    rows.Exact(&Strategy::pipeline_schedule, "interleaved 1F1B");
    rows.Exact(&Strategy::virtual_stages, "--num-virtual-stages-per-pipeline-rank");
  }
  if (s.sequence_parallel) {
    a.push_back("--sequence-parallel");
    rows.Exact(&Strategy::sequence_parallel, "--sequence-parallel");
  } else {
    rows.Exact(&Strategy::sequence_parallel);
  }
  // Context parallelism: get_batch_on_this_cp_rank gives rank c chunks c and
  // 2*cp-1-c, as ours; Transformer Engine's attention exchanges K/V
  // (TransformerConfig.cp_comm_type: "p2p", "all_gather", ...).
  const bool cp = s.context_parallel > 1;
  if (cp) {
    flag("--context-parallel-size", s.context_parallel);
    if (s.context_parallel_comm == ContextParallelComm::kP2p) {
      flag("--cp-comm-type", "p2p");
      rows.Exact(&Strategy::context_parallel_comm,
                 "--cp-comm-type p2p: a ring of point-to-point K/V passes overlapped with "
                 "attention");
    } else {
      flag("--cp-comm-type", "all_gather");
      rows.Exact(&Strategy::context_parallel_comm,
                 "--cp-comm-type all_gather: the whole sequence's K/V all-gathered, then "
                 "attention");
    }
  } else {
    rows.Exact(&Strategy::context_parallel);
    rows.Exact(&Strategy::context_parallel_comm);
  }
  // Expert parallelism: Megatron's expert layout is ours (expert
  // tensor-parallel size = tensor-parallel size by default; expert ranks
  // consecutive among the data- and context-parallel ranks), dropless.
  if (s.expert_parallel > 1) {
    flag("--expert-model-parallel-size", s.expert_parallel);
    flag("--moe-token-dispatcher-type", "alltoall");
    rows.Exact(&Strategy::expert_parallel,
               "--expert-model-parallel-size --moe-token-dispatcher-type alltoall: each expert on "
               "one of ep data-parallel ranks, tokens dispatched and combined all-to-all; experts "
               "split over the tensor-parallel ranks as ours (Megatron's default "
               "--expert-tensor-parallel-size)");
    if (s.tensor_parallel > 1 && !s.sequence_parallel) {
      rows.Rejected(&Strategy::expert_parallel,
                    "Megatron needs sequence parallelism to train with expert and tensor "
                    "parallelism together (ModelParallelConfig says it must be used); use "
                    "sequence_parallel on");
    } else if (c.in.model && !c.in.model->Info().experts) {
      rows.Rejected(&Strategy::expert_parallel,
                    absl::StrCat("the ", c.in.model->family, " model has no experts to spread"));
    }
  } else {
    rows.Exact(&Strategy::expert_parallel);
  }
  switch (s.sharding) {
    case Sharding::kNone:
      rows.Exact(&Strategy::sharding, "DDP");
      break;
    case Sharding::kZero1:
      a.push_back("--use-distributed-optimizer");
      rows.Exact(&Strategy::sharding,
                 "--use-distributed-optimizer: optimizer state and fp32 masters sharded");
      break;
    case Sharding::kZero2:
      a.push_back("--use-distributed-optimizer");
      rows.Approximated(&Strategy::sharding,
                        "--use-distributed-optimizer reduce-scatters gradients but keeps the "
                        "full gradient buffer on every rank (ZeRO-1 memory for gradients)");
      break;
    case Sharding::kFsdp:
      // validate_args refuses FSDP2 with the fused weight-gradient
      // accumulation that is on by default.
      a.push_back("--use-torch-fsdp2");
      a.push_back("--no-gradient-accumulation-fusion");
      rows.Exact(
          &Strategy::sharding,
          "--use-torch-fsdp2 --no-gradient-accumulation-fusion: parameters sharded too; "
          "Megatron's FSDP2 needs untied embeddings (--untie-embeddings-and-output-weights)");
      break;
  }
  flag("--micro-batch-size", s.micro_batch_size);
  flag("--global-batch-size", c.in.global_batch_size);
  rows.Exact(&Strategy::micro_batch_size, "--micro-batch-size");
  rows.Exact(&Strategy::grad_accum_steps,
             "--global-batch-size / (micro batch * data parallel) micro-batches per step");

  switch (s.precision) {
    case Precision::kFp32:
      rows.Exact(&Strategy::precision);
      break;
    case Precision::kBf16:
      a.push_back("--bf16");
      rows.Approximated(&Strategy::precision,
                        "--bf16 keeps bf16 weights with fp32 masters in the optimizer (our "
                        "pure_bf16); Megatron has no fp32-weights-with-autocast mode");
      break;
    case Precision::kPureBf16:
      a.push_back("--bf16");
      rows.Exact(&Strategy::precision, "--bf16: bf16 weights, fp32 masters in the optimizer");
      break;
    case Precision::kFp8:
      a.push_back("--bf16");
      flag("--fp8-format", "hybrid");
      flag("--fp8-recipe", "tensorwise");
      rows.Exact(&Strategy::precision,
                 "--bf16 --fp8-format hybrid --fp8-recipe tensorwise: Transformer Engine computes "
                 "the transformer layers' linear layers in fp8, e4m3 inputs and weights and e5m2 "
                 "gradients, each scaled by its current absolute maximum; the output layer, "
                 "attention core and router in bf16; bf16 weights with fp32 masters (needs "
                 "--transformer-impl transformer_engine, the default)");
      break;
    case Precision::kFp16:
      a.push_back("--fp16");
      // Dynamic scaling (no --loss-scale) with our scaler's settings.
      flag("--initial-loss-scale", 65536);
      flag("--loss-scale-window", 2000);
      flag("--hysteresis", 1);
      flag("--min-loss-scale", 1);
      rows.Approximated(&Strategy::precision,
                        "--fp16 keeps fp16 weights with fp32 masters, where ours autocasts fp32 "
                        "weights; the dynamic loss scaler matches ours (start 2^16, halve on "
                        "overflow, double after 2000 clean steps) except its floor of 1");
      break;
  }

  // Checkpointing. Megatron's selective recompute is the core attention,
  // as ours; block recompute of N layers takes the first N of each stage.
  const int layers = c.in.model ? c.in.model->n_layer : 0;
  if (s.checkpointing == Checkpointing::kNone) {
    rows.Exact(&Strategy::checkpointing);
    rows.Exact(&Strategy::checkpoint_percent);
  } else if (s.checkpointing == Checkpointing::kSelective) {
    flag("--recompute-granularity", "selective");
    rows.Exact(&Strategy::checkpointing,
               "--recompute-granularity selective: the core attention is recomputed");
    AllLayersCheckpointRow(s, rows, "selective recompute");
  } else {
    flag("--recompute-granularity", "full");
    if (s.checkpoint_percent == 100) {
      flag("--recompute-method", "uniform");
      flag("--recompute-num-layers", 1);
      rows.Exact(&Strategy::checkpointing, "--recompute-granularity full");
      rows.Exact(&Strategy::checkpoint_percent, "--recompute-method uniform, every layer");
    } else if (layers > 0) {
      const int chunks = s.pipeline_parallel * s.virtual_stages;
      const int per_chunk = std::max(1, layers / chunks);
      const int total = (layers * s.checkpoint_percent + 99) / 100;
      const int n = std::max(1, std::min(per_chunk, (total + chunks - 1) / chunks));
      flag("--recompute-method", "block");
      flag("--recompute-num-layers", n);
      rows.Exact(&Strategy::checkpointing, "--recompute-granularity full");
      if (chunks == 1) {
        rows.Exact(&Strategy::checkpoint_percent,
                   absl::StrCat("--recompute-method block --recompute-num-layers ", n,
                                ": the first ", n, " of ", layers, " layers"));
      } else {
        rows.Approximated(&Strategy::checkpoint_percent,
                          absl::StrCat("--recompute-num-layers ", n, " recomputes the first ", n,
                                       " layers of each of the ", chunks,
                                       " pipeline chunks, not the model's first ", total));
      }
    } else {
      flag("--recompute-method", "uniform");
      flag("--recompute-num-layers", 1);
      rows.Exact(&Strategy::checkpointing, "--recompute-granularity full");
      rows.Approximated(&Strategy::checkpoint_percent,
                        "every layer: give --model and --model-config so the export knows the "
                        "number of layers for --recompute-method block --recompute-num-layers");
    }
  }
  if (s.attention == Attention::kSdpa) {
    flag("--attention-backend", "flash");
    rows.Approximated(&Strategy::attention,
                      "--attention-backend flash: Transformer Engine's flash attention, the "
                      "same fused algorithm as torch SDPA's flash kernel");
  } else if (cp) {
    // Transformer Engine disables its unfused attention under context parallelism.
    flag("--attention-backend", "flash");
    rows.Approximated(&Strategy::attention,
                      "--attention-backend flash: Transformer Engine's context parallelism "
                      "runs its flash and fused kernels only, not the unfused attention; flash "
                      "computes the same attention fused");
  } else {
    flag("--attention-backend", "unfused");
    rows.Exact(&Strategy::attention, "--attention-backend unfused: attention spelled out");
  }
  flag("--optimizer", "adam");
  if (s.optimizer == Optimizer::kFusedAdamW) {
    rows.Exact(&Strategy::optimizer,
               "--optimizer adam: AdamW (decoupled weight decay) with a fused multi-tensor "
               "kernel");
  } else {
    rows.Approximated(&Strategy::optimizer,
                      "Megatron has no unfused AdamW: --optimizer adam runs a fused kernel");
  }
  if (s.offload == Offload::kCpu) {
    a.push_back("--optimizer-cpu-offload");
    a.push_back("--use-precision-aware-optimizer");
    if (s.sharding == Sharding::kNone) a.push_back("--use-distributed-optimizer");
    rows.Approximated(
        &Strategy::offload,
        s.sharding == Sharding::kFsdp
            ? "--optimizer-cpu-offload --use-precision-aware-optimizer: the optimizer "
              "steps on the host in Megatron's HybridDeviceOptimizer, here without "
              "the distributed optimizer, which --use-torch-fsdp2 refuses"
            : "--optimizer-cpu-offload (with the distributed optimizer): the "
              "optimizer steps on the host in Megatron's HybridDeviceOptimizer");
  } else {
    rows.Exact(&Strategy::offload);
  }

  // What validate_args refuses with --use-torch-fsdp2.
  if (s.sharding == Sharding::kFsdp) {
    if (s.pipeline_parallel > 1) {
      rows.Rejected(&Strategy::sharding,
                    "Megatron's --use-torch-fsdp2 refuses pipeline parallelism");
    }
    if (s.precision == Precision::kFp16) {
      rows.Rejected(&Strategy::precision, "Megatron's --use-torch-fsdp2 has no fp16");
    }
    const ModelSpec* m = c.in.model ? &*c.in.model : nullptr;
    if (m != nullptr && (!m->IsDecoder() || m->tie_word_embeddings)) {
      rows.Rejected(&Strategy::sharding,
                    "Megatron's --use-torch-fsdp2 needs --untie-embeddings-and-output-weights, "
                    "and this model's output layer is its token embedding");
    }
  }
  // Megatron's tensor and context parallelism (before Blackwell, without
  // FSDP) need one CUDA connection, so that communication is ordered with
  // compute.
  const bool one_connection = (s.tensor_parallel > 1 || cp) && s.sharding != Sharding::kFsdp;
  const std::string connections =
      ", with CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment (the command sets it; Megatron "
      "refuses to start without it before Blackwell)";
  if (one_connection) out.environment = "CUDA_DEVICE_MAX_CONNECTIONS=1 ";
  if (one_connection && s.tensor_parallel > 1) {
    rows.Exact(&Strategy::tensor_parallel,
               absl::StrCat("--tensor-model-parallel-size", connections));
  }
  if (cp) {
    rows.Exact(&Strategy::context_parallel,
               absl::StrCat("--context-parallel-size: rank c holds sequence chunks c and "
                            "2*cp-1-c (get_batch_on_this_cp_rank)",
                            one_connection ? connections : ""));
    if (s.precision == Precision::kFp32) {
      rows.Rejected(&Strategy::context_parallel,
                    "Transformer Engine's context-parallel attention runs only its flash and "
                    "fused kernels, which take fp16/bf16, not fp32");
    } else if (c.in.model && !c.in.model->IsCausal()) {
      rows.Rejected(&Strategy::context_parallel,
                    "pretrain_bert.py does not split its batch over the context-parallel ranks "
                    "(only pretrain_gpt.py calls get_batch_on_this_cp_rank)");
    }
  }
  flag("--seq-length", c.in.seq_len);
  std::string script = "pretrain_gpt.py";
  if (c.in.model) {
    script = MegatronModelFlags(c, a, out.architecture);
    // Megatron splits heads, query groups and the MLP over the tensor-parallel ranks.
    const ModelSpec& m = *c.in.model;
    const int tp = s.tensor_parallel;
    std::vector<std::string> indivisible;
    if (m.n_head % tp != 0) indivisible.push_back(absl::StrCat(m.n_head, " attention heads"));
    const int groups = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
    if (groups != m.n_head && groups % tp != 0) {
      indivisible.push_back(absl::StrCat(groups, " query groups"));
    }
    if (m.n_inner % tp != 0) indivisible.push_back(absl::StrCat("an MLP width of ", m.n_inner));
    if (!indivisible.empty()) {
      rows.Rejected(&Strategy::tensor_parallel,
                    absl::StrCat("Megatron splits attention heads, query groups and the MLP over "
                                 "the tensor-parallel ranks: ",
                                 tp, " does not divide ", absl::StrJoin(indivisible, " or ")));
    }
  }
  out.files.emplace_back("megatron_args.txt", absl::StrCat(absl::StrJoin(a, "\n"), "\n"));
  out.entry = absl::StrCat(script, " $(cat ", FileRef(c, "megatron_args.txt"), ")");
  out.command = absl::StrCat(out.environment, TorchrunCommand(c, out.entry));
  return out;
}

}  // namespace autoaccel
