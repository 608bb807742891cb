"""An ordinary FlagAI training script, as a user of the flagai export runs it:
    python flagai_train.py ARGS
It builds flagai.trainer.Trainer from the exported flagai_trainer.json, with
its own learning rate, weight decay and epochs as Trainer arguments, and
trains its own model with its own optimizer (AdamW with its betas and eps)
and scheduler, which it hands to trainer.train(). What the fidelity notes
leave to the script comes as arguments: the optimizer's implementation,
gradient checkpointing on the Hugging Face model (whose config takes no
checkpoint_activations), zeroing the gradients after each step (FlagAI's
plain loop does not), and the device. Reports what the run applied
(probe.py)."""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import (Probe, TokenData, add_user_arguments, shut_down, tiny_model,  # noqa: E402
                   user_optimizer)

import torch  # noqa: E402
from flagai.trainer import Trainer  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    add_user_arguments(p)
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--zero-grad-after-step", action="store_true")
    p.add_argument("--device", help="overrides the export's pytorch_device")
    args = p.parse_args()

    with open("flagai_trainer.json") as f:
        trainer_kwargs = json.load(f)
    if args.device:
        trainer_kwargs["pytorch_device"] = args.device
    model = tiny_model(os.environ["AUTOACCEL_TEST_MODEL_DIR"],
                       os.environ.get("AUTOACCEL_TEST_MODEL_KWARGS"))
    if args.gradient_checkpointing:
        trainer_kwargs["checkpoint_activations"] = False
        model.gradient_checkpointing_enable()
    probe = Probe()
    probe.watch(model)

    trainer = Trainer(**trainer_kwargs, lr=args.lr, weight_decay=args.weight_decay, epochs=1,
                      log_interval=1, save_dir=None, tensorboard_dir="tensorboard")

    # Whether every optimizer step starts from zero gradients: read at the
    # first micro-batch of each step (the probe's hook has counted it).
    accumulation = trainer.gradient_accumulation_steps
    grads_cleared = []

    def first_micro_batch(module, inputs):
        if (probe.forwards - 1) % accumulation == 0:
            grads_cleared.append(all(p.grad is None or not p.grad.any()
                                     for p in model.parameters()))

    model.get_input_embeddings().register_forward_pre_hook(first_micro_batch)

    optimizer = user_optimizer(model.parameters(), args)
    if args.zero_grad_after_step:
        optimizer.register_step_post_hook(lambda opt, *_: opt.zero_grad())
    scheduler = torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0, total_iters=0)
    probe.count_steps(optimizer)

    # One epoch of max_steps optimizer steps.
    samples = args.max_steps * trainer.batch_size * accumulation
    trainer.train(model, optimizer=optimizer, lr_scheduler=scheduler,
                  train_dataset=TokenData(model.config.vocab_size, 16, n=samples))
    probe.report(optimizer, probe.optimizer_steps, env_type=trainer.env_type,
                 trainer_batch_size=trainer.batch_size,
                 trainer_accumulation=trainer.gradient_accumulation_steps,
                 grads_cleared=grads_cleared)
    shut_down()


if __name__ == "__main__":
    main()
