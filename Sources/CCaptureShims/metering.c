// The simulator's meters (CameraImaging.measure): grid sums, contrast and the gray-world white
// balance as plain integer and double loops, with AVX2 gathers where the CPU has them. The
// results are exactly those of the Swift loops they replace.
#include "CCaptureShims.h"
#include <string.h>
#include "vector_clones.h"

// AVX2 where the CPU has it (checked at run time): gathers and sums of absolute differences.
#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>
#include <stdatomic.h>
static _Atomic int ck_avx2_allowed = 1;
void ck_allow_avx2(int allowed) { atomic_store_explicit(&ck_avx2_allowed, allowed, memory_order_relaxed); }
static int ck_has_avx2(void) {
    return atomic_load_explicit(&ck_avx2_allowed, memory_order_relaxed) && __builtin_cpu_supports("avx2");
}

// Σ p[i · jump] for i < n (n a multiple of 8), eight at a time: gathers of four bytes, the low one
// kept (the caller makes sure the last four bytes lie in the row).
__attribute__((target("avx2")))
static uint32_t ck_strided_sum_avx2(const uint8_t *p, int jump, int n) {
    __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(jump));
    const __m256i advance = _mm256_set1_epi32(8 * jump), low = _mm256_set1_epi32(0xFF);
    __m256i acc = _mm256_setzero_si256();
    for (int i = 0; i < n; i += 8) {
        acc = _mm256_add_epi32(acc, _mm256_and_si256(_mm256_i32gather_epi32((const int *)p, at, 1), low));
        at = _mm256_add_epi32(at, advance);
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(s);
}

// Σ |p[2k + 2] − p[2k]| for k < n (n a multiple of 16), sixteen terms a step: the even bytes of two
// loads two bytes apart, as sums of absolute differences (vpsadbw). Reads p[0 … 2n + 1].
__attribute__((target("avx2")))
static uint32_t ck_even_contrast_avx2(const uint8_t *p, int n) {
    const __m256i even = _mm256_set1_epi16(0x00FF);
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < n; k += 16) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 2 * k)), even);
        __m256i b = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 2 * k + 2)), even);
        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(a, b));
    }
    __m128i s = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
    return (uint32_t)_mm_cvtsi128_si64(s);
}
#else
void ck_allow_avx2(int allowed) { (void)allowed; }
static int ck_has_avx2(void) { return 0; }
static uint32_t ck_strided_sum_avx2(const uint8_t *p, int jump, int n) { return 0; }
static uint32_t ck_even_contrast_avx2(const uint8_t *p, int n) { return 0; }
#endif

// The meters. Sums are integers, so any evaluation order gives the same result as the per-sample
// Swift loops they replace.
CK_VECTOR
int64_t ck_grid_sum(const uint8_t *base, ptrdiff_t stride, int step, int x0, int x1, int xStep,
                    int y0, int y1, int yStep, int64_t *count) {
    *count = 0;
    if (x0 >= x1 || y0 >= y1 || xStep <= 0 || yStep <= 0) return 0;
    int64_t sum = 0;
    const int columns = (x1 - x0 + xStep - 1) / xStep;
    const ptrdiff_t jump = (ptrdiff_t)xStep * step;
    // The columns whose four bytes from their sample lie in the row (`stride` bytes), eight at a time.
    int gathered = 0;
    if (ck_has_avx2() && jump * 8 < (1 << 30) && stride >= (ptrdiff_t)x0 * step + 4) {
        ptrdiff_t fit = (stride - (ptrdiff_t)x0 * step - 4) / jump + 1;
        gathered = (int)(fit < columns ? fit : columns) & ~7;
    }
    int rows = 0;
    for (int y = y0; y < y1; y += yStep, rows++) {
        const uint8_t *p = base + y * stride + (ptrdiff_t)x0 * step;
        uint32_t s = gathered > 0 ? ck_strided_sum_avx2(p, (int)jump, gathered) : 0;
        for (int i = gathered; i < columns; i++) s += p[i * jump];
        sum += s;
    }
    *count = (int64_t)rows * columns;
    return sum;
}

CK_VECTOR
int64_t ck_contrast_sum(const uint8_t *base, ptrdiff_t stride, int step, int rowBytes, int x0, int x1,
                        int y0, int y1, int yStep, int64_t *count) {
    *count = 0;
    if (x1 - x0 <= 2 || y0 >= y1 || yStep <= 0) return 0;
    // x = x0 + 2i with x + 2 < x1: i < (x1 − x0 − 1) / 2.
    const int n = (x1 - x0 - 1) / 2;
    int64_t sum = 0;
    int rows = 0;
    for (int y = y0; y < y1; y += yStep, rows++) {
        const uint8_t *p = base + y * stride + (ptrdiff_t)x0 * step;
        uint32_t s = 0;
        if (step == 1) {
            // The even bytes as the low halves of 16-bit words (little-endian): contiguous loads, so
            // the loop vectorises. Word k + 1 ends at byte x0 + 2n + 1 ≤ x1, so the last word's
            // high byte may be x1 itself: the rows have it as long as x1 < the row's byte count,
            // otherwise that word is read bytewise.
            int k = 0;
            if (ck_has_avx2()) {
                // Sixteen terms a step while their bytes (up to 2k + 1 past x0) lie in the row.
                int vectored = n & ~15;
                while (vectored > 0 && x0 + 2 * vectored + 2 > rowBytes) vectored -= 16;
                s = ck_even_contrast_avx2(p, vectored);
                k = vectored;
            }
            const int whole = (x1 < rowBytes) ? n : n - 1;
            for (; k < whole; k++) {
                uint16_t a, b;
                memcpy(&a, p + 2 * k, 2);
                memcpy(&b, p + 2 * k + 2, 2);
                int d = (int)(b & 0xFF) - (int)(a & 0xFF);
                s += (uint32_t)(d < 0 ? -d : d);
            }
            for (; k < n; k++) {
                int d = (int)p[2 * k + 2] - (int)p[2 * k];
                s += (uint32_t)(d < 0 ? -d : d);
            }
        } else {
            for (int i = 0; i < n; i++) {
                int d = (int)p[(ptrdiff_t)(2 * i + 2) * step] - (int)p[(ptrdiff_t)(2 * i) * step];
                s += (uint32_t)(d < 0 ? -d : d);
            }
        }
        sum += s;
    }
    *count = (int64_t)rows * n;
    return sum;
}

// The white-balance meter's gray world (CameraImaging.measure), on doubles: the same expressions,
// in the same order, as the Swift it replaces, so the same bits. No contraction into fused
// multiply-adds (that would round once where the Swift rounds twice).
#pragma clang fp contract(off)

// SyntheticFrameRenderer.linearRGB's entry of the 4097-entry linear table for v: Swift's
// min(max(v, 0), 1) · 4096 + 0.5, truncated.
static inline int ck_linear_index(double v) {
    double m = (0.0 >= v) ? 0.0 : v;
    m = (1.0 < m) ? 1.0 : m;
    return (int)(m * 4096 + 0.5);
}

// One sample's linear R, G and B from its code values: linearRGB's expressions on the code terms.
static inline void ck_gray_world_linear(int y, int cb, int cr, const double *yp, const double *cp, const double *table,
                                        double *r, double *g, double *b) {
    double l = yp[y], u = cp[cb], v = cp[cr];
    *r = table[ck_linear_index(l + 1.402 * v)];
    *g = table[ck_linear_index(l - 0.344136 * u - 0.714136 * v)];
    *b = table[ck_linear_index(l + 1.772 * u)];
}

// The memo of distinct (Y, Cb, Cr) keys: open addressing, a few probes, then computed unmemoised.
enum { ck_memo_bits = 10, ck_memo_size = 1 << ck_memo_bits, ck_memo_probes = 8 };
// Per thread, so calls on several threads never share it; 0xFFFFFFFF marks an empty slot (no key
// has its top byte set).
static _Thread_local uint32_t ck_memo_keys[ck_memo_size] = { [0 ... ck_memo_size - 1] = 0xFFFFFFFFu };
static _Thread_local int32_t ck_memo_slots[ck_memo_size];
static _Thread_local uint16_t ck_memo_used[ck_memo_size];

static void ck_memo_empty(int used) {
    for (int u = 0; u < used; u++) ck_memo_keys[ck_memo_used[u]] = 0xFFFFFFFFu;
}

// A row's sample keys (Y | Cb << 8 | Cr << 16) in `keys`, the first `gathered` eight at a time
// with AVX2 gathers (four bytes at each offset, the low one kept: the caller makes sure those four
// bytes lie in the row), the others one by one.
enum { ck_key_columns = 512 };
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx2")))
static int ck_gray_keys_avx2(const uint8_t *lr, const uint8_t *cbr, const uint8_t *crr, const int32_t *lo, const int32_t *bo,
                             const int32_t *ro, int gathered, uint32_t *keys) {
    const __m256i low = _mm256_set1_epi32(0xFF);
    int i = 0;
    for (; i + 8 <= gathered; i += 8) {
        __m256i y = _mm256_and_si256(_mm256_i32gather_epi32((const int *)lr, _mm256_loadu_si256((const __m256i *)(lo + i)), 1), low);
        __m256i b = _mm256_and_si256(_mm256_i32gather_epi32((const int *)cbr, _mm256_loadu_si256((const __m256i *)(bo + i)), 1), low);
        __m256i r = _mm256_and_si256(_mm256_i32gather_epi32((const int *)crr, _mm256_loadu_si256((const __m256i *)(ro + i)), 1), low);
        __m256i k = _mm256_or_si256(y, _mm256_or_si256(_mm256_slli_epi32(b, 8), _mm256_slli_epi32(r, 16)));
        _mm256_storeu_si256((__m256i *)(keys + i), k);
    }
    return i;
}
#else
static int ck_gray_keys_avx2(const uint8_t *lr, const uint8_t *cbr, const uint8_t *crr, const int32_t *lo, const int32_t *bo,
                             const int32_t *ro, int gathered, uint32_t *keys) { return 0; }
#endif

int ck_gray_world(const uint8_t *luma, ptrdiff_t lumaStride, const uint8_t *cb, ptrdiff_t cbStride, int cbSubY,
                  const uint8_t *cr, ptrdiff_t crStride, int crSubY, const ptrdiff_t *lumaColumns,
                  const ptrdiff_t *cbColumns, const ptrdiff_t *crColumns, int columns, int y0, int y1, int yStep,
                  const double *yp, const double *cp, const double *table, double *values, int32_t *indices,
                  uint8_t *keep, int capacity, int *neutral, double *sums) {
    // The columns whose four bytes from each offset lie in the row (offsets grow along the row), as
    // 32-bit offsets for the gathers; none when the CPU has no AVX2 or the row is too wide.
    int32_t lo[ck_key_columns], bo[ck_key_columns], ro[ck_key_columns];
    uint32_t rowKeys[ck_key_columns];
    int gathered = 0;
    if (columns <= ck_key_columns && ck_has_avx2()) {
        while (gathered < columns && lumaColumns[gathered] + 4 <= lumaStride && cbColumns[gathered] + 4 <= cbStride
               && crColumns[gathered] + 4 <= crStride) {
            lo[gathered] = (int32_t)lumaColumns[gathered];
            bo[gathered] = (int32_t)cbColumns[gathered];
            ro[gathered] = (int32_t)crColumns[gathered];
            gathered++;
        }
    }
    // A frame is mostly flat surfaces under luma-only noise: a few hundred distinct samples, each
    // computed and tested once (memoised by their code values; past the memo, each sample is an
    // entry of its own). Every sample's values are still added one by one, in row order: the same
    // sums as the per-sample loops.
    // The memo is the thread's own and empty between calls: only the slots this call fills are
    // emptied again at the end (a few hundred stores, not the whole table).
    uint32_t *const keys = ck_memo_keys;
    int32_t *const slots = ck_memo_slots;
    int used = 0;
    uint32_t last = 0xFFFFFFFFu;
    int32_t entry = 0;
    double sr = 0, sg = 0, sb = 0;
    double r = 0, g = 0, b = 0;
    int count = 0, distinct = 0;
    for (int y = y0; y < y1; y += yStep) {
        const uint8_t *lr = luma + y * lumaStride;
        const uint8_t *cbr = cb + (y / cbSubY) * cbStride, *crr = cr + (y / crSubY) * crStride;
        int keyed = gathered >= 8 ? ck_gray_keys_avx2(lr, cbr, crr, lo, bo, ro, gathered, rowKeys) : 0;
        for (int i = 0; i < columns; i++) {
            uint32_t key = i < keyed ? rowKeys[i]
                : (uint32_t)lr[lumaColumns[i]] | (uint32_t)cbr[cbColumns[i]] << 8 | (uint32_t)crr[crColumns[i]] << 16;
            if (key != last) {
                const int vy = key & 0xFF, vb = (key >> 8) & 0xFF, vr = key >> 16;
                last = key;
                uint32_t h = (key * 2654435761u) >> (32 - ck_memo_bits);
                int probe = 0;
                for (; probe < ck_memo_probes; probe++, h = (h + 1) & (ck_memo_size - 1)) {
                    if (keys[h] == key) { entry = slots[h]; break; }
                    if (keys[h] == 0xFFFFFFFFu) {
                        keys[h] = key;
                        ck_memo_used[used++] = (uint16_t)h;
                        slots[h] = -1;
                        break;
                    }
                }
                if (probe == ck_memo_probes || slots[h] < 0) {
                    if (distinct == capacity) {  // cannot happen: entries ≤ samples ≤ capacity
                        ck_memo_empty(used);
                        return -1;
                    }
                    entry = distinct++;
                    ck_gray_world_linear(vy, vb, vr, yp, cp, table, values + 3 * entry, values + 3 * entry + 1,
                                         values + 3 * entry + 2);
                    if (probe < ck_memo_probes) slots[h] = entry;
                }
                sr = values[3 * entry]; sg = values[3 * entry + 1]; sb = values[3 * entry + 2];
            }
            indices[count++] = entry;
            r += sr; g += sg; b += sb;
        }
    }
    ck_memo_empty(used);
    sums[0] = r; sums[1] = g; sums[2] = b;
    double nr = 0, ng = 0, nb = 0;
    int kept = 0;
    if (count > 0 && g > 0) {
        const double castR = r / g, castB = b / g;
        for (int e = 0; e < distinct; e++) {
            const double er = values[3 * e], eg = values[3 * e + 1], eb = values[3 * e + 2];
            const double qr = (er / eg) / castR, qb = (eb / eg) / castB;
            keep[e] = (eg > 0.002) & (qr > 1 / 1.5) & (qr < 1.5) & (qb > 1 / 1.5) & (qb < 1.5);
        }
        for (int k = 0; k < count; k++) {
            const int32_t e = indices[k];
            if (keep[e]) { nr += values[3 * e]; ng += values[3 * e + 1]; nb += values[3 * e + 2]; kept++; }
        }
    }
    sums[3] = nr; sums[4] = ng; sums[5] = nb;
    *neutral = kept;
    return count;
}
