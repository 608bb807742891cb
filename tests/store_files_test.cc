// The database file itself: a damaged, foreign or garbage file is refused
// at start naming the file and the problem; a file deleted or replaced under
// a running store stops every write with an error instead of writing to an
// unlinked inode; and a backup taken while another connection writes is a
// complete, consistent database.
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/store.h"
#include "server/store/store_backup.h"
#include "server/store/store_schema.h"  // kCurrentSchemaVersion
#include "tests/test_matchers.h"
#ifdef AUTOACCEL_SERVER_BIN
#include "tests/subprocess.h"
#endif

namespace autoaccel {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "store_files.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

JobRecord Job(const std::string& id, int n) {
  JobRecord job;
  job.job_id = id;
  job.created_at = absl::FromUnixSeconds(1'700'000'000 + n);
  job.request_json = std::string(2000, 'r');  // a few rows per page: a file of many pages
  return job;
}

// A store at `path` with `jobs` jobs, closed again.
void MakeDatabase(const std::string& path, int jobs) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < jobs; ++i) {
    ASSERT_TRUE((*store)->CreateJob(Job(absl::StrCat("job-", i), i)).ok());
  }
}

// Runs `sql` on the file directly.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

absl::Status OpenStatus(const std::string& path) { return Store::Open(path).status(); }

TEST(StoreFilesTest, RandomBytesAreRefusedNamingTheFile) {
  TempDir dir;
  const std::string path = dir.File("random.db");
  WriteBytes(path, RandomBytes(64 << 10, 1));
  const absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("not a database")));
  EXPECT_EQ(Bytes(path).size(), size_t{64} << 10);  // untouched
}

TEST(StoreFilesTest, ATruncatedDatabaseIsRefusedAsDamagedNamingTheFile) {
  TempDir dir;
  const std::string path = dir.File("truncated.db");
  MakeDatabase(path, 300);
  const std::string whole = Bytes(path);
  ASSERT_GT(whole.size(), 200000u);
  WriteBytes(path, whole.substr(0, whole.size() / 2));
  const absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("is damaged"), HasSubstr("backup")));
}

TEST(StoreFilesTest, ADatabaseWithOverwrittenPagesIsRefusedAsDamaged) {
  TempDir dir;
  const std::string path = dir.File("scribbled.db");
  MakeDatabase(path, 300);
  std::string bytes = Bytes(path);
  // Pages 3 onwards (the header and the schema page stay readable).
  bytes.replace(2 * 4096, 64 << 10, RandomBytes(64 << 10, 2));
  WriteBytes(path, bytes);
  const absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("is damaged")));
}

TEST(StoreFilesTest, AnotherApplicationsDatabaseIsRefusedAndLeftAsItWas) {
  TempDir dir;
  const std::string path = dir.File("places.sqlite");
  RawExec(path,
          "CREATE TABLE moz_places (id INTEGER, url TEXT); INSERT INTO moz_places VALUES "
          "(1, 'https://example.org')");
  const std::string before = Bytes(path);
  const absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("not an autoaccel database"),
                                HasSubstr("moz_places")));
  EXPECT_EQ(Bytes(path), before);

  // With a schema version but not our tables.
  const std::string versioned = dir.File("versioned.sqlite");
  RawExec(versioned, "CREATE TABLE jobs (x); PRAGMA user_version = 3");
  EXPECT_THAT(Message(OpenStatus(versioned)),
              AllOf(HasSubstr("not an autoaccel database"), HasSubstr("but no trials table")));

  // Marked as another application's, even with no table yet.
  const std::string marked = dir.File("marked.sqlite");
  RawExec(marked, "PRAGMA application_id = 1179012100");
  EXPECT_THAT(Message(OpenStatus(marked)),
              AllOf(HasSubstr(marked), HasSubstr("application_id is 1179012100")));
}

TEST(StoreFilesTest, OurOwnFilesAreMarkedAndOpenAgain) {
  TempDir dir;
  const std::string path = dir.File("own.db");
  MakeDatabase(path, 1);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(stmt, 0), 0x61616363);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<Store>> again = Store::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->GetJob("job-0").ok());
}

TEST(StoreFilesTest, AFileDeletedUnderARunningStoreFailsEveryWriteNamingIt) {
  TempDir dir;
  const std::string path = dir.File("live.db");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateJob(Job("before", 0)).ok());
  std::filesystem::remove(path);
  absl::Status s = (*store)->CreateJob(Job("after", 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("was deleted"), HasSubstr("Restart")));
  JobRecord job = Job("before", 0);
  job.status_message = "changed";
  EXPECT_EQ((*store)->UpdateJob(job).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*store)->UpsertTrials({}).code(), absl::StatusCode::kFailedPrecondition);
  job.state = JobState::kFailed;
  EXPECT_EQ((*store)->FinishJob(job, std::nullopt).code(), absl::StatusCode::kFailedPrecondition);
}

// Health (what /readyz reports): a deleted file, and a disk with too little
// room, each say so without a write being tried.
TEST(StoreFilesTest, HealthSaysWhenTheFileIsGoneOrTheDiskIsFull) {
  TempDir dir;
  const std::string path = dir.File("health.db");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->Health().ok());
  std::filesystem::remove(path);
  const absl::Status gone = (*store)->Health();
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(gone), HasSubstr("was deleted"));

  // A 4 MiB file system: less room than a store needs to go on.
  const std::string small = dir.File("small");
  std::filesystem::create_directories(small);
  if (::geteuid() != 0 ||
      std::system(
          absl::StrCat("mount -t tmpfs -o size=4m tmpfs ", small, " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "mounting a small tmpfs needs root";
  }
  {
    absl::StatusOr<std::unique_ptr<Store>> tight = Store::Open(small + "/tight.db");
    ASSERT_TRUE(tight.ok()) << tight.status();
    const absl::Status full = (*tight)->Health();
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(Message(full), AllOf(HasSubstr("tight.db"), HasSubstr("is full")));
  }
  EXPECT_EQ(std::system(absl::StrCat("umount ", small).c_str()), 0);
}

TEST(StoreFilesTest, AFileReplacedUnderARunningStoreFailsTheNextWrite) {
  TempDir dir;
  const std::string path = dir.File("live.db");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateJob(Job("before", 0)).ok());
  std::filesystem::rename(path, dir.File("moved.db"));
  MakeDatabase(path, 0);  // another database at the path
  const absl::Status s = (*store)->CreateJob(Job("after", 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Message(s), HasSubstr("was replaced by another file"));
}

TEST(StoreFilesTest, AWriteAheadLogDeletedUnderARunningStoreFailsTheNextWrite) {
  TempDir dir;
  const std::string path = dir.File("live.db");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateJob(Job("one", 0)).ok());
  ASSERT_TRUE((*store)->CreateJob(Job("two", 1)).ok());  // the WAL is known from here
  ASSERT_TRUE(std::filesystem::exists(path + "-wal"));
  std::filesystem::remove(path + "-wal");
  const absl::Status s = (*store)->CreateJob(Job("three", 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Message(s), AllOf(HasSubstr("write-ahead log"), HasSubstr("was deleted")));
}

TEST(StoreFilesTest, ABackupTakenWhileAnotherConnectionWritesHoldsEveryJobCommittedBeforeIt) {
  TempDir dir;
  const std::string path = dir.File("live.db");
  absl::StatusOr<std::unique_ptr<Store>> writer = Store::Open(path);
  ASSERT_TRUE(writer.ok());
  std::atomic<int> committed{0};
  std::atomic<bool> stop{false};
  std::thread writing([&] {
    for (int i = 0; !stop; ++i) {
      if (!(*writer)->CreateJob(Job(absl::StrCat("job-", i), i)).ok()) break;
      committed = i + 1;
    }
  });
  while (committed < 200) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int round = 0; round < 3; ++round) {
    const std::string copy = dir.File(absl::StrCat("copy-", round, ".db"));
    const int before = committed;
    absl::StatusOr<BackupSummary> summary = BackupDatabase(path, copy);
    const int after = committed;
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_GE(summary->jobs, before);
    EXPECT_LE(summary->jobs, after + 1);  // at most the one committing as it ended
    EXPECT_EQ(summary->schema_version, store_internal::kCurrentSchemaVersion);
    EXPECT_FALSE(std::filesystem::exists(copy + "-wal"));
    EXPECT_FALSE(std::filesystem::exists(copy + ".tmp"));
    // The copy opens as a database of its own, with the first jobs whole.
    absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(copy);
    ASSERT_TRUE(opened.ok()) << opened.status();
    absl::StatusOr<std::vector<JobRecord>> jobs = (*opened)->ListJobs(0);
    ASSERT_TRUE(jobs.ok());
    EXPECT_EQ(static_cast<int64_t>(jobs->size()), summary->jobs);
    absl::StatusOr<JobRecord> first = (*opened)->GetJob("job-0");
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->request_json, Job("job-0", 0).request_json);
    EXPECT_TRUE((*opened)->GetJob(absl::StrCat("job-", before - 1)).ok());
  }
  stop = true;
  writing.join();
  EXPECT_GT(committed, 200);  // the writer kept going during the copies
}

TEST(StoreFilesTest, ABackupRefusesWhatIsNotADatabaseOfOurs) {
  TempDir dir;
  const absl::StatusOr<BackupSummary> missing = BackupDatabase(dir.File("none.db"), dir.File("c"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(missing.status()), HasSubstr("none.db"));
  const std::string foreign = dir.File("places.sqlite");
  RawExec(foreign, "CREATE TABLE moz_places (id INTEGER)");
  EXPECT_THAT(Message(BackupDatabase(foreign, dir.File("c")).status()),
              HasSubstr("not an autoaccel database"));
  const std::string own = dir.File("own.db");
  MakeDatabase(own, 1);
  EXPECT_EQ(BackupDatabase(own, own).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.File("c")));
}

#ifdef AUTOACCEL_SERVER_BIN
TEST(StoreFilesTest, TheServerCopiesWithBackupWhileAnotherProcessWritesAndRefusesADamagedFile) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  MakeDatabase(path, 5);
  // This process writes jobs while autoaccel-server --backup copies.
  absl::StatusOr<std::unique_ptr<Store>> writer = Store::Open(path);
  ASSERT_TRUE(writer.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> written{5};
  std::thread writing([&] {
    for (int i = 5; !stop; ++i) {
      if (!(*writer)->CreateJob(Job(absl::StrCat("job-", i), i)).ok()) break;
      written = i + 1;
    }
  });
  while (written < 100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int before = written;
  std::string out, err;
  EXPECT_EQ(
      testing::RunCommand({AUTOACCEL_SERVER_BIN, "--db", path, "--backup", dir.File("copy.db")},
                          dir.File(""), &out, &err, absl::Seconds(30)),
      0)
      << err;
  stop = true;
  writing.join();
  EXPECT_THAT(out, AllOf(HasSubstr("copied"), HasSubstr("jobs")));
  absl::StatusOr<std::unique_ptr<Store>> copy = Store::Open(dir.File("copy.db"));
  ASSERT_TRUE(copy.ok()) << copy.status();
  absl::StatusOr<std::vector<JobRecord>> jobs = (*copy)->ListJobs(0);
  ASSERT_TRUE(jobs.ok());
  EXPECT_GE(static_cast<int>(jobs->size()), before);
  EXPECT_THAT(out, HasSubstr(absl::StrCat(jobs->size(), " jobs")));

  const std::string garbage = dir.File("garbage.db");
  WriteBytes(garbage, RandomBytes(8192, 3));
  out.clear();
  err.clear();
  EXPECT_EQ(testing::RunCommand({AUTOACCEL_SERVER_BIN, "--db", garbage, "--listen", "127.0.0.1:0"},
                                dir.File(""), &out, &err, absl::Seconds(30)),
            1);
  const std::vector<std::string> lines = absl::StrSplit(err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << err;
  EXPECT_THAT(lines[0], AllOf(HasSubstr(garbage), HasSubstr("not a database")));
}
#endif

}  // namespace
}  // namespace autoaccel
