"""Builds the dataclasses of results.py from protobuf messages and from the
CLI's JSON documents, by field name (the dataclass fields are the one list of
what is read)."""

import dataclasses
import functools
import json
import typing
from typing import Any, Dict, Type, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message

T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> Dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(hint: Any) -> Any:
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def from_message(cls: Type[T], message: Message) -> T:
    """`cls` (a results.py dataclass) with each field read from the message
    field of the same name: unset message fields become None, repeated ones
    lists, `strategy_json` text a dict, a message where a dict is wanted its
    JSON form."""
    values = {}
    for f in dataclasses.fields(cls):
        hint = _hints(cls)[f.name]
        value = getattr(message, f.name)
        target = _unwrap_optional(hint)
        if typing.get_origin(target) in (list, typing.List):
            (item,) = typing.get_args(target)
            values[f.name] = [_value(item, v) for v in value]
        elif dataclasses.is_dataclass(target):
            values[f.name] = from_message(target, value) if message.HasField(f.name) else None
        else:
            values[f.name] = _value(target, value)
    return cls(**values)


def _value(target: Any, value: Any) -> Any:
    if dataclasses.is_dataclass(target):
        return from_message(target, value)
    if typing.get_origin(target) in (dict, typing.Dict):
        if isinstance(value, Message):
            return json_format.MessageToDict(value, preserving_proto_field_name=True)
        return json.loads(value) if value else {}
    return value


def from_json(cls: Type[T], doc: Dict[str, Any]) -> T:
    """`cls` (a results.py dataclass) from a JSON object of the CLI: each
    field from the key of its name, nested dataclasses and lists of them
    built in turn; a missing key takes the field's default (an error
    without one); unknown keys are ignored."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in doc or doc[f.name] is None:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError("%s: the CLI's document has no %r" % (cls.__name__, f.name))
            continue
        target = _unwrap_optional(_hints(cls)[f.name])
        value = doc[f.name]
        if typing.get_origin(target) in (list, typing.List):
            (item,) = typing.get_args(target)
            if dataclasses.is_dataclass(item):
                value = [from_json(item, v) for v in value]
        elif dataclasses.is_dataclass(target):
            value = from_json(target, value)
        values[f.name] = value
    return cls(**values)
