#ifndef ZEROBRIDGE_COPENBENEATH_SHIM_H
#define ZEROBRIDGE_COPENBENEATH_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#endif

// Opens `path` beneath the folder `dirfd` without following any symbolic link on the way (openat2 with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): the kernel refuses `..` out of the folder (EXDEV) and every link (ELOOP),
// in the same lookup that opens, so nothing can be swapped in between. openat2 has no glibc wrapper, and Swift cannot
// call the variadic syscall(2), hence this function. Returns the descriptor, or -errno: -ENOSYS where the kernel
// (before 5.6) or the headers lack openat2, or a seccomp filter hides it.
static inline int zb_open_beneath(int dirfd, const char *path, int flags) {
#if defined(SYS_openat2) && defined(RESOLVE_BENEATH)
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(unsigned int)(flags | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    return fd < 0 ? -errno : (int)fd;
#else
    (void)dirfd; (void)path; (void)flags;
    return -ENOSYS;
#endif
}

// O_PATH (open the entry itself, a link as a link) is declared only under _GNU_SOURCE, which Swift's Glibc module
// does not define; glibc's own name for it, __O_PATH, is always there.
static inline int zb_o_path(void) {
#if defined(O_PATH)
    return O_PATH;
#else
    return __O_PATH;
#endif
}

#endif
