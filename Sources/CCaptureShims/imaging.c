// The simulator's per-pixel camera effects (defocus blur, sensor noise) as plain integer loops
// that clang auto-vectorises. The formulas are exactly those CameraImaging documents, so frames
// are bit-identical to the scalar Swift they replace.
#include "CCaptureShims.h"
#include <string.h>
#include "vector_clones.h"

/// (a · m + 32768) >> 16 in 16-bit arithmetic (both halves of the product, as SIMD multiplies give them).
static inline uint16_t ck_round_mul16(uint16_t a, uint16_t m) {
    uint16_t hi = (uint16_t)(((uint32_t)a * m) >> 16);
    uint16_t lo = (uint16_t)(a * m);
    return (uint16_t)(hi + (lo >> 15));
}

static uint32_t reciprocal(int divisor) {
    // round(65536 / divisor), as the Swift side computed it.
    return (uint32_t)((131072u + (uint32_t)divisor) / (2u * (uint32_t)divisor));
}

CK_VECTOR
void ck_box_blur_rows(const uint8_t *base, ptrdiff_t stride, int step, int lanes, int width, int height, int rx,
                      uint8_t *out, ptrdiff_t outStride, uint32_t *scratch) {
    if (width <= 0 || height <= 0 || rx < 0 || lanes <= 0 || lanes > step) return;
    const uint32_t mul = reciprocal(2 * rx + 1);
    const int window = 2 * rx + 1;
    for (int y = 0; y < height; y++) {
        const uint8_t *row = base + y * stride;
        uint8_t *dst = out + y * outStride;  // a rounded mean of 8-bit samples fits 8 bits
        if (rx == 0) {
            for (int x = 0; x < width; x++)
                for (int c = 0; c < lanes; c++) dst[x * step + c] = row[x * step + c];
            continue;
        }
        if (lanes == step && window <= 31) {
            // Interleaved lanes fill the row: pad it with each lane's edge samples, then sum the
            // window's taps with contiguous loads (vectorised across the whole row).
            const int n = width * step, margin = rx * step;
            uint16_t *pad = (uint16_t *)scratch;
            uint16_t *acc = pad + n + 2 * margin;
            for (int i = 0; i < margin; i++) pad[i] = row[i % step];
            for (int i = 0; i < n; i++) pad[margin + i] = row[i];
            for (int i = 0; i < margin; i++) pad[margin + n + i] = row[n - step + i % step];
            // The windows the simulator uses (radius 1…4 luma, their halves on chroma) in one fused
            // pass each: every tap a contiguous load, no intermediate row written back.
            // In 16-bit lanes: a window of ≤ 9 samples sums to ≤ 2295, and (sum·mul + 32768) >> 16
            // is the high half of sum·mul plus the top bit of its low half (mul ≤ 21845 here).
#define CK_TAPS(W, S) case (W) * 64 + (S): \
                for (int i = 0; i < n; i++) { \
                    uint16_t sum = 0; \
                    for (int k = 0; k < (W); k++) sum = (uint16_t)(sum + pad[i + k * (S)]); \
                    dst[i] = (uint8_t)(ck_round_mul16(sum, (uint16_t)mul)); \
                } \
                continue;
            switch (window * 64 + step) {
            CK_TAPS(3, 1) CK_TAPS(5, 1) CK_TAPS(7, 1) CK_TAPS(9, 1)
            CK_TAPS(3, 2) CK_TAPS(5, 2) CK_TAPS(7, 2) CK_TAPS(9, 2)
            default: break;
            }
#undef CK_TAPS
            for (int i = 0; i < n; i++) acc[i] = pad[i];
            for (int k = 1; k < window; k++) {
                const uint16_t *tap = pad + k * step;
                for (int i = 0; i < n; i++) acc[i] = (uint16_t)(acc[i] + tap[i]);
            }
            for (int i = 0; i < n; i++) dst[i] = (uint8_t)(((uint32_t)acc[i] * mul + 32768u) >> 16);
            continue;
        }
        // Any radius: prefix sums over each lane padded with its edge samples; window(x) = P[x + 2rx + 1] - P[x].
        for (int c = 0; c < lanes; c++) {
            const uint8_t *lane = row + c;
            uint32_t *prefix = scratch;
            uint32_t sum = 0;
            int k = 0;
            prefix[0] = 0;
            for (; k < rx; k++) { sum += lane[0]; prefix[k + 1] = sum; }
            for (int x = 0; x < width; x++, k++) { sum += lane[x * step]; prefix[k + 1] = sum; }
            for (; k < width + 2 * rx; k++) { sum += lane[(width - 1) * step]; prefix[k + 1] = sum; }
            for (int x = 0; x < width; x++)
                dst[x * step + c] = (uint8_t)(((prefix[x + window] - prefix[x]) * mul + 32768u) >> 16);
        }
    }
}

CK_VECTOR
void ck_box_blur_columns(uint8_t *base, ptrdiff_t stride, int rowBytes, int height, int ry,
                         const uint8_t *const *in, int first, int end, uint32_t *sums) {
    if (first < 0) first = 0;
    if (end > height) end = height;
    if (rowBytes <= 0 || height <= 0 || ry < 0 || first >= end) return;
    const uint32_t mul = reciprocal(2 * ry + 1);
    if (ry >= 1 && ry <= 127) {
        // 16-bit lanes: 2ry + 1 ≤ 255 samples of ≤ 255 fit, and mul ≤ 21845 (see CK_TAPS).
        uint16_t *s16 = (uint16_t *)sums;
        const uint16_t m16 = (uint16_t)mul;
        for (int x = 0; x < rowBytes; x++) s16[x] = 0;
        for (int i = -ry; i <= ry; i++) {
            const int r = first + i;
            const uint8_t *src = in[r < 0 ? 0 : (r > height - 1 ? height - 1 : r)];
            for (int x = 0; x < rowBytes; x++) s16[x] = (uint16_t)(s16[x] + src[x]);
        }
        for (int y = first; y < end; y++) {
            uint8_t *row = base + y * stride;
            const int a = y + ry + 1, s = y - ry;
            const uint8_t *add = in[a > height - 1 ? height - 1 : a];
            const uint8_t *sub = in[s < 0 ? 0 : s];
            for (int x = 0; x < rowBytes; x++) {
                uint16_t v = ck_round_mul16(s16[x], m16);
                row[x] = (uint8_t)(v > 255 ? 255 : v);
                s16[x] = (uint16_t)(s16[x] + add[x] - sub[x]);
            }
        }
        return;
    }
    for (int x = 0; x < rowBytes; x++) sums[x] = 0;
    for (int i = -ry; i <= ry; i++) {
        const int r = first + i;
        const uint8_t *src = in[r < 0 ? 0 : (r > height - 1 ? height - 1 : r)];
        for (int x = 0; x < rowBytes; x++) sums[x] += src[x];
    }
    for (int y = first; y < end; y++) {
        uint8_t *row = base + y * stride;
        const int a = y + ry + 1, s = y - ry;
        const uint8_t *add = in[a > height - 1 ? height - 1 : a];
        const uint8_t *sub = in[s < 0 ? 0 : s];
        for (int x = 0; x < rowBytes; x++) {
            uint32_t v = (sums[x] * mul + 32768u) >> 16;
            row[x] = (uint8_t)(v > 255 ? 255 : v);
            sums[x] += (uint32_t)add[x] - (uint32_t)sub[x];
        }
    }
}

// One row of noise from `src` into `dst` (the same row when in place): luma + tile, clamped.
// Byte-wide saturating add and subtract: clang's elementwise builtins vectorise to vpaddusb /
// vpsubusb (the plain C form was widened to 32-bit lanes).
#if defined(__has_builtin) && __has_builtin(__builtin_elementwise_add_sat) && __has_builtin(__builtin_elementwise_sub_sat)
#define CK_ADDS_U8(a, b) __builtin_elementwise_add_sat((uint8_t)(a), (uint8_t)(b))
#define CK_SUBS_U8(a, b) __builtin_elementwise_sub_sat((uint8_t)(a), (uint8_t)(b))
#else
#define CK_ADDS_U8(a, b) ((uint8_t)((unsigned)(a) + (b) > 255 ? 255 : (unsigned)(a) + (b)))
#define CK_SUBS_U8(a, b) ((uint8_t)((a) > (b) ? (a) - (b) : 0))
#endif

static inline void ck_noise_row(const uint8_t *src, uint8_t *dst, int step, int width,
                                const uint8_t *up, const uint8_t *down, int tileMask, int origin) {
    int x = 0;
    while (x < width) {
        // One contiguous run of the tile (it wraps at tileMask + 1).
        int run = tileMask + 1 - origin;
        if (run > width - x) run = width - x;
        const uint8_t *u = up + origin, *d = down + origin;
        // v + t clamped to 0…255 is v + up, saturated at 255, − down, saturated at 0 (one of up
        // and down is 0): byte-wide saturating adds, so 32 samples a step with AVX2.
        if (step == 1 && src == dst) {
            uint8_t *p = dst + x;
            for (int i = 0; i < run; i++) p[i] = CK_SUBS_U8(CK_ADDS_U8(p[i], u[i]), d[i]);
        } else if (step == 1) {
            // Separate rows: no overlap, so the compiler may vectorize without an alias check.
            const uint8_t *restrict s = src + x;
            uint8_t *restrict p = dst + x;
            for (int i = 0; i < run; i++) p[i] = CK_SUBS_U8(CK_ADDS_U8(s[i], u[i]), d[i]);
        } else {
            for (int i = 0; i < run; i++) {
                const uint8_t *s = src + (x + i) * step;
                uint8_t *p = dst + (x + i) * step;
                *p = CK_SUBS_U8(CK_ADDS_U8(*s, u[i]), d[i]);
            }
        }
        x += run;
        origin = 0;
    }
}

CK_VECTOR
void ck_add_noise_rows(const uint8_t *src, ptrdiff_t srcStride, uint8_t *dst, ptrdiff_t stride, int step, int width,
                       int y0, int y1, const uint8_t *up, const uint8_t *down, int tileMask, int start, int rowJump) {
    if (width <= 0 || y0 >= y1) return;
    for (int y = y0; y < y1; y++) {
        // Row y's window of the tile depends on y alone, so any row range gives the rows a whole pass does.
        int origin = (int)(((unsigned)start + (unsigned)y * (unsigned)rowJump) & (unsigned)tileMask);
        ck_noise_row(src + y * srcStride, dst + y * stride, step, width, up, down, tileMask, origin);
    }
}

CK_VECTOR
void ck_add_noise_rows_around(const uint8_t *src, ptrdiff_t srcStride, uint8_t *dst, ptrdiff_t stride, int step, int width,
                              int y0, int y1, int x0, int x1, const uint8_t *up, const uint8_t *down, int tileMask,
                              int start, int rowJump) {
    if (width <= 0 || y0 >= y1) return;
    x0 = x0 < 0 ? 0 : (x0 > width ? width : x0);
    x1 = x1 < x0 ? x0 : (x1 > width ? width : x1);
    uint8_t keep[1024];
    for (int y = y0; y < y1; y++) {
        int origin = (int)(((unsigned)start + (unsigned)y * (unsigned)rowJump) & (unsigned)tileMask);
        const uint8_t *s = src + y * srcStride;
        uint8_t *d = dst + y * stride;
        // Sample x takes the tile at (origin + x) & tileMask, so a column run starts its window there.
        if (step == 1 && x1 - x0 <= (int)sizeof(keep)) {
            // Set the drawn columns aside, noise the whole row from the source (one run, no seams),
            // then write the drawn columns back noised: the same bytes, without a run's loose ends
            // at each side of the box.
            memcpy(keep, d + x0, (size_t)(x1 - x0));
            ck_noise_row(s, d, 1, width, up, down, tileMask, origin);
            ck_noise_row(keep, d + x0, 1, x1 - x0, up, down, tileMask, (origin + x0) & tileMask);
            continue;
        }
        if (x0 > 0) ck_noise_row(s, d, step, x0, up, down, tileMask, origin);
        if (x1 > x0) ck_noise_row(d + (ptrdiff_t)x0 * step, d + (ptrdiff_t)x0 * step, step, x1 - x0, up, down, tileMask,
                                  (origin + x0) & tileMask);
        if (x1 < width) ck_noise_row(s + (ptrdiff_t)x1 * step, d + (ptrdiff_t)x1 * step, step, width - x1, up, down, tileMask,
                                     (origin + x1) & tileMask);
    }
}

void ck_add_noise(uint8_t *base, ptrdiff_t stride, int step, int width, int height,
                  const uint8_t *up, const uint8_t *down, int tileMask, int start, int rowJump) {
    ck_add_noise_rows(base, stride, base, stride, step, width, 0, height, up, down, tileMask, start, rowJump);
}

#pragma clang fp contract(off)

// The noise tile: SeededRandom's SplitMix64 and the Swift expressions, operation for operation
// (contraction is off in this part of the file, so no fused multiply-adds).
void ck_noise_tile(int8_t *tile, int count, uint64_t seed) {
    uint64_t state = seed;
    for (int i = 0; i < count; i++) {
        double sum = 0;
        for (int k = 0; k < 4; k++) {
            state += 0x9E3779B97F4A7C15ull;
            uint64_t z = state;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            // z >> 11 < 2^53: exact as a double, converted as a signed integer (one instruction).
            sum += (double)(int64_t)(z >> 11) / 9007199254740992.0 * 2 - 1;
        }
        // round(): half away from zero. |x| < 111, so the integer conversion truncates exactly and
        // x − t is exact; no libm call per entry.
        const double x = sum * 32 / 1.1547, t = (double)(int64_t)x;
        const double v = x - t >= 0.5 ? t + 1 : (t - x >= 0.5 ? t - 1 : t);
        tile[i] = (int8_t)(v < -127 ? -127 : (v > 127 ? 127 : v));
    }
}
