"""An ordinary Hugging Face Trainer script, as a user of the hf-trainer export
runs it:
    torchrun ... hf_trainer.py $(cat training_args.txt) --learning_rate ... --output_dir ...
It loads the model with the export's from_pretrained_kwargs.json and reports
what the run applied (probe.py)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import Probe, TokenData, shut_down, tiny_model  # noqa: E402

from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from transformers import HfArgumentParser, Trainer, TrainerCallback, TrainingArguments  # noqa: E402


def scheduler_name(scheduler):
    """The class of the scheduler under the framework's wrappers."""
    while getattr(scheduler, "scheduler", None) is not None:
        scheduler = scheduler.scheduler
    return type(scheduler).__name__ if scheduler is not None else None


class Report(TrainerCallback):
    def __init__(self, probe):
        self.probe = probe

    def on_train_end(self, args, state, control, model=None, optimizer=None, lr_scheduler=None,
                     **kwargs):
        trainer = self.trainer
        engine = trainer.model_wrapped if trainer.is_deepspeed_enabled else None
        extra = {
            "scheduler": scheduler_name(lr_scheduler),
            "args_micro_batch": args.per_device_train_batch_size,
            "args_accumulation": args.gradient_accumulation_steps,
            "deepspeed": engine is not None,
            "fsdp": bool(trainer.is_fsdp_enabled),
            "ddp": isinstance(trainer.model_wrapped, DistributedDataParallel),
        }
        if engine is not None:
            extra.update(zero_stage=engine.zero_optimization_stage(),
                         ds_micro_batch=engine.train_micro_batch_size_per_gpu(),
                         ds_accumulation=engine.gradient_accumulation_steps(),
                         ds_bf16=engine.bfloat16_enabled(), ds_fp16=engine.fp16_enabled(),
                         ds_gradient_clipping=engine.gradient_clipping(),
                         optimizer_wrapper=type(engine.optimizer).__name__)
        self.probe.report(optimizer, state.global_step, **extra)


def main():
    model_dir = os.environ["AUTOACCEL_TEST_MODEL_DIR"]
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(sys.argv[1:])
    model = tiny_model(model_dir, os.environ.get("AUTOACCEL_TEST_MODEL_KWARGS"))
    probe = Probe()
    probe.watch(model)
    report = Report(probe)
    trainer = Trainer(model=model, args=args,
                      train_dataset=TokenData(model.config.vocab_size, 16),
                      callbacks=[report])
    report.trainer = trainer
    trainer.train()


if __name__ == "__main__":
    main()
    shut_down()  # after main() has let go of the model, engine and optimizer
