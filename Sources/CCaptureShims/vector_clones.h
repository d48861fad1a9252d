#ifndef CK_VECTOR_CLONES_H
#define CK_VECTOR_CLONES_H

// Shared by imaging.c and metering.c.
// An AVX2 copy of each loop next to the baseline one, picked at load time (ifunc). Not under a
// sanitizer: the ifunc resolver clang generates is instrumented too, and it runs during dynamic
// relocation, before the sanitizer's runtime is initialised (TSan crashed there in
// __tsan_func_entry before main). The baseline loops compute the same bytes.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define CK_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && defined(__clang__) && !defined(CK_SANITIZED)
#define CK_VECTOR __attribute__((target_clones("avx2", "default")))
#else
#define CK_VECTOR
#endif

#endif
