"""An ordinary LightningCLI script, as a user of the lightning export runs it:
    python lightning_train.py --config lightning.json ARGS
Its LightningModule builds the optimizer the fidelity notes name in
configure_optimizers, with the user's hyperparameters, and enables gradient
checkpointing in configure_model when asked; the DataModule's batch_size comes
from the export. It reports what the run applied (probe.py)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import Probe, TokenData, tiny_model  # noqa: E402

import lightning as L  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.cli import LightningCLI  # noqa: E402


class TinyCausalLM(L.LightningModule):
    def __init__(self, lr: float, weight_decay: float, betas: tuple[float, float], eps: float,
                 optimizer: str = "foreach_false", gradient_checkpointing: bool = False):
        super().__init__()
        self.save_hyperparameters()
        self.net = tiny_model(os.environ["AUTOACCEL_TEST_MODEL_DIR"],
                              os.environ.get("AUTOACCEL_TEST_MODEL_KWARGS"))
        if gradient_checkpointing:
            self.net.gradient_checkpointing_enable()
        self.probe = Probe()
        self.probe.watch(self.net)

    def training_step(self, batch, _):
        return self.net(**batch).loss

    def configure_optimizers(self):
        h = self.hparams
        implementation = {"fused": True} if h.optimizer == "fused" else {"foreach": False}
        return torch.optim.AdamW(self.parameters(), lr=h.lr, weight_decay=h.weight_decay,
                                 betas=tuple(h.betas), eps=h.eps, **implementation)

    def on_train_end(self):
        trainer = self.trainer
        self.probe.report(
            self.optimizers().optimizer, trainer.global_step, rank=trainer.global_rank,
            world_size=trainer.world_size,
            strategy=type(trainer.strategy).__name__,
            precision=trainer.precision, accumulate_grad_batches=trainer.accumulate_grad_batches,
            ddp=isinstance(trainer.strategy.model, torch.nn.parallel.DistributedDataParallel))


class TokenDataModule(L.LightningDataModule):
    def __init__(self, batch_size: int):
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self):
        with open(os.path.join(os.environ["AUTOACCEL_TEST_MODEL_DIR"], "config.json")) as f:
            vocab_size = json.load(f)["vocab_size"]
        return torch.utils.data.DataLoader(TokenData(vocab_size, 16), batch_size=self.batch_size)


if __name__ == "__main__":
    LightningCLI(TinyCausalLM, TokenDataModule, save_config_callback=None)
