// A scheduling request Swift cannot make itself: sched_setattr(2) has no libc wrapper.
#ifndef CTHREAD_SCHEDULING_H
#define CTHREAD_SCHEDULING_H
#include <stdint.h>

// Asks the kernel for a time slice of `nanoseconds` for the calling thread, keeping its policy
// (only SCHED_OTHER threads are changed) and its nice value. Since Linux 6.12 (EEVDF) a thread
// with a shorter slice gets an earlier deadline and so preempts sooner when it wakes; its share
// of the CPU stays the same. No privilege is needed. Older kernels take and ignore the value.
// Threads it starts later begin with the default slice (SCHED_FLAG_RESET_ON_FORK).
// Returns 0, or the errno that refused it.
int ck_request_thread_slice(uint64_t nanoseconds);

#endif
