#define _GNU_SOURCE
#include "CThreadScheduling.h"
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// The kernel's struct sched_attr (SCHED_ATTR_SIZE_VER1); glibc 2.36 does not declare it.
struct ck_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
};

// <linux/sched.h>'s SCHED_FLAG_RESET_ON_FORK (not included: it clashes with glibc's sched.h).
#define SCHED_FLAG_RESET_ON_FORK_VALUE 0x01

int ck_request_thread_slice(uint64_t nanoseconds) {
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
    struct ck_sched_attr attr;
    memset(&attr, 0, sizeof attr);
    if (syscall(SYS_sched_getattr, 0, &attr, (unsigned)sizeof attr, 0) != 0) return errno;
    if (attr.sched_policy != SCHED_OTHER) return EPERM;
    attr.size = sizeof attr;
    // Threads this one starts get the default slice back: the kernel copies a custom slice into
    // every child, and libdispatch starts its worker threads from whichever thread queues work
    // (a pump's `async` made short-slice workers, and x264's threads inherited it from those).
    attr.sched_flags = SCHED_FLAG_RESET_ON_FORK_VALUE;
    attr.sched_runtime = nanoseconds;
    return syscall(SYS_sched_setattr, 0, &attr, 0) == 0 ? 0 : errno;
#else
    (void)nanoseconds;
    return ENOSYS;
#endif
}
