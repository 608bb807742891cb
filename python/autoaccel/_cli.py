"""Runs the `autoaccel` CLI with --json for the commands that need no server
(export of a strategy, estimate) or that the CLI alone implements (the
exporters): one subprocess per call, its one JSON document parsed."""

import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Tuple

from autoaccel.errors import CliError, InvalidArgumentError

# The CLI's exit codes (client/commands.h).
EXIT_BAD_INPUT = 2
EXIT_NOTHING_RECORDED = 3


def find_cli(cli: Optional[str]) -> str:
    """The CLI to run: `cli` if given, else $AUTOACCEL_CLI, else `autoaccel`
    on PATH. CliError saying where it looked when there is none."""
    for candidate, where in ((cli, "cli="), (os.environ.get("AUTOACCEL_CLI"), "$AUTOACCEL_CLI")):
        if candidate:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
            raise CliError("%s %s: no such executable (the autoaccel CLI binary)"
                           % (where, candidate))
    found = shutil.which("autoaccel")
    if found:
        return found
    raise CliError("cannot find the autoaccel CLI (export and estimate run it): pass "
                   "Client(cli=PATH), set $AUTOACCEL_CLI, or put `autoaccel` on PATH "
                   "(build/bin/autoaccel in a build of the repository)")


def run_json(cli: str, args: List[str], env: Mapping[str, str],
             timeout: float) -> Tuple[int, Dict[str, Any]]:
    """Runs `cli --json ARGS` with `env` added to the environment; returns its
    exit code and the document it printed. Exit 0, exit 3 (nothing to give)
    and exit 2 with a document that is not an error (export's rejected
    strategy) return; exit 2 otherwise raises InvalidArgumentError with the
    CLI's message, any other failure CliError."""
    full_env = dict(os.environ)
    full_env.pop("AUTOACCEL_TOKEN_FILE", None)
    full_env.update(env)
    try:
        done = subprocess.run([cli, "--json"] + args, env=full_env, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise CliError("%s %s: no answer within %.0f s" % (cli, args[0], timeout)) from None
    except OSError as e:
        raise CliError("cannot run %s: %s" % (cli, e)) from None
    doc = None
    if done.stdout.strip():
        try:
            doc = json.loads(done.stdout)
        except ValueError:
            doc = None
    if doc is not None and (done.returncode in (0, EXIT_NOTHING_RECORDED) or
                            (done.returncode == EXIT_BAD_INPUT and "error" not in doc)):
        return done.returncode, doc
    message = _message(done.stderr, doc) or "exit %d" % done.returncode
    if done.returncode == EXIT_BAD_INPUT:
        raise InvalidArgumentError(message)
    raise CliError("autoaccel %s failed (exit %d): %s" % (args[0], done.returncode, message))


def _message(stderr: str, doc: Optional[Dict[str, Any]]) -> str:
    """The CLI's error: the document's "error", else its last line on stderr
    that names it ("autoaccel: ...", "autoaccel estimate: ...")."""
    if doc and isinstance(doc.get("error"), str):
        return doc["error"]
    lines = [l for l in stderr.splitlines() if l.startswith("autoaccel")]
    if not lines:
        return stderr.strip()
    line = lines[-1]
    return line.split(": ", 1)[1] if ": " in line else line
