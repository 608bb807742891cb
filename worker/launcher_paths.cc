#include "worker/launcher_paths.h"

#include <pwd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;

// "/x/y.json" of "/x/y.json" or "--config=/x/y.json"; "" for anything else.
std::string NamedPath(const std::string& arg) {
  const size_t eq = arg.find('=');
  const std::string path =
      absl::StartsWith(arg, "-") && eq != std::string::npos ? arg.substr(eq + 1) : arg;
  std::error_code ec;
  if (path.empty() || path[0] != '/' || path == "/" || !fs::exists(path, ec)) return "";
  return path;
}

// Every path argv (less argv[0]) and PYTHONPATH name.
std::vector<std::string> NamedInCommand(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> named(argv.begin() + (argv.empty() ? 0 : 1), argv.end());
  for (const auto& [name, value] : vars) {
    if (name != "PYTHONPATH") continue;
    for (absl::string_view p : absl::StrSplit(value, ':')) named.emplace_back(p);
  }
  std::vector<std::string> out;
  for (const std::string& arg : named) {
    if (std::string path = NamedPath(arg); !path.empty()) out.push_back(std::move(path));
  }
  return out;
}

// `def.argv` with each token that holds a placeholder blanked: what is
// known of its paths before a trial expands it.
std::vector<std::string> LiteralArgv(const LauncherDef& def) {
  std::vector<std::string> out;
  for (const std::string& arg : def.argv) {
    out.push_back(absl::StrContains(arg, '{') ? std::string() : arg);
  }
  return out;
}

// "nobody (uid 65534)", or "uid N" for a uid with no name.
std::string UserName(uid_t uid) {
  const struct passwd* pw = ::getpwuid(uid);
  return pw != nullptr ? absl::StrCat(pw->pw_name, " (uid ", uid, ")") : absl::StrCat("uid ", uid);
}

// Prints "PATH: WHAT" for each argument the user running it cannot use:
// a directory it cannot list and enter, a file it cannot read. Exits 1 if
// any.
constexpr char kReadableScript[] =
    "bad=0\n"
    "for p; do\n"
    "  if [ -d \"$p\" ]; then\n"
    "    { [ -r \"$p\" ] && [ -x \"$p\" ]; } || { echo \"cannot list and enter $p\"; bad=1; }\n"
    "  elif [ -e \"$p\" ]; then\n"
    "    [ -r \"$p\" ] || { echo \"cannot read $p\"; bad=1; }\n"
    "  else\n"
    "    echo \"cannot see $p\"; bad=1\n"
    "  fi\n"
    "done\n"
    "exit $bad\n";

}  // namespace

std::vector<std::string> LauncherBinds(
    const std::vector<std::string>& argv, const std::string& workdir,
    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> paths;
  if (!workdir.empty()) paths.push_back(workdir);
  for (const std::string& path : NamedInCommand(argv, vars)) {
    std::error_code ec;
    std::string bound = fs::is_directory(path, ec) ? path : fs::path(path).parent_path().string();
    if (std::find(paths.begin(), paths.end(), bound) == paths.end()) {
      paths.push_back(std::move(bound));
    }
  }
  return paths;
}

std::vector<std::string> PathsTheCommandReads(
    const std::vector<std::string>& argv, const std::string& python, const std::string& workdir,
    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> paths = ExecutablePaths(python);
  for (std::string& bound : LauncherBinds(argv, workdir, vars)) paths.push_back(std::move(bound));
  return paths;
}

std::vector<std::string> LauncherNamedPaths(const LauncherDef& def) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!def.workdir.empty() && fs::exists(def.workdir, ec)) out.push_back(def.workdir);
  for (std::string& path : NamedInCommand(LiteralArgv(def), def.env)) {
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
  }
  return out;
}

absl::Status CheckLaunchersReadable(const Sandbox& sandbox, const Launchers& launchers) {
  std::vector<std::string> problems;
  for (const auto& [name, def] : launchers) {
    const std::vector<std::string> named = LauncherNamedPaths(def);
    if (named.empty()) continue;
    // The directories a rank binds for the launcher come first (so each
    // path is reached as a rank reaches it), then the paths themselves.
    // ({python}'s own paths are SandboxFromFlags' check.)
    std::vector<std::string> command = {"/bin/sh", "-c", kReadableScript, "sh"};
    for (std::string& bound : LauncherBinds(LiteralArgv(def), def.workdir, def.env)) {
      command.push_back(std::move(bound));
    }
    command.insert(command.end(), named.begin(), named.end());
    const absl::Status ran = sandbox.Check(command);
    if (ran.ok()) continue;
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(ran.message(), '\n')) {
      if (absl::StartsWith(line, "cannot ")) lines.emplace_back(line);
    }
    problems.push_back(absl::StrCat(
        "launcher '", name,
        "': ", lines.empty() ? std::string(ran.message()) : absl::StrJoin(lines, "; ")));
  }
  if (problems.empty()) return absl::OkStatus();
  const SandboxPolicy& policy = sandbox.policy();
  return absl::FailedPreconditionError(absl::StrCat(
      "the sandbox's user, ", UserName(policy.run_as_user ? policy.uid : ::getuid()), ": ",
      absl::StrJoin(problems, "; "),
      ": every trial of it would fail with \"Permission denied\". Make it readable by that user "
      "(e.g. chmod -R o+rX on the directory), move the project where that user can read it, or "
      "run the ranks as another --sandbox-user"));
}

}  // namespace autoaccel
