// The worker's cache of torchscript model files: stored by digest in a
// directory only its user reaches, found again, refused when the bytes do
// not match, and deleted once unused for long enough.
#include "worker/model_file_cache.h"

#include <filesystem>
#include <string>

#include "common/content_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;

class ModelFileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("autoaccel-models-"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ModelFileCacheTest, AStoredFileIsFoundByItsDigestInAPrivateDirectory) {
  const std::string bytes(1000, 'm');
  const std::string digest = ContentDigest(bytes);
  EXPECT_EQ(*FindModelFile(dir_, digest), std::nullopt);
  absl::StatusOr<std::string> path = StoreModelFile(dir_, digest, bytes, "push-1");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(fs::status(dir_ + "/models").permissions(), fs::perms::owner_all);
  EXPECT_EQ(*FindModelFile(dir_, digest), *path);
  EXPECT_FALSE(StoreModelFile(dir_, ContentDigest("other"), bytes, "push-2").ok())
      << "bytes that do not hash to the digest";
  EXPECT_FALSE(FindModelFile(dir_, "sha256:../../etc").ok()) << "not a digest";
}

TEST_F(ModelFileCacheTest, FilesUnusedForTheKeepTimeAreRemovedAndUsedOnesStay) {
  const std::string old_bytes(100, 'o'), used_bytes(100, 'u');
  const std::string old_path = *StoreModelFile(dir_, ContentDigest(old_bytes), old_bytes, "a");
  const std::string used_path = *StoreModelFile(dir_, ContentDigest(used_bytes), used_bytes, "b");
  const auto long_ago = fs::file_time_type::clock::now() - std::chrono::hours(24 * 30);
  fs::last_write_time(old_path, long_ago);
  fs::last_write_time(used_path, long_ago);
  ASSERT_TRUE(FindModelFile(dir_, ContentDigest(used_bytes))->has_value());  // a trial used it
  EXPECT_EQ(RemoveUnusedModelFiles(dir_, absl::Hours(24 * 7)), 1);
  EXPECT_FALSE(fs::exists(old_path));
  EXPECT_TRUE(fs::exists(used_path));
}

}  // namespace
}  // namespace autoaccel
