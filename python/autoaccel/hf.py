"""A Hugging Face Trainer callback that reports each optimizer step of an
autoaccel launcher trial and stops training after warm-up + measured steps.

    trainer = Trainer(..., callbacks=[AutoaccelCallback()])

Imports transformers (only this module of the package does).
"""

from transformers import TrainerCallback

from autoaccel import trial as _trial

__all__ = ["AutoaccelCallback"]


class AutoaccelCallback(TrainerCallback):
    """Times each optimizer step (on_step_begin to on_step_end, synchronising
    the device), reports it with tokens = global batch x sequence length,
    samples = global batch, this rank's mean loss over the step's micro-batches
    and its peak memory, and sets `control.should_training_stop` once the
    trial's warm-up + measured steps are done.

    `trial`: default `autoaccel.trial.current()`. `seq_len`: used when the
    trial has none (standalone). The global batch is the trial's, else
    per_device_train_batch_size x gradient_accumulation_steps x world_size.
    The loss comes from a forward hook on the model reading `outputs.loss`
    (Hugging Face models given labels); a model without it reports none.
    Inactive (standalone) trials report nothing and stop nothing."""

    def __init__(self, trial=None, seq_len=None):
        self.trial = trial or _trial.current()
        self.seq_len = seq_len
        self._timer = None
        self._losses = []
        self._hook = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None and self._hook is None:
            self._hook = model.register_forward_hook(self._record_loss, with_kwargs=True)
        self.trial.report_ready()

    def on_train_end(self, args, state, control, **kwargs):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def on_step_begin(self, args, state, control, **kwargs):
        self._losses = []
        self._timer = _trial.StepTimer().__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        if self._timer is None:
            return
        self._timer.__exit__(None, None, None)
        seconds, self._timer = self._timer.seconds, None
        loss = None
        if self._losses:
            total = sum(float(x.float().item()) for x, _ in self._losses)
            loss = total / sum(float(n) for _, n in self._losses)
        global_batch = self.trial.global_batch_size or (
            args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size)
        seq_len = self.trial.seq_len or self.seq_len or 0
        self.trial.report_step(state.global_step, seconds, tokens=global_batch * seq_len,
                               samples=global_batch, loss=loss,
                               peak_memory_bytes=_trial.peak_memory_bytes())
        if self.trial.active and state.global_step >= self.trial.total_steps:
            control.should_training_stop = True

    def _record_loss(self, module, args, kwargs, outputs):
        # Each micro-batch's (loss x weight, weight). The Trainer passes
        # num_items_in_batch (the label tokens of the whole step, over every
        # micro-batch and rank) and the model returns sum / num_items; the
        # weight is then this micro-batch's label tokens (causal LM: labels
        # shifted by one, -100 ignored), so the report is this rank's mean
        # loss per token. Without it, each micro-batch's mean counts once.
        loss = getattr(outputs, "loss", None)
        if loss is None and isinstance(outputs, dict):
            loss = outputs.get("loss")
        if loss is None or not hasattr(loss, "detach") or loss.numel() != 1:
            return
        num_items = kwargs.get("num_items_in_batch")
        labels = kwargs.get("labels")
        if num_items is not None and labels is not None and hasattr(labels, "ne"):
            tokens = labels[..., 1:].ne(-100).sum()
            self._losses.append((loss.detach() * num_items, tokens))
        else:
            self._losses.append((loss.detach(), 1))
