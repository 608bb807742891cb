#include "worker/sandbox.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "worker/seccomp_filter.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;

// What every program needs of /etc to start, load libraries and resolve
// host names, and nothing more (not shadow, not ssh keys, not the
// machine's configuration); bound when present.
constexpr const char* kSystemPaths[] = {"/usr",
                                        "/etc/ld.so.cache",
                                        "/etc/ld.so.conf",
                                        "/etc/ld.so.conf.d",
                                        "/etc/nsswitch.conf",
                                        "/etc/hosts",
                                        "/etc/host.conf",
                                        "/etc/resolv.conf",
                                        "/etc/gai.conf",
                                        "/etc/localtime",
                                        "/etc/alternatives",
                                        "/etc/ssl/certs",
                                        "/etc/os-release",
                                        "/etc/python3",
                                        "/etc/python3.11"};
// Top-level directories a merged-/usr system makes links (else bound).
constexpr const char* kRootDirs[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
// /dev entries of accelerators and their fabrics, bound read-write.
constexpr const char* kDevicePrefixes[] = {"nvidia",    "kfd",      "dri",   "davinci",
                                           "devmm_svm", "hisi_hdc", "mtgpu", "infiniband"};
// The signals bwrap ignores and the command gets back (see the header).
constexpr int kStopSignals[] = {SIGTERM, SIGINT};
constexpr absl::Duration kCheckTimeout = absl::Seconds(20);

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (absl::StartsWith(path, dir) && path.size() > dir.size() &&
                         (dir.back() == '/' || path[dir.size()] == '/'));
}

std::string Canonical(const std::string& path) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

bool IsSystemPath(const std::string& canonical) { return Under(canonical, "/usr"); }

// `paths` without those under another of them, sorted.
std::vector<std::string> Outermost(std::vector<std::string> paths) {
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    if (p.empty() || p == "/") continue;
    if (!out.empty() && Under(p, out.back())) continue;
    out.push_back(p);
  }
  return out;
}

// The prefix up to and including "site-packages" of a path inside one.
std::string SitePackages(const std::string& path) {
  const size_t at = path.find("/site-packages/");
  return at == std::string::npos ? "" : path.substr(0, at + std::string("/site-packages").size());
}

// The absolute paths of the shared libraries ldd lists for `path`.
std::vector<std::string> Libraries(const std::string& path) {
  std::vector<std::string> libs;
  const std::string command = absl::StrCat("ldd '", path, "' 2>/dev/null");
  if (path.find('\'') != std::string::npos) return libs;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return libs;
  char line[4096];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    absl::string_view l = line;
    const size_t arrow = l.find("=> ");
    absl::string_view rest = arrow == absl::string_view::npos ? absl::StripLeadingAsciiWhitespace(l)
                                                              : l.substr(arrow + 3);
    if (!absl::StartsWith(rest, "/")) continue;
    libs.emplace_back(rest.substr(0, rest.find(' ')));
  }
  ::pclose(pipe);
  return libs;
}

// The directories a Python prefix's or venv's site-packages reach beyond
// itself: absolute paths in its .pth files and in setuptools' editable
// finders (`pip install -e`: MAPPING = {'pkg': '/src/pkg'}).
std::vector<std::string> PathsSitePackagesName(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator lib(root / "lib", ec), end; !ec && lib != end; lib.increment(ec)) {
    const fs::path site = lib->path() / "site-packages";
    std::error_code ec2;
    for (fs::directory_iterator it(site, ec2), end2; !ec2 && it != end2; it.increment(ec2)) {
      const std::string name = it->path().filename().string();
      const bool pth = absl::EndsWith(name, ".pth");
      if (!pth && !(absl::StartsWith(name, "__editable__") && absl::EndsWith(name, ".py"))) {
        continue;
      }
      std::ifstream in(it->path());
      std::string line;
      while (std::getline(in, line)) {
        std::vector<std::string> candidates;
        if (pth && absl::StartsWith(line, "/")) candidates.push_back(line);
        for (absl::string_view quoted : absl::StrSplit(line, absl::ByAnyChar("'\""))) {
          if (absl::StartsWith(quoted, "/")) candidates.emplace_back(quoted);
        }
        for (const std::string& c : candidates) {
          std::error_code ec3;
          if (fs::exists(c, ec3)) out.push_back(c);
        }
      }
    }
  }
  return out;
}

std::string TailOfLog(const std::string& path) {
  std::string tail = TailOfFile(path, 5);
  return tail.empty() ? "(no output)" : tail;
}

}  // namespace

std::vector<std::string> BubblewrapArgv(const SandboxPolicy& policy, const RankMounts& mounts,
                                        const std::vector<std::string>& command) {
  std::vector<std::string> a = {policy.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc",
                                "--unshare-cgroup-try",
                                // The fresh file system: nothing of the host
                                // unless bound below.
                                "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/sys", "/sys",
                                "--perms", "1777", "--tmpfs", "/tmp"};
  if (!policy.seccomp_file.empty()) {
    a.push_back("--seccomp");
    a.push_back(std::to_string(kSeccompFd));
  }
  auto add = [&a](std::initializer_list<std::string> args) {
    a.insert(a.end(), args.begin(), args.end());
  };
  for (const std::string& d : mounts.devices) add({"--dev-bind-try", d, d});
  if (!mounts.shm_dir.empty()) add({"--bind", mounts.shm_dir, "/dev/shm"});
  for (const auto& [link, target] : policy.root_links) add({"--symlink", target, link});
  // Directories bwrap makes for a bind's parents are 0700, which the rank's
  // user could not pass: make them 0755 first (/etc for /etc/passwd, ...).
  std::set<std::string> system_parents;
  std::vector<std::string> system_dests = policy.read_only;
  system_dests.push_back("/etc/passwd");
  for (const std::string& d : system_dests) {
    for (fs::path p = fs::path(d).parent_path(); p != p.root_path() && !p.empty();
         p = p.parent_path()) {
      system_parents.insert(p.string());
    }
  }
  for (const std::string& p : system_parents) add({"--perms", "0755", "--dir", p});
  for (const std::string& p : policy.read_only) add({"--ro-bind", p, p});
  if (!policy.passwd_file.empty()) add({"--ro-bind", policy.passwd_file, "/etc/passwd"});
  if (!policy.group_file.empty()) add({"--ro-bind", policy.group_file, "/etc/group"});

  // The rank's paths: (source, destination), each at its canonical place
  // and, when reached through a link, at the linked place too.
  std::vector<std::pair<std::string, std::string>> binds;
  std::set<std::string> covered;
  for (const std::string& p : policy.read_only) covered.insert(Canonical(p));
  std::vector<std::string> wanted;
  for (const std::string& p : mounts.read_only) {
    if (p.empty() || p[0] != '/') continue;
    const std::string c = Canonical(p);
    if (!IsSystemPath(c) && !Under(c, mounts.trial_dir)) wanted.push_back(c);
    if (c != p && !Under(p, mounts.trial_dir)) wanted.push_back(p);
  }
  std::vector<std::string> dests = Outermost(wanted);
  // Parents the binds need: made 0755 (bwrap's own are 0700, which the
  // rank's user could not pass).
  std::set<std::string> parents;
  for (const std::string& d : dests) {
    for (fs::path p = fs::path(d).parent_path(); p != p.root_path(); p = p.parent_path()) {
      parents.insert(p.string());
    }
  }
  for (const std::string& writable : {mounts.trial_dir, mounts.cache_dir}) {
    if (writable.empty()) continue;
    for (fs::path p = fs::path(writable).parent_path(); p != p.root_path(); p = p.parent_path()) {
      parents.insert(p.string());
    }
  }
  for (const std::string& p : parents) add({"--perms", "0755", "--dir", p});
  for (const std::string& d : dests) add({"--ro-bind", Canonical(d), d});
  add({"--bind", mounts.trial_dir, mounts.trial_dir});
  if (!mounts.cache_dir.empty()) add({"--bind", mounts.cache_dir, mounts.cache_dir});
  add({"--chdir", mounts.workdir.empty() ? mounts.trial_dir : mounts.workdir});
  add({"--setenv", "HOME", mounts.trial_dir, "--unsetenv", "TMPDIR"});
  if (policy.run_as_user) {
    add({policy.setpriv, absl::StrCat("--reuid=", policy.uid), absl::StrCat("--regid=", policy.gid),
         "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"});
  }
  std::vector<std::string> names;
  for (int sig : kStopSignals) names.push_back(sigabbrev_np(sig));
  add({policy.env, absl::StrCat("--default-signal=", absl::StrJoin(names, ",")), "--"});
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

int RankWaitStatus(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code > 128 && code - 128 < 65) return code - 128;  // "killed by signal code-128"
  }
  return status;
}

std::vector<std::string> ExecutablePaths(const std::string& path) {
  std::vector<std::string> out = {path};
  std::error_code ec;
  if (!fs::exists(path, ec)) return out;
  // A Python's prefix (PREFIX/bin/python3 beside PREFIX/lib/python3.X):
  // its standard library. Not any bin/'s parent: a build tree's bin/ sits
  // beside everything else of the tree.
  auto add_prefix = [&out](const fs::path& exe) {
    const fs::path dir = exe.parent_path();
    if (dir.filename() != "bin" || dir.parent_path() == dir.root_path()) return;
    std::error_code ec;
    for (fs::directory_iterator it(dir.parent_path() / "lib", ec), end; !ec && it != end;
         it.increment(ec)) {
      if (absl::StartsWith(it->path().filename().string(), "python")) {
        out.push_back(dir.parent_path().string());
        return;
      }
    }
  };
  const fs::path given(path);
  if (given.parent_path().filename() == "bin" &&
      fs::exists(given.parent_path().parent_path() / "pyvenv.cfg", ec)) {
    out.push_back(given.parent_path().parent_path().string());  // the venv
  }
  const std::string canonical = Canonical(path);
  add_prefix(canonical);
  // Editable installs and .pth paths of the venv and the prefix.
  for (size_t i = 1, n = out.size(); i < n; ++i) {
    const std::vector<std::string> named = PathsSitePackagesName(out[i]);
    out.insert(out.end(), named.begin(), named.end());
  }
  for (const std::string& lib : Libraries(canonical)) {
    const std::string site = SitePackages(lib);
    out.push_back(site.empty() ? fs::path(lib).parent_path().string() : site);
  }
  std::vector<std::string> kept;
  for (const std::string& p : out) {
    if (p == path || !IsSystemPath(Canonical(p))) kept.push_back(p);
  }
  return kept;
}

std::vector<std::string> AcceleratorDeviceNodes() {
  std::vector<std::string> nodes;
  DIR* dev = ::opendir("/dev");
  if (dev == nullptr) return nodes;
  while (const dirent* e = ::readdir(dev)) {
    const absl::string_view name = e->d_name;
    for (const char* prefix : kDevicePrefixes) {
      if (absl::StartsWith(name, prefix)) {
        nodes.push_back(absl::StrCat("/dev/", name));
        break;
      }
    }
  }
  ::closedir(dev);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

struct Sandbox::ShmTable {
  absl::Mutex mu;
  std::map<std::string, int> users ABSL_GUARDED_BY(mu);
  // ExecutablePaths by executable: ldd runs once per program.
  std::map<std::string, std::vector<std::string>> executables ABSL_GUARDED_BY(mu);
};

Sandbox::Sandbox(SandboxPolicy policy)
    : policy_(std::move(policy)), shm_(std::make_unique<ShmTable>()) {}

Sandbox::~Sandbox() {
  // Its /etc files and any trial's shared memory still held: nothing of the
  // worker stays behind (a killed worker's: worker/stale_dirs.h).
  std::error_code ec;
  if (!policy_.passwd_file.empty()) fs::remove_all(fs::path(policy_.passwd_file).parent_path(), ec);
  absl::MutexLock lock(&shm_->mu);
  for (const auto& [trial_key, users] : shm_->users) {
    fs::remove_all(absl::StrCat("/dev/shm/autoaccel-", ::getpid(), "-", trial_key), ec);
  }
}

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(const SandboxOptions& options) {
  const std::string give_up =
      "; or start the worker with --no-sandbox (trials can then read and write whatever the "
      "worker's user can)";
  SandboxPolicy policy;
  absl::StatusOr<std::string> bwrap = FindExecutable("bwrap");
  if (!bwrap.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the trial sandbox needs bubblewrap (bwrap), which is not in PATH: install it "
                     "(apt-get install bubblewrap)",
                     give_up));
  }
  policy.bwrap = *bwrap;
  policy.env = "/usr/bin/env";
  policy.run_as_user = ::geteuid() == 0;
  if (policy.run_as_user) {
    absl::StatusOr<std::string> setpriv = FindExecutable("setpriv");
    if (!setpriv.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the trial sandbox needs setpriv (util-linux) to run ranks as --sandbox-user ",
          options.user, ": install util-linux", give_up));
    }
    policy.setpriv = *setpriv;
    const passwd* pw = ::getpwnam(options.user.c_str());
    uint32_t id = 0;
    if (pw != nullptr) {
      policy.uid = pw->pw_uid;
      policy.gid = pw->pw_gid;
    } else if (absl::SimpleAtoi(options.user, &id)) {
      policy.uid = id;
      policy.gid = id;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--sandbox-user: no user '", options.user,
                                                     "' on this machine (give a name or a uid)"));
    }
    if (policy.uid == 0) {
      return absl::InvalidArgumentError(
          "--sandbox-user: ranks may not run as root (give an unprivileged user, e.g. nobody)");
    }
  }
  std::error_code ec;
  for (const char* dir : kRootDirs) {
    if (fs::is_symlink(dir, ec)) {
      policy.root_links.emplace_back(dir, fs::read_symlink(dir, ec).string());
    } else if (fs::is_directory(dir, ec)) {
      policy.read_only.push_back(dir);
    }
  }
  for (const char* p : kSystemPaths) {
    if (fs::exists(p, ec)) policy.read_only.push_back(p);
  }
  for (const std::string& p : options.read_only) {
    if (p.empty() || p[0] != '/' || !fs::exists(p, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sandbox-read-only: '", p, "' is not an absolute path that exists on this machine"));
    }
    policy.read_only.push_back(p);
  }

  // The /etc/passwd and /etc/group ranks see: root, the rank's user, nobody.
  // One directory per worker process: workers may share a work dir.
  const std::string dir =
      absl::StrCat(fs::absolute(options.work_dir, ec).string(), "/sandbox-", ::getpid());
  fs::create_directories(dir, ec);
  const uid_t rank_uid = policy.run_as_user ? policy.uid : ::geteuid();
  const gid_t rank_gid = policy.run_as_user ? policy.gid : ::getegid();
  std::map<uid_t, std::string> users = {{0, "root"}, {65534, "nobody"}};
  std::map<gid_t, std::string> groups = {{0, "root"}, {65534, "nogroup"}};
  if (const passwd* pw = ::getpwuid(rank_uid)) users[rank_uid] = pw->pw_name;
  if (!users.count(rank_uid)) users[rank_uid] = "rank";
  if (const group* gr = ::getgrgid(rank_gid)) groups[rank_gid] = gr->gr_name;
  if (!groups.count(rank_gid)) groups[rank_gid] = "rank";
  std::string passwd_text, group_text;
  for (const auto& [uid, name] : users) {
    const gid_t gid = uid == rank_uid ? rank_gid : uid;
    absl::StrAppend(&passwd_text, name, ":x:", uid, ":", gid, ":", name,
                    ":/nonexistent:/usr/sbin/nologin\n");
  }
  for (const auto& [gid, name] : groups) absl::StrAppend(&group_text, name, ":x:", gid, ":\n");
  policy.passwd_file = dir + "/passwd";
  policy.group_file = dir + "/group";
  policy.seccomp_file = dir + "/seccomp.bpf";
  if (absl::Status written = WriteRankSeccompFilter(policy.seccomp_file); !written.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(written.message(), give_up));
  }
  for (const auto& [path, text] :
       {std::pair{policy.passwd_file, passwd_text}, std::pair{policy.group_file, group_text}}) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      return absl::FailedPreconditionError(
          absl::StrCat("the trial sandbox cannot write ", path, give_up));
    }
    ::chmod(path.c_str(), 0644);
  }

  std::unique_ptr<Sandbox> sandbox(new Sandbox(std::move(policy)));
  std::vector<std::vector<std::string>> checks = {{"/usr/bin/true"}};
  checks.insert(checks.end(), options.checks.begin(), options.checks.end());
  for (const std::vector<std::string>& check : checks) {
    if (absl::Status s = sandbox->Check(check); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the trial sandbox does not work on this machine: ", s.message(),
          ". bubblewrap needs user namespaces (sysctl kernel.unprivileged_userns_clone=1) or a "
          "worker running as root; give the sandbox what this command needs with "
          "--sandbox-read-only PATH",
          give_up));
    }
  }
  return sandbox;
}

absl::Status Sandbox::Check(const std::vector<std::string>& command) const {
  // What a rank does, in a trial directory of its own.
  std::error_code ec;
  const std::string trial_dir =
      absl::StrCat(fs::path(policy_.passwd_file).parent_path().string(), "/check");
  fs::remove_all(trial_dir, ec);
  fs::create_directories(trial_dir, ec);
  RETURN_IF_ERROR(GiveToRank(trial_dir));
  RankMounts mounts;
  mounts.trial_dir = trial_dir;
  // A program the command is about (`test -x RUNNER`) is bound as it would
  // be for a rank that runs it.
  for (size_t i = 1; i < command.size(); ++i) {
    if (!command[i].empty() && command[i][0] == '/' && fs::exists(command[i], ec)) {
      const std::vector<std::string> paths = ExecutablePaths(command[i]);
      mounts.read_only.insert(mounts.read_only.end(), paths.begin(), paths.end());
    }
  }
  SpawnOptions spawn;
  spawn.stdout_path = trial_dir + ".log";
  spawn.stderr_path = spawn.stdout_path;
  const std::vector<std::string> argv = Wrap(command, mounts, &spawn);
  absl::StatusOr<pid_t> pid = SpawnChild(argv, spawn);
  int status = 0;
  if (pid.ok()) {
    ChildWatch watch;
    watch.deadline = absl::Now() + kCheckTimeout;
    watch.poll_interval = absl::Milliseconds(10);
    watch.grace = absl::Seconds(1);
    status = WatchChild(*pid, watch).wait_status;
  }
  fs::remove_all(trial_dir, ec);
  // The loader's trace (LD_TRACE_LOADED_OBJECTS) exits 0 with "not found".
  const bool missing_library =
      absl::StrContains(TailOfFile(spawn.stdout_path, 200), "=> not found");
  if (pid.ok() && WIFEXITED(status) && WEXITSTATUS(status) == 0 && !missing_library) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "`", absl::StrJoin(command, " "), "` in the sandbox ",
      pid.ok() ? HowChildEnded(RankWaitStatus(status)) : std::string(pid.status().message()), ": ",
      TailOfLog(spawn.stdout_path)));
}

absl::Status Sandbox::GiveToRank(const std::string& dir) const {
  if (!policy_.run_as_user) return absl::OkStatus();
  auto give = [this](const fs::path& p) -> absl::Status {
    if (::lchown(p.c_str(), policy_.uid, policy_.gid) != 0) {
      return absl::InternalError(absl::StrCat("cannot give ", p.string(), " to the rank's user ",
                                              policy_.uid, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(give(dir));
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    RETURN_IF_ERROR(give(it->path()));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

std::vector<std::string> Sandbox::Wrap(const std::vector<std::string>& command, RankMounts mounts,
                                       SpawnOptions* spawn) const {
  std::vector<std::string> argv = command;
  if (!argv.empty()) {
    if (absl::StatusOr<std::string> found = FindExecutable(argv[0]); found.ok()) {
      argv[0] = fs::absolute(*found).string();
    }
    std::vector<std::string> paths;
    {
      absl::MutexLock lock(&shm_->mu);
      auto it = shm_->executables.find(argv[0]);
      if (it == shm_->executables.end()) {
        it = shm_->executables.emplace(argv[0], ExecutablePaths(argv[0])).first;
      }
      paths = it->second;
    }
    mounts.read_only.insert(mounts.read_only.end(), paths.begin(), paths.end());
  }
  const std::vector<std::string> devices = AcceleratorDeviceNodes();
  mounts.devices.insert(mounts.devices.end(), devices.begin(), devices.end());
  spawn->new_session = true;
  spawn->ignored_signals.assign(std::begin(kStopSignals), std::end(kStopSignals));
  if (!policy_.seccomp_file.empty()) {
    spawn->input_file = policy_.seccomp_file;
    spawn->input_fd = kSeccompFd;
  }
  return BubblewrapArgv(policy_, mounts, argv);
}

std::string Sandbox::AcquireShm(const std::string& trial_key) const {
  const std::string path = absl::StrCat("/dev/shm/autoaccel-", ::getpid(), "-", trial_key);
  absl::MutexLock lock(&shm_->mu);
  int& users = shm_->users[trial_key];
  if (users == 0) {
    std::error_code ec;
    if (!fs::is_directory("/dev/shm", ec) || ::mkdir(path.c_str(), 0700) != 0 ||
        !GiveToRank(path).ok()) {
      shm_->users.erase(trial_key);
      return "";
    }
  }
  ++users;
  return path;
}

void Sandbox::ReleaseShm(const std::string& trial_key) const {
  absl::MutexLock lock(&shm_->mu);
  auto it = shm_->users.find(trial_key);
  if (it == shm_->users.end() || --it->second > 0) return;
  shm_->users.erase(it);
  std::error_code ec;
  fs::remove_all(absl::StrCat("/dev/shm/autoaccel-", ::getpid(), "-", trial_key), ec);
}

}  // namespace autoaccel
