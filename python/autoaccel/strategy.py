"""A strategy in any of its forms, read into one checked dict.

autoaccel writes a strategy as a JSON object (strategy.json, the API's
`strategy_json`, a launcher trial's "strategy") or as its canonical text
("dp=2,tp=1,pp=1,sharding=zero2,mbs=4,ga=2,precision=bf16,..."). `parse()`
reads either, or a file holding either, or the objects of this package that
carry one, into a dict with every key of FIELDS, and applies the rules every
parser of the C++ side applies (spec/strategy.cc: ParseStrategyText,
StrategyFromJson, CheckLayout, CheckCheckpointPercent). Anything else raises
ValueError naming the key.

FIELDS mirrors the field table spec/strategy_fields.h (JSON key, text key,
default, allowed values); tests/python/test_torch_apply.py reads that header
and fails when the two disagree. Standard library only.
"""

import json
import os

__all__ = ["FIELDS", "Field", "parse", "to_text"]


class Field:
    """One strategy field: JSON key `name`, canonical text key `text_key`,
    `kind` ("count": a positive integer, "flag": a boolean, "choice": one of
    `choices`), its `default`, and for counts `percent` (1..100)."""

    def __init__(self, name, text_key, kind, default, choices=(), percent=False):
        self.name, self.text_key, self.kind = name, text_key, kind
        self.default, self.choices, self.percent = default, tuple(choices), percent

    def __repr__(self):
        return "Field(%r)" % self.name


# In the canonical text's key order (spec/strategy_fields.h, kStrategyFields).
FIELDS = (
    Field("data_parallel", "dp", "count", 1),
    Field("tensor_parallel", "tp", "count", 1),
    Field("pipeline_parallel", "pp", "count", 1),
    Field("sharding", "sharding", "choice", "none", ("none", "zero1", "zero2", "fsdp")),
    Field("sequence_parallel", "sp", "flag", False),
    Field("context_parallel", "cp", "count", 1),
    Field("context_parallel_comm", "cp_comm", "choice", "p2p", ("p2p", "all_gather")),
    Field("expert_parallel", "ep", "count", 1),
    Field("pipeline_schedule", "pp_schedule", "choice", "1f1b", ("1f1b", "interleaved")),
    Field("virtual_stages", "vpp", "count", 1),
    Field("micro_batch_size", "mbs", "count", 1),
    Field("grad_accum_steps", "ga", "count", 1),
    Field("precision", "precision", "choice", "fp32", ("fp32", "bf16", "fp16", "pure_bf16", "fp8")),
    Field("checkpointing", "checkpoint", "choice", "none", ("none", "selective", "full")),
    Field("checkpoint_percent", "ckpt_pct", "count", 100, percent=True),
    Field("attention", "attention", "choice", "math", ("math", "sdpa")),
    Field("optimizer", "optimizer", "choice", "adamw", ("adamw", "fused_adamw")),
    Field("offload", "offload", "choice", "none", ("none", "cpu")),
)
_BY_NAME = {f.name: f for f in FIELDS}
# The text rules kLayout (written for every multi-rank layout) and
# kLayoutIfSet (written when not the default).
_LAYOUT = ("data_parallel", "tensor_parallel", "pipeline_parallel", "sharding")
_LAYOUT_IF_SET = ("sequence_parallel", "context_parallel", "expert_parallel")
_BY_TEXT_KEY = {f.text_key: f for f in FIELDS}
_INT_MAX = 2 ** 31 - 1


def parse(strategy):
    """The strategy `strategy` as a dict with every key of FIELDS.

    Accepts: the JSON object (a dict; missing keys read as their defaults);
    the canonical text (a str holding "="); a path (str or os.PathLike) to a
    JSON file holding the strategy object, or a launcher trial's
    strategy.json (the object under its "strategy" key); an
    autoaccel.trial.Trial (its .strategy); and the client's results
    (autoaccel.results: a StrategyAnswer or Trial by its strategy_json, a
    JobInfo by its best trial, a Strategy by its text). Raises ValueError
    for an unknown key, a value of the wrong type or outside the allowed
    ones, or a layout the C++ parsers refuse; OSError when the file cannot
    be read."""
    if isinstance(strategy, dict):
        return _from_json(strategy, where="strategy")
    if isinstance(strategy, os.PathLike) or (isinstance(strategy, str) and "=" not in strategy):
        return _from_file(os.fspath(strategy))
    if isinstance(strategy, str):
        return _from_text(strategy)
    best = getattr(strategy, "best", None)  # results.JobInfo: its best trial
    if best is not None and not isinstance(strategy, dict):
        return parse(best)
    for attribute in ("strategy_json", "strategy"):  # results.*, trial.Trial
        value = getattr(strategy, attribute, None)
        if isinstance(value, dict) and value:
            return _from_json(value, where="strategy")
    text = getattr(strategy, "text", None)  # results.Strategy
    if isinstance(text, str) and text:
        return _from_text(text)
    value = getattr(strategy, "strategy", None)
    if value is not None and value is not strategy:
        return parse(value)
    raise ValueError("strategy: expected a dict, a canonical text, a path to strategy.json, an "
                     "autoaccel.trial.Trial or a result carrying strategy_json; got %s"
                     % type(strategy).__name__)


def to_text(strategy):
    """The canonical text of a parsed strategy (spec/strategy.h,
    StrategyToText): the layout keys only for a multi-rank layout, sp only
    when set, cp only when not 1 and cp_comm only with it, the pipeline keys
    only with a pipeline, ckpt_pct only when not 100."""
    s = parse(strategy) if not _is_parsed(strategy) else strategy
    single = all(s[f.name] == f.default for f in FIELDS
                 if f.name in _LAYOUT or f.name in _LAYOUT_IF_SET)
    items = []
    for f in FIELDS:
        value = s[f.name]
        if f.name in _LAYOUT:
            if single:
                continue
        elif f.name in _LAYOUT_IF_SET:
            if value == f.default:
                continue
        elif f.name == "context_parallel_comm":
            if s["context_parallel"] == 1:
                continue
        elif f.name == "pipeline_schedule":
            if s["pipeline_parallel"] == 1:
                continue
        elif f.name == "virtual_stages":
            if s["pipeline_parallel"] == 1 or s["pipeline_schedule"] != "interleaved":
                continue
        elif f.name == "checkpoint_percent":
            if value == 100:
                continue
        items.append("%s=%s" % (f.text_key, (1 if value else 0) if f.kind == "flag" else value))
    return ",".join(items)


def _is_parsed(s):
    return isinstance(s, dict) and set(s) == set(_BY_NAME)


def _from_file(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError("%s: not JSON (%s)" % (path, e)) from None
    if isinstance(doc, dict) and isinstance(doc.get("strategy"), dict):
        return _from_json(doc["strategy"], where="%s: strategy" % path)
    if isinstance(doc, dict):
        return _from_json(doc, where="%s: strategy" % path)
    if isinstance(doc, str):
        return _from_text(doc)
    raise ValueError("%s: expected the strategy's JSON object" % path)


def _from_json(obj, where):
    s = {f.name: f.default for f in FIELDS}
    for key, value in obj.items():
        f = _BY_NAME.get(key)
        if f is None:
            raise ValueError("%s: unknown key '%s' (allowed: %s)"
                             % (where, key, ", ".join(_BY_NAME)))
        if f.kind == "count":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _INT_MAX:
                raise ValueError("strategy.%s: expected a positive integer, got %r" % (key, value))
        elif f.kind == "flag":
            if not isinstance(value, bool):
                raise ValueError("strategy.%s: expected true or false, got %r" % (key, value))
        elif not isinstance(value, str):
            raise ValueError("strategy.%s: expected a string, got %r" % (key, value))
        elif value not in f.choices:
            raise ValueError("strategy.%s: unknown value '%s' (allowed: %s)"
                             % (key, value, ", ".join(f.choices)))
        s[key] = value
    _check(s, lambda f: f.name)
    return s


def _from_text(text):
    s = {f.name: f.default for f in FIELDS}
    for item in text.strip().split(","):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        f = _BY_TEXT_KEY.get(key)
        if f is None or not eq:
            raise ValueError("strategy: unknown key '%s' (allowed: %s)"
                             % (key if eq else item, ", ".join(_BY_TEXT_KEY)))
        if f.kind == "count":
            if not value.isdigit() or not 0 < int(value) <= _INT_MAX:
                raise ValueError("strategy.%s: expected a positive integer, got '%s'"
                                 % (key, value))
            s[f.name] = int(value)
        elif f.kind == "flag":
            if value not in ("0", "1"):
                raise ValueError("strategy.%s: expected 0 or 1, got '%s'" % (key, value))
            s[f.name] = value == "1"
        else:
            if value not in f.choices:
                raise ValueError("strategy.%s: unknown value '%s' (allowed: %s)"
                                 % (key, value, ", ".join(f.choices)))
            s[f.name] = value
    _check(s, lambda f: f.text_key)
    return s


def _check(s, key):
    """CheckCheckpointPercent and CheckLayout (spec/strategy.cc)."""
    k = lambda name: key(_BY_NAME[name])  # noqa: E731
    if not 1 <= s["checkpoint_percent"] <= 100:
        raise ValueError("strategy.%s: must be 1..100, got %d"
                         % (k("checkpoint_percent"), s["checkpoint_percent"]))
    if s["checkpointing"] == "none" and s["checkpoint_percent"] != 100:
        raise ValueError("strategy.%s: must be 100 with %s none (nothing is checkpointed), got %d"
                         % (k("checkpoint_percent"), k("checkpointing"), s["checkpoint_percent"]))
    if s["sharding"] != "none" and s["data_parallel"] == 1 and s["context_parallel"] == 1:
        raise ValueError("strategy.%s: %s shards model state over the data- and context-parallel "
                         "ranks and needs %s or %s > 1 (allowed with 1: none)"
                         % (k("sharding"), s["sharding"], k("data_parallel"),
                            k("context_parallel")))
    if s["context_parallel"] == 1 and s["context_parallel_comm"] != "p2p":
        raise ValueError("strategy.%s: %s needs %s > 1 (allowed without context parallelism: "
                         "p2p)" % (k("context_parallel_comm"), s["context_parallel_comm"],
                                   k("context_parallel")))
    replicas = s["data_parallel"] * s["context_parallel"]
    if replicas % s["expert_parallel"] != 0:
        raise ValueError("strategy.%s: %d spreads the experts over data- and context-parallel "
                         "ranks and must divide %s * %s (%d)"
                         % (k("expert_parallel"), s["expert_parallel"], k("data_parallel"),
                            k("context_parallel"), replicas))
    if s["sequence_parallel"] and s["tensor_parallel"] == 1:
        raise ValueError("strategy.%s: splits activations over tensor-parallel ranks and needs "
                         "%s > 1" % (k("sequence_parallel"), k("tensor_parallel")))
    if s["pipeline_parallel"] == 1 and s["pipeline_schedule"] != "1f1b":
        raise ValueError("strategy.%s: %s needs %s > 1 (allowed without a pipeline: 1f1b)"
                         % (k("pipeline_schedule"), s["pipeline_schedule"],
                            k("pipeline_parallel")))
    if s["pipeline_schedule"] == "1f1b" and s["virtual_stages"] != 1:
        raise ValueError("strategy.%s: 1f1b runs one model chunk per rank (must be 1), got %d"
                         % (k("virtual_stages"), s["virtual_stages"]))
    if s["pipeline_schedule"] == "interleaved" and s["virtual_stages"] < 2:
        raise ValueError("strategy.%s: interleaved needs at least 2 model chunks per rank, got %d"
                         % (k("virtual_stages"), s["virtual_stages"]))
