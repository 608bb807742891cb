"""Writes the TorchScript models that tests/scripted_model_test.cc loads.

Usage: make_models.py OUT_DIR

  tiny_lm.pt       forward(input_ids, labels) -> scalar loss: embedding, one
                   causal self-attention + MLP block, logits, next-token
                   cross-entropy (the shape of a user's own causal LM)
  dict_loss.pt     forward(x, y, scale: float = 1.0) -> {"loss": scalar, "logits": ...}
  tuple_loss.pt    forward(input_ids, labels) -> (loss, logits), the tiny LM's
  bad_return.pt    forward(input_ids) -> the logits, not a scalar (an error)
  frozen.pt        forward(x) -> scalar, but no parameter requires grad
  reads_outside.pt   forward(input_ids, labels) -> a loss of 0 plus the sum of
                     the 64 bytes of OUT_DIR/outside/secret.bin, read with
                     torch.from_file: what a model could steal from the host
  writes_outside.pt  forward(input_ids, labels): fills OUT_DIR/outside/victim.bin
                     with 64 bytes 'X' through torch.from_file(shared=True)
                     (the file mapped read-write); loss 0
                     (tests/sandbox_model_test.cc: the trial sandbox stops both)

Random weights from a fixed seed; nothing is downloaded.
"""
import os
import sys
import warnings
from typing import Dict

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 64
D_MODEL = 32
N_HEAD = 4
MAX_T = 32


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n_head = N_HEAD  # TorchScript reads module attributes, not globals
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.fc = nn.Linear(D_MODEL, 4 * D_MODEL)
        self.out = nn.Linear(4 * D_MODEL, D_MODEL)
        # An integer buffer: casting the model to bf16 must leave it alone.
        self.register_buffer("causal", torch.tril(torch.ones(MAX_T, MAX_T, dtype=torch.long)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / float(d // self.n_head) ** 0.5
        scores = scores.masked_fill(self.causal[:t, :t] == 0, float("-inf"))
        att = torch.matmul(scores.float().softmax(dim=-1).to(v.dtype), v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vocab = VOCAB
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.randn(MAX_T, D_MODEL) * 0.02)
        self.block = Block()
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.size(1)
        x = self.embed(input_ids) + self.pos[:t]
        return self.head(self.ln_f(self.block(x)))

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.logits(input_ids)
        # Predict token i + 1 from tokens 0..i; the loss in fp32 as HF does.
        return F.cross_entropy(logits[:, :-1].reshape(-1, self.vocab).float(),
                               labels[:, 1:].reshape(-1))


class TupleLM(TinyLM):
    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor):  # type: ignore[override]
        logits = self.logits(input_ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, self.vocab).float(),
                               labels[:, 1:].reshape(-1))
        return loss, logits


class DictLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor,
                scale: float = 1.0) -> Dict[str, torch.Tensor]:
        pred = self.linear(x).squeeze(-1)
        return {"logits": pred, "loss": scale * F.mse_loss(pred, y)}


class BadReturn(TinyLM):
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.logits(input_ids)


class Frozen(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 1)
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).mean()


OUTSIDE_BYTES = 64


class ReadsOutside(nn.Module):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.size = OUTSIDE_BYTES  # TorchScript reads attributes, not globals
        self.embed = nn.Embedding(VOCAB, 8)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        stolen = torch.from_file(self.path, shared=False, size=self.size, dtype=torch.uint8)
        return self.embed(input_ids).float().mean() * 0.0 + stolen.double().sum().float()


class WritesOutside(nn.Module):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.size = OUTSIDE_BYTES  # TorchScript reads attributes, not globals
        self.embed = nn.Embedding(VOCAB, 8)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        mapped = torch.from_file(self.path, shared=True, size=self.size, dtype=torch.uint8)
        mapped.fill_(88)  # 'X', written through to the file
        # The loss reads the mapping, so TorchScript keeps the fill.
        return self.embed(input_ids).float().mean() * 0.0 + mapped.double().sum().float() * 0.0


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # torch 2.11 deprecates torch.jit.script/save in favour of torch.export,
    # but TorchScript is still what LibTorch C++ loads and trains.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.jit")
    torch.manual_seed(0)
    for name, cls in [("tiny_lm", TinyLM), ("tuple_loss", TupleLM), ("dict_loss", DictLoss),
                      ("bad_return", BadReturn), ("frozen", Frozen)]:
        torch.jit.save(torch.jit.script(cls()), os.path.join(out, name + ".pt"))
    outside = os.path.abspath(os.path.join(out, "outside"))
    os.makedirs(outside, exist_ok=True)
    for name, model in [("reads_outside", ReadsOutside(os.path.join(outside, "secret.bin"))),
                        ("writes_outside", WritesOutside(os.path.join(outside, "victim.bin")))]:
        torch.jit.save(torch.jit.script(model), os.path.join(out, name + ".pt"))


if __name__ == "__main__":
    main()
