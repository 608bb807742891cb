#include "worker/seccomp_filter.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace autoaccel {
namespace {

struct FilterCloser {
  void operator()(scmp_filter_ctx ctx) const { seccomp_release(ctx); }
};

absl::Status Failed(const std::string& path, const char* what, int rc) {
  return absl::InternalError(absl::StrCat("the ranks' seccomp filter (", path, "): ", what, ": ",
                                          std::strerror(rc < 0 ? -rc : rc)));
}

}  // namespace

absl::Status WriteRankSeccompFilter(const std::string& path) {
  std::unique_ptr<void, FilterCloser> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (ctx == nullptr) return Failed(path, "seccomp_init", ENOMEM);
  for (const DeniedSyscall& s : kDeniedSyscalls) {
    const int nr = seccomp_syscall_resolve_name(s.name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (const int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr, 0); rc < 0) {
      return Failed(path, s.name, rc);
    }
  }
  const int clone = seccomp_syscall_resolve_name("clone");
  if (clone != __NR_SCMP_ERROR) {
    if (const int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), clone, 1,
                                        SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
        rc < 0) {
      return Failed(path, "clone", rc);
    }
  }
  const int clone3 = seccomp_syscall_resolve_name("clone3");
  if (clone3 != __NR_SCMP_ERROR) {
    if (const int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), clone3, 0); rc < 0) {
      return Failed(path, "clone3", rc);
    }
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Failed(path, "open", errno);
  const int rc = seccomp_export_bpf(ctx.get(), fd);
  ::close(fd);
  if (rc < 0) return Failed(path, "export", rc);
  return absl::OkStatus();
}

}  // namespace autoaccel
