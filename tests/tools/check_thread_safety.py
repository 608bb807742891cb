#!/usr/bin/env python3
"""Checks the thread-safety annotations (ABSL_GUARDED_BY, ...) with clang.

GCC, which builds the project, ignores them; clang's -Wthread-safety
proves that every guarded field is touched with its mutex held and every
function that requires a lock is called with it. This compiles each
translation unit of the given folders that has annotations (in the .cc
or a project header it includes; from the build's compile_commands.json) with clang,
syntax only, warnings as errors.

usage: check_thread_safety.py BUILD_DIR SOURCE_DIR FOLDER...
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys


ANNOTATIONS = ("ABSL_GUARDED_BY", "ABSL_EXCLUSIVE_LOCKS_REQUIRED", "ABSL_SHARED_LOCKS_REQUIRED",
               "ABSL_LOCKS_EXCLUDED", "ABSL_PT_GUARDED_BY")


def annotated(src: str, source_dir: str) -> bool:
    """The .cc, or a project header it includes directly, has annotations."""
    with open(src, errors="replace") as f:
        text = f.read()
    paths = [os.path.join(source_dir, inc) for inc in re.findall(r'#include "([^"]+)"', text)]
    for path in [src] + paths:
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                content = f.read()
            if any(a in content for a in ANNOTATIONS):
                return True
    return False


def main() -> int:
    build_dir, source_dir, folders = sys.argv[1], sys.argv[2], sys.argv[3:]
    clang = shutil.which("clang++")
    if clang is None:
        print("clang++ not found (scripts/setup installs clang)", file=sys.stderr)
        return 1
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    prefixes = [os.path.join(source_dir, d) + os.sep for d in folders]
    jobs = []
    for e in entries:
        src = e["file"]
        if not any(src.startswith(p) for p in prefixes) or not annotated(src, source_dir):
            continue
        args = shlex.split(e["command"]) if "command" in e else e["arguments"]
        keep, skip = [], False
        for a in args[1:]:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c"):
                skip = a == "-o"
                continue
            if a == src:
                continue
            keep.append(a)
        cmd = [clang, "-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
               "-Wno-unknown-warning-option"] + keep + [src]
        jobs.append((src, cmd, e["directory"]))
    if not jobs:
        print("no translation units found under", folders, file=sys.stderr)
        return 1

    def run(job):
        src, cmd, cwd = job
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        return src, r.returncode, r.stderr

    failed = 0
    workers = int(os.environ.get("AUTOACCEL_TEST_JOBS", "2"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for src, rc, err in pool.map(run, jobs):
            print("checked", os.path.relpath(src, source_dir))
            if rc != 0:
                failed += 1
                print(f"{os.path.relpath(src, source_dir)}:\n{err}", file=sys.stderr)
    print(f"{len(jobs) - failed} of {len(jobs)} translation units pass clang -Wthread-safety")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
