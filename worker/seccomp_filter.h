// The seccomp filter every sandboxed rank runs under (bubblewrap --seccomp):
// the system calls a training rank never needs, each refused with EPERM —
// tracing or reading other processes, mounting, loading kernel modules or
// BPF programs, the kernel keyring, changing the clock or the host's name,
// rebooting, entering or making namespaces — one table, kDeniedSyscalls,
// with why. Everything else is allowed: PyTorch, NCCL, gloo and Python use
// a wide and changing set of calls, and an allow-list would break them on
// the next release.
//
// Thread-compatible; call once per worker.
#ifndef AUTOACCEL_WORKER_SECCOMP_FILTER_H_
#define AUTOACCEL_WORKER_SECCOMP_FILTER_H_

#include <string>

#include "absl/status/status.h"

namespace autoaccel {

struct DeniedSyscall {
  const char* name;  // as libseccomp names it; one this kernel lacks is skipped
  const char* why;
};

inline constexpr DeniedSyscall kDeniedSyscalls[] = {
    {"ptrace", "tracing another process (or being traced to escape the filter)"},
    {"process_vm_readv", "reading another process's memory"},
    {"process_vm_writev", "writing another process's memory"},
    {"kcmp", "comparing other processes' kernel state"},
    {"mount", "mounting file systems"},
    {"umount2", "unmounting file systems"},
    {"pivot_root", "changing the root file system"},
    {"open_by_handle_at", "opening files by handle, around the sandbox's mounts"},
    {"name_to_handle_at", "file handles (see open_by_handle_at)"},
    {"setns", "entering other namespaces"},
    {"unshare", "making new namespaces"},
    {"init_module", "loading kernel modules"},
    {"finit_module", "loading kernel modules"},
    {"delete_module", "unloading kernel modules"},
    {"kexec_load", "replacing the kernel"},
    {"kexec_file_load", "replacing the kernel"},
    {"reboot", "rebooting the machine"},
    {"swapon", "changing swap"},
    {"swapoff", "changing swap"},
    {"acct", "process accounting"},
    {"quotactl", "disk quotas"},
    {"bpf", "loading BPF programs into the kernel"},
    {"perf_event_open", "observing other processes and the kernel"},
    {"userfaultfd", "a common kernel-exploit primitive"},
    {"keyctl", "the kernel keyring (credentials)"},
    {"add_key", "the kernel keyring (credentials)"},
    {"request_key", "the kernel keyring (credentials)"},
    {"settimeofday", "setting the clock"},
    {"clock_settime", "setting the clock"},
    {"clock_adjtime", "adjusting the clock"},
    {"adjtimex", "adjusting the clock"},
    {"sethostname", "renaming the host"},
    {"setdomainname", "renaming the host's domain"},
    {"syslog", "reading the kernel log"},
    {"iopl", "raw I/O port access"},
    {"ioperm", "raw I/O port access"},
    {"lookup_dcookie", "kernel profiling internals"},
    {"fanotify_init", "watching the whole file system"},
    {"vhangup", "hanging up terminals"},
};

// Writes the filter, compiled to BPF for this machine's architecture, to
// `path` (what bwrap --seccomp reads). clone(2) with CLONE_NEWUSER is refused
// too (unshare's twin), and clone3 answers ENOSYS so that the C library
// falls back to clone, whose flags the filter can read. INTERNAL when
// libseccomp cannot build or write it.
absl::Status WriteRankSeccompFilter(const std::string& path);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_SECCOMP_FILTER_H_
