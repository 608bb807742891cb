"""Checks a Kubernetes object against the typed models of the Python kubernetes
client (Debian's python3-kubernetes): every field must be one the model has,
with a value of its type, and every required field present.

The client's own deserializer ignores unknown fields, so a misspelled one
(`livenesProbe`) would pass it silently; this walks the object against each
model's attribute_map and openapi_types instead, then builds the models, whose
constructors refuse missing required fields.
"""

import re

import kubernetes
from kubernetes import client

# Quantities ("500m", "2Gi", 8) are typed str in the models but the API also
# takes numbers.
_QUANTITIES = {("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
               ("V1EmptyDirVolumeSource", "size_limit")}


def model_name(api_version, kind):
    """apps/v1 + StatefulSet -> V1StatefulSet; batch/v1 + Job -> V1Job."""
    version = api_version.split("/")[-1]
    return version[0].upper() + version[1:] + kind


def errors_of(obj):
    """Every schema error of a rendered object, as 'path: message' lines."""
    if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
        return ["object without apiVersion and kind"]
    name = model_name(obj["apiVersion"], obj["kind"])
    if not hasattr(client, name):
        return [f"{obj['apiVersion']} {obj['kind']}: no such model ({name}) in kubernetes "
                f"client {kubernetes.__version__}"]
    where = f"{obj['kind']}/{obj.get('metadata', {}).get('name', '?')}"
    errors = []
    _check(obj, name, where, errors, None)
    if not errors:
        try:
            client.ApiClient()._ApiClient__deserialize(obj, name)
        except (ValueError, TypeError) as e:
            errors.append(f"{where}: {e}")
    return errors


def _check(value, type_name, path, errors, quantity):
    if value is None:
        return
    m = re.fullmatch(r"list\[(.*)\]", type_name)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for i, v in enumerate(value):
            _check(v, m.group(1), f"{path}[{i}]", errors, quantity)
        return
    m = re.fullmatch(r"dict\(str, (.*)\)", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a mapping, got {type(value).__name__}")
            return
        for k, v in value.items():
            _check(v, m.group(1), f"{path}.{k}", errors, quantity)
        return
    if type_name == "str":
        ok = isinstance(value, str) or (quantity and isinstance(value, (int, float))
                                        and not isinstance(value, bool))
        if not ok:
            errors.append(f"{path}: expected a string, got {value!r}")
        return
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{path}: expected an integer, got {value!r}")
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            errors.append(f"{path}: expected true or false, got {value!r}")
        return
    if type_name == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            errors.append(f"{path}: expected a number, got {value!r}")
        return
    if type_name in ("object", "datetime", "date"):
        return  # int-or-string, raw JSON, timestamps
    model = getattr(client, type_name, None)
    if model is None:
        errors.append(f"{path}: the client has no model {type_name}")
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: expected a {type_name} mapping, got {value!r}")
        return
    by_json = {json_key: attr for attr, json_key in model.attribute_map.items()}
    for key, v in value.items():
        attr = by_json.get(key)
        if attr is None:
            errors.append(f"{path}: unknown field '{key}' ({type_name} has: "
                          f"{', '.join(sorted(by_json))})")
            continue
        _check(v, model.openapi_types[attr], f"{path}.{key}", errors,
               (type_name, attr) in _QUANTITIES)
