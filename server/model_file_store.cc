#include "server/model_file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_write.h"
#include "spdlog/spdlog.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;

constexpr char kSuffix[] = ".pt";

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelFileStore>> ModelFileStore::Open(const std::string& dir,
                                                                     ModelFileLimits limits) {
  std::error_code ec;
  if (dir.empty()) {
    std::string pattern = (fs::temp_directory_path(ec) / "autoaccel-model-files-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a directory for model files (",
                                              pattern, "): ", std::strerror(errno)));
    }
    return std::unique_ptr<ModelFileStore>(new ModelFileStore(pattern, true, limits));
  }
  fs::create_directories(dir, ec);
  if (!ec) fs::permissions(dir, fs::perms::owner_all, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create the model files' directory ", dir, ": ", ec.message()));
  }
  return std::unique_ptr<ModelFileStore>(new ModelFileStore(dir, false, limits));
}

ModelFileStore::~ModelFileStore() {
  if (!owns_dir_) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string ModelFileStore::PathOf(const std::string& job_id) const {
  return absl::StrCat(dir_, "/", job_id, kSuffix);
}

void ModelFileStore::CountLocked(const std::string& job_id, const std::string& owner,
                                 int64_t bytes) {
  held_[job_id] = Held{owner, bytes};
  by_owner_[owner] += bytes;
  total_ += bytes;
}

absl::StatusOr<ModelFileRef> ModelFileStore::Put(const std::string& job_id,
                                                 const std::string& owner,
                                                 const std::string& digest,
                                                 const std::string& bytes) {
  const int64_t size = static_cast<int64_t>(bytes.size());
  {
    // Reserved before the write, so two submissions cannot both pass a cap.
    absl::MutexLock lock(&mu_);
    if (held_.count(job_id)) {
      return absl::InternalError(absl::StrCat("model files: job ", job_id, " has one already"));
    }
    if (!owner.empty() && by_owner_[owner] + size > limits_.per_user_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "model files: user ", owner, "'s unfinished jobs hold ", Mib(by_owner_[owner]),
          " of model files; this one (", Mib(size), ") would pass the per-user cap of ",
          Mib(limits_.per_user_bytes), " (wait for a job to finish, or cancel one)"));
    }
    if (total_ + size > limits_.total_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("model files: unfinished jobs hold ", Mib(total_),
                       " of model files; this one (", Mib(size), ") would pass the cap of ",
                       Mib(limits_.total_bytes), " (try again when jobs have finished)"));
    }
    CountLocked(job_id, owner, size);
  }
  const std::string path = PathOf(job_id);
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  if (!WriteWholeFile(tmp, bytes, 0600, /*sync=*/true) || (fs::rename(tmp, path, ec), ec)) {
    const std::string why = std::strerror(errno);
    fs::remove(tmp, ec);
    Remove(job_id);
    return absl::InternalError(
        absl::StrCat("cannot keep the model file in ", dir_, ": ", ec ? ec.message() : why));
  }
  return ModelFileRef{job_id, path, digest, size};
}

absl::StatusOr<ModelFileRef> ModelFileStore::Adopt(const std::string& job_id,
                                                   const std::string& owner,
                                                   const std::string& digest) {
  const std::string path = PathOf(job_id);
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("its model file ", path, " is gone"));
  absl::MutexLock lock(&mu_);
  if (!held_.count(job_id)) CountLocked(job_id, owner, static_cast<int64_t>(size));
  return ModelFileRef{job_id, path, digest, static_cast<int64_t>(size)};
}

absl::StatusOr<std::string> ModelFileStore::Read(const ModelFileRef& file) const {
  const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::DataLossError(absl::StrCat("job ", file.job_id, "'s model file ", file.path,
                                            " cannot be read: ", std::strerror(errno)));
  }
  std::string bytes(static_cast<size_t>(file.bytes), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  char extra;
  const bool longer = ::read(fd, &extra, 1) > 0;
  ::close(fd);
  if (got != bytes.size() || longer) {
    return absl::DataLossError(absl::StrCat("job ", file.job_id, "'s model file ", file.path,
                                            " changed size: ", file.bytes, " bytes expected"));
  }
  return bytes;
}

void ModelFileStore::Remove(const std::string& job_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(job_id);
    if (it == held_.end()) return;
    auto owner = by_owner_.find(it->second.owner);
    owner->second -= it->second.bytes;
    if (owner->second <= 0) by_owner_.erase(owner);
    total_ -= it->second.bytes;
    held_.erase(it);
  }
  std::error_code ec;
  fs::remove(PathOf(job_id), ec);
  if (ec) spdlog::warn("cannot delete job {}'s model file: {}", job_id, ec.message());
}

int ModelFileStore::RemoveAllBut(const std::set<std::string>& keep) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    const size_t dot = name.find('.');
    if (dot != std::string::npos && keep.count(name.substr(0, dot)) &&
        name.substr(dot) == kSuffix) {
      continue;
    }
    std::error_code removed_ec;
    if (fs::remove(it->path(), removed_ec)) ++removed;
  }
  return removed;
}

int64_t ModelFileStore::HeldBytes() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

int64_t ModelFileStore::HeldBytes(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  auto it = by_owner_.find(owner);
  return it == by_owner_.end() ? 0 : it->second;
}

}  // namespace autoaccel
