"""Reading the deployment files of deploy/ for the checks of tests/deploy/.

Dockerfiles are parsed into instructions, kustomizations rendered with kubectl,
and the flags a binary accepts read from its --help. Standard library plus
PyYAML (python3-yaml, which python3-kubernetes depends on).
"""

import fnmatch
import os
import re
import shlex
import subprocess

import yaml

REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(REPO, "deploy")


class Instruction:
    def __init__(self, keyword, text, line):
        self.keyword = keyword  # upper case
        self.text = text  # the rest, continuation lines joined
        self.line = line  # 1-based line of the keyword

    def json_or_words(self):
        """The arguments of an exec-form (JSON array) or shell-form instruction."""
        import json

        t = self.text.strip()
        if t.startswith("["):
            return json.loads(t)
        return shlex.split(t)

    def options_and_args(self):
        """(--options as a dict, other words) of COPY/ADD/FROM-style text."""
        options, args = {}, []
        for w in self.json_or_words():
            if w.startswith("--") and not args:
                name, _, value = w[2:].partition("=")
                options[name] = value
            else:
                args.append(w)
        return options, args


def parse_dockerfile(path):
    """The instructions of a Dockerfile, with their stage (index of FROM)."""
    instructions = []
    pending, start = None, 0
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            stripped = line.strip()
            if stripped.startswith("#") or (not stripped and pending is None):
                continue
            if pending is None:
                pending, start = "", number
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            pending += line
            keyword, _, rest = pending.strip().partition(" ")
            instructions.append(Instruction(keyword.upper(), rest.strip(), start))
            pending = None
    if pending is not None:
        raise ValueError(f"{path}: ends inside a continued instruction (line {start})")
    return instructions


def dockerignore_patterns():
    path = os.path.join(REPO, ".dockerignore")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def ignored(relpath, patterns):
    parts = relpath.split("/")
    for p in patterns:
        p = p.rstrip("/")
        for i in range(1, len(parts) + 1):
            if fnmatch.fnmatch("/".join(parts[:i]), p):
                return True
        if p.startswith("**/") and any(fnmatch.fnmatch(x, p[3:]) for x in parts):
            return True
    return False


def help_flags(binary, *args):
    """Every --flag that `binary [args] --help` names."""
    out = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(args)} --help exited {out.returncode}:\n"
                           f"{out.stdout}{out.stderr}")
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out.stdout + out.stderr))


def flags_in(words):
    """The --flags among command words (--flag=value counts as --flag)."""
    found = []
    for w in words:
        for m in re.finditer(r"(?:^|\s)(--[a-z][a-z0-9-]*)", w):
            found.append(m.group(1))
    return found


def require_kubectl(kubectl):
    """Exits with a message saying what to install when kubectl is missing."""
    import shutil
    import sys

    if shutil.which(kubectl) is None:
        sys.exit(f"{kubectl}: not found; scripts/setup installs Debian's kubernetes-client "
                 "(kubectl with kustomize) when no kubectl is in PATH")


def kustomize(kubectl, directory):
    """The objects `kubectl kustomize DIRECTORY` renders."""
    out = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {directory} failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def image_base(image):
    """registry.example.com/autoaccel-worker:0.1.0 -> autoaccel-worker"""
    name = image.rsplit("/", 1)[-1]
    return name.split("@")[0].split(":")[0]


def pod_spec(obj):
    kind = obj["kind"]
    if kind in ("StatefulSet", "DaemonSet", "Deployment", "Job"):
        return obj["spec"]["template"]["spec"]
    return None


def parse_port_range(text):
    a, _, b = str(text).partition("-")
    return int(a), int(b or a)
