#!/usr/bin/env python3
"""Every C++-style name the docs put in backticks exists in the tree.

A name is a backticked token such as `JobManager`, `CheckLayout()` or
`JobArchive::Write` (CamelCase, or a qualified name); its last part must
occur in a tracked source file (.h, .cc, .py, .proto, .js, CMake). Names of
other projects' things that the docs mention go in ELSEWHERE. Prints each
name no source holds, with the doc that names it, and exits 1 if there is
one: a doc naming a function that was renamed or removed.

Usage: check_doc_names.py REPO_ROOT
"""
import pathlib
import re
import subprocess
import sys

# Names of other projects' parts (Kubernetes, gRPC, ...), not ours.
ELSEWHERE = {"ResourceQuota"}
NAME = re.compile(r"([A-Z][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)(?:\(\))?")


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    tracked = subprocess.run(
        ["git", "-C", str(root), "ls-files", "*.h", "*.cc", "*.in", "*.py", "*.proto", "*.js",
         "*.cmake", "*CMakeLists.txt"],
        capture_output=True, text=True, check=True).stdout.split()
    source = "\n".join((root / f).read_text(errors="replace") for f in tracked
                       if (root / f).is_file())
    docs = sorted((root / "docs").glob("*.md")) + [root / "README.md", root / "python" / "README.md"]
    missing = []
    for doc in docs:
        for token in re.findall(r"`([^`\n]+)`", doc.read_text()):
            m = NAME.fullmatch(token.strip())
            if not m:
                continue
            name = m.group(1)
            # CamelCase with a lower-case letter and a second capital, or qualified:
            # JobManager, Store::FinishJob (not CPU, not Linux).
            if not re.search(r"[a-z]", name) or not re.search(r"[A-Z].*[A-Z]|::", name):
                continue
            last = name.split("::")[-1]
            if name not in ELSEWHERE and not re.search(r"\b" + re.escape(last) + r"\b", source):
                missing.append(f"{doc.relative_to(root)}: `{token}` names nothing in the tree")
    for line in sorted(set(missing)):
        print(line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
