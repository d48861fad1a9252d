// Lossless repacking between the packed pixel layouts a device delivers and the planar layouts
// FFV1 codes (fixtures): pure byte shuffles, in C so fixture recording and replay do not spend
// their time in per-byte Swift loops (nor, under the fuzzer, in coverage callbacks).
#include "CCaptureShims.h"

void ck_unpack_yuyv(const uint8_t *src, uint8_t *y, ptrdiff_t ys, uint8_t *u, ptrdiff_t us,
                    uint8_t *v, ptrdiff_t vs, int width, int height) {
    for (int row = 0; row < height; row++) {
        const uint8_t *s = src + (ptrdiff_t)row * width * 2;
        uint8_t *yr = y + row * ys, *ur = u + row * us, *vr = v + row * vs;
        for (int i = 0; i < width / 2; i++) {
            yr[2 * i] = s[4 * i];
            ur[i] = s[4 * i + 1];
            yr[2 * i + 1] = s[4 * i + 2];
            vr[i] = s[4 * i + 3];
        }
    }
}

void ck_pack_yuyv(const uint8_t *y, ptrdiff_t ys, const uint8_t *u, ptrdiff_t us,
                  const uint8_t *v, ptrdiff_t vs, uint8_t *dst, int width, int height) {
    for (int row = 0; row < height; row++) {
        uint8_t *d = dst + (ptrdiff_t)row * width * 2;
        const uint8_t *yr = y + row * ys, *ur = u + row * us, *vr = v + row * vs;
        for (int i = 0; i < width / 2; i++) {
            d[4 * i] = yr[2 * i];
            d[4 * i + 1] = ur[i];
            d[4 * i + 2] = yr[2 * i + 1];
            d[4 * i + 3] = vr[i];
        }
    }
}

void ck_unpack_nv12_chroma(const uint8_t *src, uint8_t *u, ptrdiff_t us, uint8_t *v, ptrdiff_t vs,
                           int chromaWidth, int chromaHeight) {
    for (int row = 0; row < chromaHeight; row++) {
        const uint8_t *s = src + (ptrdiff_t)row * chromaWidth * 2;
        uint8_t *ur = u + row * us, *vr = v + row * vs;
        for (int i = 0; i < chromaWidth; i++) {
            ur[i] = s[2 * i];
            vr[i] = s[2 * i + 1];
        }
    }
}

void ck_pack_nv12_chroma(const uint8_t *u, ptrdiff_t us, const uint8_t *v, ptrdiff_t vs, uint8_t *dst,
                         int chromaWidth, int chromaHeight) {
    for (int row = 0; row < chromaHeight; row++) {
        uint8_t *d = dst + (ptrdiff_t)row * chromaWidth * 2;
        const uint8_t *ur = u + row * us, *vr = v + row * vs;
        for (int i = 0; i < chromaWidth; i++) {
            d[2 * i] = ur[i];
            d[2 * i + 1] = vr[i];
        }
    }
}

void ck_unpack_rgb24_to_bgr0(const uint8_t *src, uint8_t *p, ptrdiff_t ps, int width, int height) {
    for (int row = 0; row < height; row++) {
        const uint8_t *s = src + (ptrdiff_t)row * width * 3;
        uint8_t *d = p + row * ps;
        for (int i = 0; i < width; i++) {
            d[4 * i] = s[3 * i + 2];
            d[4 * i + 1] = s[3 * i + 1];
            d[4 * i + 2] = s[3 * i];
            d[4 * i + 3] = 0;
        }
    }
}

void ck_pack_bgr0_to_rgb24(const uint8_t *p, ptrdiff_t ps, uint8_t *dst, int width, int height) {
    for (int row = 0; row < height; row++) {
        const uint8_t *s = p + row * ps;
        uint8_t *d = dst + (ptrdiff_t)row * width * 3;
        for (int i = 0; i < width; i++) {
            d[3 * i] = s[4 * i + 2];
            d[3 * i + 1] = s[4 * i + 1];
            d[3 * i + 2] = s[4 * i];
        }
    }
}
