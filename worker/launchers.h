// The worker's launchers (autoaccel-worker --launchers FILE): the commands
// an operator allows trials to run, each a user's training script started
// once per trial rank (worker/launcher_trial.h). Clients only name a
// launcher; its argv, working directory and environment come from this
// file alone. The file's form and the placeholders: docs/LAUNCHERS.md.
//
// Pure apart from ReadLaunchersFile (reads the file, checks workdirs
// exist); thread-safe.
#ifndef AUTOACCEL_WORKER_LAUNCHERS_H_
#define AUTOACCEL_WORKER_LAUNCHERS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

struct LauncherDef {
  std::string name;
  // Tokens with placeholders ("{trial_dir}", "--mbs={micro_batch_size}",
  // "{*training_args}"); never passed through a shell.
  std::vector<std::string> argv;
  // Absolute; "" = the rank's trial directory.
  std::string workdir;
  // Added to the worker's environment (literal values, sorted by name);
  // never one of ReservedEnvironmentNames().
  std::vector<std::pair<std::string, std::string>> env;
  std::string format;                   // an export format name, or "" (only strategy.json)
  std::vector<std::string> dimensions;  // strategy JSON keys; empty = all
};

// By name.
using Launchers = std::map<std::string, LauncherDef>;

// Parses a launchers file's text. `file_dir` (absolute) resolves relative
// workdirs; `source` names the file in messages. INVALID_ARGUMENT naming
// the launcher and the field ("launchers.json: launcher 'hf': argv[2]:
// unknown placeholder {mbs} (known: ...)") for: text that is not JSON, no
// "launchers" object, an unknown top-level key, a bad NAME, a launcher
// that is not an object or has an unknown key, a missing/empty/non-string
// argv, a workdir that is not a string, an env that is not an object of
// strings or names a bad or reserved variable, an unknown format or
// dimension, an unknown placeholder (allowed when the launcher has a
// format: it may name one of the format's files) and a {*stem} that is not
// a whole token or whose launcher has no format. Does not look at the disk.
absl::StatusOr<Launchers> ParseLaunchers(absl::string_view text, const std::string& file_dir,
                                         absl::string_view source);

// Reads and parses `path` (ParseLaunchers with the file's directory), then
// checks that every workdir is a directory. INVALID_ARGUMENT as above, or
// for a file that cannot be read or a workdir that does not exist.
absl::StatusOr<Launchers> ReadLaunchersFile(const std::string& path);

// What a worker advertises of a launcher when it registers.
v1::Launcher LauncherToProto(const LauncherDef& def);

// The variables the worker sets for every rank (a launcher's env may not
// set them): RANK, LOCAL_RANK, ..., AUTOACCEL_*, OMP_NUM_THREADS and every
// accelerator type's visible-devices variable.
const std::vector<std::string>& ReservedEnvironmentNames();

// The placeholders every launcher may use, sorted: the worker's values
// ({trial_dir}, {rank}, ...) and every strategy field's JSON key.
const std::vector<std::string>& KnownPlaceholders();

// A file the rank's export wrote: `name` ("training_args.txt"), its
// absolute `path` and its `content`.
struct ExportedFile {
  std::string name;
  std::string path;
  std::string content;
};

// `def.argv` with its placeholders replaced: {NAME} inside a token by
// values[NAME], or by the path of the exported file whose stem is NAME
// ({deepspeed_config}: ds_config.json); a whole token {*STEM} by the
// non-empty lines of the exported file STEM.txt, one token each. A "{" not
// followed by an identifier and "}" stays as it is. NOT_FOUND naming the
// placeholder and the files written for a placeholder that is neither a
// value nor a file of `files`. Pure.
absl::StatusOr<std::vector<std::string>> ExpandArgv(
    const LauncherDef& def, const std::map<std::string, std::string>& values,
    const std::vector<ExportedFile>& files);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_LAUNCHERS_H_
