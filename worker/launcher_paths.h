// What a launcher rank reads beyond the system, and the worker's start-up
// check that its sandbox lets a rank read it: a launcher whose workdir or
// script the sandbox user cannot read would otherwise be found only when
// every trial fails with "Permission denied".
//
// Thread-compatible; the check runs a command in the sandbox (blocks up to
// Sandbox::Check's limit).
#ifndef AUTOACCEL_WORKER_LAUNCHER_PATHS_H_
#define AUTOACCEL_WORKER_LAUNCHER_PATHS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "worker/launchers.h"
#include "worker/sandbox.h"

namespace autoaccel {

// What a sandboxed rank binds read-only for its launcher: the workdir, the
// directory of each absolute path its argv names (a script beside its
// modules; "--config=/x/y.json" names one too) and PYTHONPATH's
// directories, each once. Paths that do not exist are left out. Reads the
// disk.
std::vector<std::string> LauncherBinds(
    const std::vector<std::string>& argv, const std::string& workdir,
    const std::vector<std::pair<std::string, std::string>>& vars);

// All a sandboxed rank reads beyond the system (Sandbox::Wrap adds
// argv[0]'s own): {python}'s prefix and venv (ExecutablePaths: runs ldd),
// then LauncherBinds.
std::vector<std::string> PathsTheCommandReads(
    const std::vector<std::string>& argv, const std::string& python, const std::string& workdir,
    const std::vector<std::pair<std::string, std::string>>& vars);

// The paths of `def` a rank must reach, before any placeholder is
// expanded: its workdir, the literal absolute paths of its argv (tokens
// with a placeholder are left out) and PYTHONPATH's directories, each that
// exists. Reads the disk.
std::vector<std::string> LauncherNamedPaths(const LauncherDef& def);

// Runs, in `sandbox` as a rank would (LauncherBinds bound), a check that
// the rank's user can read each of LauncherNamedPaths of every launcher
// (list and enter a directory, read a file) and enter the directory a named
// file is in. FAILED_PRECONDITION naming the launcher, each path it cannot
// read and the remedy; OK when every launcher's paths are readable (or none
// names a path).
absl::Status CheckLaunchersReadable(const Sandbox& sandbox, const Launchers& launchers);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_LAUNCHER_PATHS_H_
