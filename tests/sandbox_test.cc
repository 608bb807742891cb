// The trial sandbox (worker/sandbox.h): the bwrap command it builds, and
// real ranks in it — shell-script trial runners and Python launcher scripts
// that try to read and write outside their trial directory, are stopped,
// crash and use memory — each beside the same rank without the sandbox, so
// that every test fails if the sandbox stops protecting.
#include "worker/sandbox.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model_test_util.h"
#include "tests/subprocess.h"
#include "worker/launcher_cache.h"
#include "worker/launcher_trial.h"
#include "worker/trial_process.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// The index of `value` in `argv` at or after `from`; argv.size() if absent.
size_t Find(const std::vector<std::string>& argv, const std::string& value, size_t from = 0) {
  return std::find(argv.begin() + from, argv.end(), value) - argv.begin();
}

// True when argv holds `a` immediately followed by `b` and `c`.
bool HasTriple(const std::vector<std::string>& argv, const std::string& a, const std::string& b,
               const std::string& c) {
  for (size_t i = 0; i + 2 < argv.size(); ++i) {
    if (argv[i] == a && argv[i + 1] == b && argv[i + 2] == c) return true;
  }
  return false;
}

SandboxPolicy TestPolicy(bool as_user) {
  SandboxPolicy p;
  p.bwrap = "/usr/bin/bwrap";
  p.env = "/usr/bin/env";
  p.setpriv = "/usr/bin/setpriv";
  p.run_as_user = as_user;
  p.uid = 65534;
  p.gid = 65534;
  p.root_links = {{"/bin", "usr/bin"}, {"/lib", "usr/lib"}};
  p.read_only = {"/usr", "/etc/ld.so.cache"};
  p.passwd_file = "/w/sandbox/passwd";
  p.group_file = "/w/sandbox/group";
  return p;
}

TEST(BubblewrapArgvTest, OnlyTheTrialDirectoryIsWritableAndTheHostIsBoundPathByPath) {
  RankMounts m;
  m.trial_dir = "/w/t1-a1-r0";
  m.read_only = {"/w/models/sha256-ab.pt", "/opt/runner/bin/autoaccel-trial", "/opt/runner"};
  m.devices = {"/dev/nvidia0", "/dev/nvidiactl"};
  const std::vector<std::string> argv =
      BubblewrapArgv(TestPolicy(false), m, {"/opt/runner/bin/autoaccel-trial", "--spec", "x"});
  ASSERT_FALSE(argv.empty());
  EXPECT_EQ(argv[0], "/usr/bin/bwrap");
  for (const char* flag : {"--die-with-parent", "--unshare-pid", "--unshare-ipc"}) {
    EXPECT_LT(Find(argv, flag), argv.size()) << flag;
  }
  EXPECT_EQ(Find(argv, "--unshare-net"), argv.size()) << "ranks meet over TCP";
  EXPECT_EQ(Find(argv, "--new-session"), argv.size()) << "it would leave the process group";
  // Nothing binds / itself; the system and the rank's paths read-only; the
  // trial directory read-write, after the /tmp tmpfs (which would hide it).
  EXPECT_FALSE(HasTriple(argv, "--ro-bind", "/", "/"));
  EXPECT_FALSE(HasTriple(argv, "--bind", "/", "/"));
  EXPECT_TRUE(HasTriple(argv, "--ro-bind", "/usr", "/usr"));
  EXPECT_TRUE(HasTriple(argv, "--symlink", "usr/bin", "/bin"));
  EXPECT_TRUE(HasTriple(argv, "--ro-bind", "/w/models/sha256-ab.pt", "/w/models/sha256-ab.pt"));
  EXPECT_TRUE(HasTriple(argv, "--ro-bind", "/opt/runner", "/opt/runner"));
  EXPECT_FALSE(HasTriple(argv, "--ro-bind", "/opt/runner/bin/autoaccel-trial",
                         "/opt/runner/bin/autoaccel-trial"))
      << "inside /opt/runner, bound already";
  EXPECT_TRUE(HasTriple(argv, "--bind", "/w/t1-a1-r0", "/w/t1-a1-r0"));
  EXPECT_FALSE(HasTriple(argv, "--bind", "/w", "/w")) << "the rest of the work dir stays out";
  EXPECT_TRUE(HasTriple(argv, "--ro-bind", "/w/sandbox/passwd", "/etc/passwd"));
  EXPECT_LT(Find(argv, "/etc"), Find(argv, "/etc/ld.so.cache"))
      << "/etc is made 0755 before its files are bound: the rank's user reads them";
  EXPECT_TRUE(HasTriple(argv, "--dev-bind-try", "/dev/nvidia0", "/dev/nvidia0"));
  EXPECT_LT(Find(argv, "/tmp"), Find(argv, "/w/t1-a1-r0"));
  // The work dir's own directory is made passable (0755), not bound.
  EXPECT_TRUE(HasTriple(argv, "--perms", "0755", "--dir") && Find(argv, "/w") < argv.size());
  EXPECT_TRUE(HasTriple(argv, "--chdir", "/w/t1-a1-r0", "--setenv"));
  EXPECT_TRUE(HasTriple(argv, "--setenv", "HOME", "/w/t1-a1-r0"));
  // Not as root: no setpriv; env gives the command back SIGTERM and SIGINT.
  EXPECT_EQ(Find(argv, "/usr/bin/setpriv"), argv.size());
  const size_t env = Find(argv, "/usr/bin/env");
  ASSERT_LT(env + 3, argv.size());
  EXPECT_EQ(argv[env + 1], "--default-signal=TERM,INT");
  EXPECT_EQ(std::vector<std::string>(argv.begin() + env + 3, argv.end()),
            (std::vector<std::string>{"/opt/runner/bin/autoaccel-trial", "--spec", "x"}));
}

TEST(BubblewrapArgvTest, AsRootTheRankDropsToItsUserWithNoCapabilitiesInside) {
  RankMounts m;
  m.trial_dir = "/w/t1-a1-r0";
  const std::vector<std::string> argv = BubblewrapArgv(TestPolicy(true), m, {"/usr/bin/true"});
  const size_t setpriv = Find(argv, "/usr/bin/setpriv");
  ASSERT_LT(setpriv, argv.size());
  EXPECT_LT(setpriv, Find(argv, "/usr/bin/env")) << "env runs as the user";
  for (const char* arg : {"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                          "--bounding-set=-all", "--no-new-privs"}) {
    EXPECT_LT(Find(argv, arg, setpriv), argv.size()) << arg;
  }
}

TEST(BubblewrapArgvTest, APathThroughALinkIsBoundAtTheLinkAndAtItsTarget) {
  const std::string dir = testing::MakeTempDir("autoaccel-sandbox-links-");
  fs::create_directories(dir + "/real/venv");
  fs::create_directory_symlink(dir + "/real/venv", dir + "/venv");
  RankMounts m;
  m.trial_dir = dir + "/work/t";
  m.read_only = {dir + "/venv", dir + "/work/t/strategy.json"};
  const std::vector<std::string> argv = BubblewrapArgv(TestPolicy(false), m, {"/usr/bin/true"});
  EXPECT_TRUE(HasTriple(argv, "--ro-bind", dir + "/real/venv", dir + "/real/venv"));
  EXPECT_TRUE(HasTriple(argv, "--ro-bind", dir + "/real/venv", dir + "/venv"));
  EXPECT_EQ(Find(argv, dir + "/work/t/strategy.json"), argv.size())
      << "inside the trial directory, bound with it";
  fs::remove_all(dir);
}

TEST(ExecutablePathsTest, ABuildTreesBinaryIsBoundAloneAndAPythonWithItsPrefix) {
  const std::string dir = testing::MakeTempDir("autoaccel-sandbox-exe-");
  fs::create_directories(dir + "/build/bin");
  fs::create_directories(dir + "/build/tests/outside");
  fs::copy_file("/usr/bin/true", dir + "/build/bin/autoaccel-trial");
  EXPECT_EQ(ExecutablePaths(dir + "/build/bin/autoaccel-trial"),
            std::vector<std::string>{dir + "/build/bin/autoaccel-trial"})
      << "not the build tree beside it";
  fs::create_directories(dir + "/py/bin");
  fs::create_directories(dir + "/py/lib/python3.11");
  fs::copy_file("/usr/bin/true", dir + "/py/bin/python3");
  EXPECT_THAT(ExecutablePaths(dir + "/py/bin/python3"), ::testing::Contains(dir + "/py"));
  fs::remove_all(dir);
}

TEST(RankWaitStatusTest, BwrapsExitCodeForASignalReadsAsThatSignal) {
  const int killed = RankWaitStatus(W_EXITCODE(128 + SIGKILL, 0));
  EXPECT_TRUE(WIFSIGNALED(killed));
  EXPECT_EQ(WTERMSIG(killed), SIGKILL);
  EXPECT_TRUE(EndedFromOutside(killed));
  EXPECT_EQ(HowChildEnded(RankWaitStatus(W_EXITCODE(128 + SIGSEGV, 0))),
            "was killed by signal 11 (Segmentation fault)");
  EXPECT_EQ(HowChildEnded(RankWaitStatus(W_EXITCODE(3, 0))), "exited with code 3");
  EXPECT_EQ(HowChildEnded(RankWaitStatus(W_EXITCODE(0, SIGTERM))),
            "was killed by signal 15 (Terminated)");
}

// Real ranks: a work dir with another trial's file and a model file in it,
// and a secret and a victim file outside it, in the test's own directory.
class SandboxedRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-sandbox-");
    ::chmod(dir_.c_str(), 0755);
    work_ = dir_ + "/work";
    fs::create_directories(work_ + "/models");
    fs::create_directories(work_ + "/other-trial-a1-r0");
    testing::WriteFile(dir_ + "/secret.txt", "the host's secret\n");
    testing::WriteFile(dir_ + "/victim.txt", "untouched\n");
    testing::WriteFile(work_ + "/other-trial-a1-r0/their.txt", "another trial's file\n");
    testing::WriteFile(work_ + "/models/mine.pt", "my model\n");
    testing::WriteFile(work_ + "/models/theirs.pt", "their model\n");
    SandboxOptions options;
    options.work_dir = work_;
    absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(options);
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = std::move(*sandbox);
    spec_.trial_id = "t1";
    spec_.model_file = work_ + "/models/mine.pt";
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrialProcessOptions Runner(const std::string& body, bool sandboxed) {
    const std::string path = absl::StrCat(dir_, "/runner", ++scripts_, ".sh");
    testing::WriteFile(path, "#!/bin/sh\n" + body + "\n");
    ::chmod(path.c_str(), 0755);
    TrialProcessOptions options;
    options.runner_path = path;
    options.work_dir = work_;
    options.timeout = absl::Seconds(20);
    options.sandbox = sandboxed ? sandbox_.get() : nullptr;
    return options;
  }
  std::string TrialFile(const std::string& name) {
    return TrialProcessDir(spec_, work_) + "/" + name;
  }

  std::string dir_, work_;
  int scripts_ = 0;
  std::unique_ptr<Sandbox> sandbox_;
  TrialSpec spec_;
};

// Each attempt's outcome lands in a file of the trial directory ($2 is its
// spec.json): "ok" or "refused". `system`: also try to write /usr (only
// where the sandbox stops it: an unsandboxed root rank would succeed).
std::string TryEverything(const std::string& dir, const std::string& work, bool system) {
  return absl::StrCat(R"SH(cd "$(dirname "$2")"
try() { name=$1; shift; if "$@" > /dev/null 2>&1; then echo ok > $name; else echo refused > $name; fi; }
try read-secret cat )SH",
                      dir, R"SH(/secret.txt
try write-victim sh -c 'echo pwned > )SH",
                      dir, R"SH(/victim.txt'
try read-other-trial cat )SH",
                      work, R"SH(/other-trial-a1-r0/their.txt
try read-other-model cat )SH",
                      work, R"SH(/models/theirs.pt
try read-shadow cat /etc/shadow
try read-model cat )SH",
                      work, R"SH(/models/mine.pt
try write-trial-dir sh -c 'echo mine > mine.txt'
try write-tmp sh -c 'echo scratch > /tmp/scratch'
id -u > uid
id -un > user
)SH",
                      system ? "try write-usr touch /usr/pwned-by-a-rank\n" : "", "exit 3");
}

TEST_F(SandboxedRankTest, ARunnerReadsAndWritesOnlyItsTrialDirectoryAndModel) {
  TrialResult r = RunTrialProcess(spec_, Runner(TryEverything(dir_, work_, true), true));
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_THAT(r.error, HasSubstr("exited with code 3"));
  EXPECT_FALSE(r.infrastructure) << r.error;
  EXPECT_EQ(testing::ReadFile(TrialFile("read-secret")), "refused\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("write-victim")), "refused\n");
  EXPECT_EQ(testing::ReadFile(dir_ + "/victim.txt"), "untouched\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("read-other-trial")), "refused\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("read-other-model")), "refused\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("read-shadow")), "refused\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("write-usr")), "refused\n");
  EXPECT_FALSE(fs::exists("/usr/pwned-by-a-rank"));
  EXPECT_EQ(testing::ReadFile(TrialFile("read-model")), "ok\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("write-trial-dir")), "ok\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("mine.txt")), "mine\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("write-tmp")), "ok\n");
  if (::geteuid() == 0) {
    EXPECT_EQ(testing::ReadFile(TrialFile("uid")), "65534\n") << "a root worker's rank is nobody";
    EXPECT_EQ(testing::ReadFile(TrialFile("user")), "nobody\n") << "/etc/passwd names it";
  } else {
    EXPECT_EQ(testing::ReadFile(TrialFile("uid")), absl::StrCat(::geteuid(), "\n"));
  }
}

TEST_F(SandboxedRankTest, WithoutTheSandboxTheSameRunnerReachesTheHost) {
  TrialResult r = RunTrialProcess(spec_, Runner(TryEverything(dir_, work_, false), false));
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_EQ(testing::ReadFile(TrialFile("read-secret")), "ok\n");
  EXPECT_EQ(testing::ReadFile(TrialFile("read-other-trial")), "ok\n");
  EXPECT_EQ(testing::ReadFile(dir_ + "/victim.txt"), "pwned\n");
}

// The seccomp filter (worker/seccomp_filter.h): calls a rank never needs
// answer EPERM inside the sandbox; the same runner outside it is traced
// fine (the test can fail).
TEST_F(SandboxedRankTest, SystemCallsARankNeverNeedsAreRefused) {
  const std::string probe = R"SH(cd "$(dirname "$2")"
python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(f, *a):
    return "ok" if f(*a) != -1 else os.strerror(ctypes.get_errno())
print("ptrace", call(libc.ptrace, 0, 0, None, None))
print("unshare-user", call(libc.unshare, 0x10000000))
print("add_key", call(libc.syscall, {"x86_64": 248, "aarch64": 217}[os.uname().machine],
                      b"user", b"k", b"v", 1, -2))
' > syscalls 2>&1
exit 3)SH";
  RunTrialProcess(spec_, Runner(probe, true));
  const std::string inside = testing::ReadFile(TrialFile("syscalls"));
  EXPECT_THAT(inside, HasSubstr("ptrace Operation not permitted")) << inside;
  EXPECT_THAT(inside, HasSubstr("unshare-user Operation not permitted")) << inside;
  EXPECT_THAT(inside, HasSubstr("add_key Operation not permitted")) << inside;
  RunTrialProcess(spec_, Runner(probe, false));
  EXPECT_THAT(testing::ReadFile(TrialFile("syscalls")), HasSubstr("ptrace ok"));
}

TEST_F(SandboxedRankTest, CancellingStopsTheRankWithSigtermAndNothingOfItSurvives) {
  std::atomic<bool> cancel{false};
  TrialProcessOptions options = Runner(R"SH(cd "$(dirname "$2")"
trap 'echo term > got-term; exit 0' TERM
(sleep 3; touch grandchild-survived) &
sleep 30 &
wait)SH",
                                       true);
  options.should_cancel = [&] { return cancel.load(); };
  std::thread([&] {
    absl::SleepFor(absl::Milliseconds(700));
    cancel = true;
  }).detach();
  const absl::Time start = absl::Now();
  TrialResult r = RunTrialProcess(spec_, options);
  EXPECT_EQ(r.status, TrialStatus::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(testing::ReadFile(TrialFile("got-term")), "term\n")
      << "SIGTERM reached the rank's own process through bwrap";
  absl::SleepFor(absl::Seconds(3));
  EXPECT_FALSE(fs::exists(TrialFile("grandchild-survived")));
}

TEST_F(SandboxedRankTest, ACrashAndAKillReadAsTheRanksOwnSignals) {
  TrialResult segv = RunTrialProcess(spec_, Runner("kill -SEGV $$", true));
  EXPECT_THAT(segv.error, HasSubstr("was killed by signal 11"));
  EXPECT_FALSE(segv.infrastructure);
  TrialResult killed = RunTrialProcess(spec_, Runner("kill -KILL $$", true));
  EXPECT_THAT(killed.error, HasSubstr("was killed by signal 9"));
  EXPECT_TRUE(killed.infrastructure);
}

// A launcher script (standard-library Python) that reports its steps and, in
// mode "escape", first tries to read the secret and write the victim; in
// "rss" holds 200 MiB; in "term" waits for SIGTERM and records it.
constexpr char kScript[] = R"PY(
import json, os, signal, sys, time
mode = sys.argv[1]
secret, victim = SECRET, VICTIM  # set by the test: not in argv, whose directories are bound
trial = os.environ["AUTOACCEL_TRIAL_DIR"]
def attempt(name, fn):
    try:
        fn()
        result = "ok"
    except OSError as e:
        result = "refused: " + e.strerror
    with open(os.path.join(trial, name), "w") as f:
        f.write(result)
def steps(n):
    with open(os.environ["AUTOACCEL_METRICS_FILE"], "a") as m:
        for i in range(n):
            m.write(json.dumps({"event": "step", "step": i + 1, "step_time_s": 0.01,
                                "tokens": 8, "loss": 1.0}) + "\n")
            m.flush()
if mode == "escape":
    attempt("read-secret", lambda: open(secret).read())
    attempt("write-victim", lambda: open(victim, "w").write("pwned by the script\n"))
    steps(7)
elif mode == "rss":
    hog = bytearray(200 << 20)
    for i in range(0, len(hog), 4096):
        hog[i] = 1
    time.sleep(30)
elif mode == "cache":
    # What a JIT build does: look for the built op, build it when missing.
    ext = os.environ["TORCH_EXTENSIONS_DIR"]
    os.makedirs(ext, exist_ok=True)
    built = os.path.join(ext, "op.so")
    with open(os.path.join(trial, "cache-was"), "w") as f:
        f.write("warm" if os.path.exists(built) else "cold")
    open(built, "a").write(os.environ["AUTOACCEL_TRIAL_ID"] + "\n")
    steps(7)
elif mode == "term":
    def on_term(*_):
        time.sleep(0.5)  # inside the grace period
        open(os.path.join(trial, "got-term"), "w").write("term")
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    time.sleep(30)
)PY";

class SandboxedLauncherTest : public SandboxedRankTest {
 protected:
  LauncherRank Rank(const std::string& mode) {
    fs::create_directories(dir_ + "/scripts");
    testing::WriteFile(dir_ + "/scripts/train.py",
                       absl::StrCat("SECRET = '", dir_, "/secret.txt'\nVICTIM = '", dir_,
                                    "/victim.txt'\n", kScript));
    LauncherRank rank;
    rank.spec = spec_;
    rank.spec.model = testing::TinyModelSpec("llama");
    rank.spec.seq_len = 4;
    rank.spec.global_batch_size = 2;
    rank.launcher.name = "py";
    rank.launcher.argv = {"{python}", dir_ + "/scripts/train.py", mode};
    return rank;
  }
  LauncherTrialOptions Options(bool sandboxed) {
    LauncherTrialOptions options;
    options.work_dir = work_;
    options.python = "/usr/bin/python3";
    options.timeout = absl::Seconds(20);
    options.grace = absl::Seconds(3);
    options.sandbox = sandboxed ? sandbox_.get() : nullptr;
    return options;
  }
  std::string RankFile(const LauncherRank& rank, const std::string& name) {
    return LauncherTrialDir(rank, work_) + "/" + name;
  }
};

TEST_F(SandboxedLauncherTest, AScriptCannotReadOrWriteOutsideItsTrialDirectoryButStillRuns) {
  ASSERT_EQ(::access("/usr/bin/python3", X_OK), 0) << "Debian's python3 (scripts/setup)";
  LauncherRank rank = Rank("escape");
  TrialResult r = RunLauncherRank(rank, Options(true));
  EXPECT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_EQ(r.metrics.measured_steps, 5);
  EXPECT_THAT(testing::ReadFile(RankFile(rank, "read-secret")), HasSubstr("refused"));
  EXPECT_THAT(testing::ReadFile(RankFile(rank, "write-victim")), HasSubstr("refused"));
  EXPECT_EQ(testing::ReadFile(dir_ + "/victim.txt"), "untouched\n");

  TrialResult open = RunLauncherRank(rank, Options(false));
  EXPECT_EQ(open.status, TrialStatus::kSucceeded) << open.error;
  EXPECT_EQ(testing::ReadFile(RankFile(rank, "read-secret")), "ok");
  EXPECT_EQ(testing::ReadFile(dir_ + "/victim.txt"), "pwned by the script\n");
}

TEST_F(SandboxedLauncherTest, TheRanksMemoryIsMeasuredAndItsStopKeepsTheGracePeriod) {
  LauncherRank hog = Rank("rss");
  hog.spec.memory_limit_bytes = 64 << 20;
  TrialResult r = RunLauncherRank(hog, Options(true));
  EXPECT_EQ(r.status, TrialStatus::kOom) << r.error;
  EXPECT_THAT(r.error, HasSubstr("more than the device's 64.0 MiB"));
  EXPECT_GT(r.metrics.peak_rss_bytes, 64 << 20) << "the python inside bwrap was measured";

  LauncherRank term = Rank("term");
  LauncherTrialOptions options = Options(true);
  options.timeout = absl::Seconds(2);
  TrialResult stopped = RunLauncherRank(term, options);
  EXPECT_EQ(stopped.status, TrialStatus::kTimeout) << stopped.error;
  EXPECT_EQ(testing::ReadFile(RankFile(term, "got-term")), "term")
      << "the script's SIGTERM handler ran to its end";
}

TEST_F(SandboxedLauncherTest, ALaunchersTrialsShareItsCacheAcrossTrialsAndNothingElseOfIt) {
  LauncherTrialOptions options = Options(true);
  options.cache.root = dir_ + "/cache";
  LauncherRank first = Rank("cache");
  TrialResult r = RunLauncherRank(first, options);
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_EQ(testing::ReadFile(RankFile(first, "cache-was")), "cold");
  // A later trial (another job's) finds what the first one built.
  LauncherRank second = Rank("cache");
  second.spec.trial_id = "t2";
  r = RunLauncherRank(second, options);
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_EQ(testing::ReadFile(RankFile(second, "cache-was")), "warm");
  EXPECT_EQ(testing::ReadFile(dir_ + "/cache/py/torch_extensions/op.so"), "t1\nt2\n");

  // The cache off: each trial builds afresh in its own directory.
  LauncherTrialOptions off = Options(true);
  LauncherRank third = Rank("cache");
  third.spec.trial_id = "t3";
  third.launcher.env = {{"TORCH_EXTENSIONS_DIR", "/tmp/ext"}};
  r = RunLauncherRank(third, off);
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_EQ(testing::ReadFile(RankFile(third, "cache-was")), "cold");
}

TEST(LauncherCacheTest, EachCacheVariableNamesItsDirectoryUnlessTheLauncherSetsIt) {
  const auto vars = LauncherCacheEnvironment("/c/hf", false, {{"TRITON_CACHE_DIR", "/mine"}});
  std::map<std::string, std::string> by_name(vars.begin(), vars.end());
  EXPECT_EQ(by_name["TORCH_EXTENSIONS_DIR"], "/c/hf/torch_extensions");
  EXPECT_EQ(by_name["TORCHINDUCTOR_CACHE_DIR"], "/c/hf/torchinductor");
  EXPECT_EQ(by_name.count("TRITON_CACHE_DIR"), 0u) << "the launcher's own value stands";
  EXPECT_EQ(by_name.count("HF_HOME"), 0u) << "only when the operator allows it";
  const auto with_hf = LauncherCacheEnvironment("/c/hf", true, {});
  EXPECT_THAT(with_hf,
              Contains(std::pair<std::string, std::string>("HF_HOME", "/c/hf/huggingface")));
  EXPECT_TRUE(LauncherCacheEnvironment("", true, {}).empty()) << "the cache off";
}

TEST(SandboxCreateTest, ARelativeOrMissingReadOnlyPathIsRefused) {
  const std::string dir = testing::MakeTempDir("autoaccel-sandbox-create-");
  SandboxOptions options;
  options.work_dir = dir;
  options.read_only = {"relative/path"};
  absl::StatusOr<std::unique_ptr<Sandbox>> s = Sandbox::Create(options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("--sandbox-read-only: 'relative/path'"));
  options.read_only = {};
  options.checks = {{"/bin/sh", "-c", "cat /etc/shadow"}};
  s = Sandbox::Create(options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("--no-sandbox"));
  fs::remove_all(dir);
}

// The worker binary: on by default, refused without bwrap, documented.
TEST(SandboxWorkerBinaryTest, AWorkerThatCannotSandboxRefusesToStartSayingWhatToDo) {
  const std::string dir = testing::MakeTempDir("autoaccel-sandbox-bin-");
  std::string out, err;
  const int code = testing::RunCommand(
      {"/usr/bin/env", "PATH=/nonexistent", AUTOACCEL_WORKER_BIN, "--coordinator", "127.0.0.1:1",
       "--work-dir", dir, "--peak-tflops", "bf16=1", "--trial-runner", "/usr/bin/true"},
      dir, &out, &err, absl::Seconds(30));
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_THAT(err, HasSubstr("apt-get install bubblewrap"));
  EXPECT_THAT(err, HasSubstr("--no-sandbox"));
  const int help =
      testing::RunCommand({AUTOACCEL_WORKER_BIN, "--help"}, dir, &out, &err, absl::Seconds(30));
  EXPECT_EQ(help, 0);
  EXPECT_THAT(out, HasSubstr("--no-sandbox"));
  EXPECT_THAT(out, HasSubstr("--sandbox-user"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace autoaccel
