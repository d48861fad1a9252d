// What Swift cannot import from the C headers: function-like macros, compound
// literals and ioctl request numbers. Everything here is a thin, total function.
#ifndef CCAPTURE_SHIMS_H
#define CCAPTURE_SHIMS_H
#include <stddef.h>
#include <stdint.h>

// FFmpeg error codes and sentinels.
int ck_averror(int posix_errno);
int ck_averror_eof(void);
int ck_averror_eagain(void);
int64_t ck_av_nopts_value(void);
// Silence FFmpeg's (and through it libx264's) log output below `level`.
void ck_av_set_log_quiet(int quiet);

// V4L2 ioctl request numbers (used by the V4L2 backend).
unsigned long ck_vidioc_querycap(void);
unsigned long ck_vidioc_enum_fmt(void);
unsigned long ck_vidioc_enum_framesizes(void);
unsigned long ck_vidioc_enum_frameintervals(void);
unsigned long ck_vidioc_s_fmt(void);
unsigned long ck_vidioc_g_fmt(void);
unsigned long ck_vidioc_s_parm(void);
unsigned long ck_vidioc_g_parm(void);
unsigned long ck_vidioc_reqbufs(void);
unsigned long ck_vidioc_querybuf(void);
unsigned long ck_vidioc_qbuf(void);
unsigned long ck_vidioc_dqbuf(void);
unsigned long ck_vidioc_streamon(void);
unsigned long ck_vidioc_streamoff(void);
unsigned long ck_vidioc_queryctrl(void);
unsigned long ck_vidioc_g_ctrl(void);
unsigned long ck_vidioc_s_ctrl(void);
unsigned long ck_vidioc_s_priority(void);
uint32_t ck_v4l2_fourcc(char a, char b, char c, char d);
unsigned long ck_vidioc_g_priority(void);
unsigned long ck_vidioc_querymenu(void);
unsigned long ck_vidioc_query_ext_ctrl(void);

// ALSA: route libasound's own error messages (variadic handler) to nowhere, or back to stderr.
void ck_alsa_set_quiet(int quiet);

// Log routing into Swift (swift-log): `sink` gets one whole line, without its newline, and a level
// (FFmpeg: the AV_LOG_* level; ALSA: the error code, 0 when none). FFmpeg's lines are prefixed by
// av_log_format_line2 ("[libx264 @ 0x…] "); lines above av_log_get_level() are dropped before formatting.
// A NULL sink restores the library's own printing to stderr.
typedef void (*ck_log_sink)(int level, const char *line);
void ck_log_route_ffmpeg(ck_log_sink sink);
void ck_log_route_alsa(ck_log_sink sink);

// Simulator camera effects (imaging.c): integer loops the compiler vectorises. All total:
// sizes <= 0 do nothing.
// Horizontal box blur of `lanes` interleaved channels (lane c's samples at base[y*stride + x*step + c],
// x < width, lanes <= step) into `out` (uint16, same sample positions, row pitch `outStride`
// elements): (sum * round(65536/(2rx+1)) + 32768) >> 16 over the clamped window x-rx...x+rx.
// `scratch` holds 4 * (width*step + 2*rx*step + 2) bytes.
void ck_box_blur_rows(const uint8_t *base, ptrdiff_t stride, int step, int lanes, int width, int height, int rx,
                      uint8_t *out, ptrdiff_t outStride, uint32_t *scratch);
// Vertical box blur of the `rowBytes` first samples of the rows `in[0]`...`in[height-1]` (each
// row found through its own pointer, so rows may come from different images) into rows
// `first`..<`end` of `base` (the others untouched), same rounding, clamped to 255. `sums` has room
// for rowBytes uint32.
void ck_box_blur_columns(uint8_t *base, ptrdiff_t stride, int rowBytes, int height, int ry,
                         const uint8_t *const *in, int first, int end, uint32_t *sums);
// The simulator's noise tile (CameraImaging.noiseTile): `count` values, each the sum of four
// uniforms in −1…1 from SplitMix64 seeded with `seed` ((next >> 11) / 2^53 · 2 − 1), scaled by
// 32 / 1.1547, rounded half away from zero and clamped to ±127. The same bytes as the Swift loop.
void ck_noise_tile(int8_t *tile, int count, uint64_t seed);
// Adds t = up[i] − down[i], i = (origin_y + x) & tileMask, to every sample (clamped to 0...255),
// origin_y = (start + y*rowJump) & tileMask. A delta tile is split in two byte tiles, one of them 0
// at each i: up = min(max(t, 0), 255), down = min(max(−t, 0), 255) (any t beyond ±255 clamps alike).
void ck_add_noise(uint8_t *base, ptrdiff_t stride, int step, int width, int height,
                  const uint8_t *up, const uint8_t *down, int tileMask, int start, int rowJump);
// ck_add_noise's rows y0..<y1 read from `src` (its own stride) and written to `dst`: the same bytes
// as copying those rows and adding the noise in place, in one pass. `src` may be `dst`.
void ck_add_noise_rows(const uint8_t *src, ptrdiff_t srcStride, uint8_t *dst, ptrdiff_t stride, int step, int width,
                       int y0, int y1, const uint8_t *up, const uint8_t *down, int tileMask, int start, int rowJump);
// ck_add_noise_rows, except that the columns x0..<x1 of each row are noised in place in `dst` (what
// was drawn there over the source, e.g. the moving box) and only the others are read from `src`.
void ck_add_noise_rows_around(const uint8_t *src, ptrdiff_t srcStride, uint8_t *dst, ptrdiff_t stride, int step, int width,
                              int y0, int y1, int x0, int x1, const uint8_t *up, const uint8_t *down, int tileMask,
                              int start, int rowJump);
// The simulator's meters (CameraImaging.measure), integer sums over the luma samples at byte
// offset y·stride + x·step: ck_grid_sum adds the samples at x = x0, x0+xStep, … < x1 of rows
// y = y0, y0+yStep, … < y1 (the exposure meter); ck_contrast_sum adds |s(x+2) − s(x)| for
// x = x0, x0+2, … with x+2 < x1 on the same rows (the focus meter's contrast). Both store how many
// terms they added in *count. rowBytes: the bytes of a row that may be read from its start.
// The meters and the gray world use AVX2 (gathers, sums of absolute differences) where the CPU has
// it; ck_allow_avx2(0) keeps them to their plain loops (only to check the results are the same).
void ck_allow_avx2(int allowed);
int64_t ck_grid_sum(const uint8_t *base, ptrdiff_t stride, int step, int x0, int x1, int xStep,
                    int y0, int y1, int yStep, int64_t *count);
// The gray world (CameraImaging.measure): for rows y0, y0+yStep, … < y1 and the given column byte
// offsets, each sample's linear R, G and B (the linear table's entries for linearRGB's expressions),
// summed in row order into sums[0…2]; returns the sample count. Then, when there are samples and
// the G sum is > 0, the samples whose (s / g) / cast (cast: the R or B sum over the G sum) lies
// strictly between 1/1.5 and 1.5 for R and B (g > 0.002) are summed, in row order, into sums[3…5]
// and counted in *neutral. A sample's values depend on its three code values alone, so they are
// computed (and tested) once per distinct (Y, Cb, Cr). Scratch for `capacity` ≥ the sample count:
// values, 3 · capacity doubles; indices, capacity int32; keep, capacity bytes.
int ck_gray_world(const uint8_t *luma, ptrdiff_t lumaStride, const uint8_t *cb, ptrdiff_t cbStride, int cbSubY,
                  const uint8_t *cr, ptrdiff_t crStride, int crSubY, const ptrdiff_t *lumaColumns,
                  const ptrdiff_t *cbColumns, const ptrdiff_t *crColumns, int columns, int y0, int y1, int yStep,
                  const double *yp, const double *cp, const double *table, double *values, int32_t *indices,
                  uint8_t *keep, int capacity, int *neutral, double *sums);
int64_t ck_contrast_sum(const uint8_t *base, ptrdiff_t stride, int step, int rowBytes, int x0, int x1,
                        int y0, int y1, int yStep, int64_t *count);

// Fixture repacking (repack.c): packed device layouts <-> the planar layouts FFV1 codes, byte for
// byte. Widths and heights are even; packed rows are tight (width*2, chromaWidth*2, width*3 bytes).
void ck_unpack_yuyv(const uint8_t *src, uint8_t *y, ptrdiff_t ys, uint8_t *u, ptrdiff_t us,
                    uint8_t *v, ptrdiff_t vs, int width, int height);
void ck_pack_yuyv(const uint8_t *y, ptrdiff_t ys, const uint8_t *u, ptrdiff_t us,
                  const uint8_t *v, ptrdiff_t vs, uint8_t *dst, int width, int height);
void ck_unpack_nv12_chroma(const uint8_t *src, uint8_t *u, ptrdiff_t us, uint8_t *v, ptrdiff_t vs,
                           int chromaWidth, int chromaHeight);
void ck_pack_nv12_chroma(const uint8_t *u, ptrdiff_t us, const uint8_t *v, ptrdiff_t vs, uint8_t *dst,
                         int chromaWidth, int chromaHeight);
void ck_unpack_rgb24_to_bgr0(const uint8_t *src, uint8_t *p, ptrdiff_t ps, int width, int height);
void ck_pack_bgr0_to_rgb24(const uint8_t *p, ptrdiff_t ps, uint8_t *dst, int width, int height);

// libFuzzer's driver when the program is linked with it (ci/fuzz builds with -sanitize=fuzzer);
// otherwise returns -1. SwiftPM names an executable's entry point itself, so capture-fuzz calls the
// driver from that entry point instead of using libFuzzer's own main().
int ck_fuzzer_run_driver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

// Returns memory malloc keeps cached to the OS (glibc's malloc_trim(0)), so resident-memory
// samples (capture-soak) show what is in use rather than the allocator's cache.
int ck_release_free_memory(void);
// Bytes malloc has handed out and not had back (glibc's mallinfo2 uordblks + hblkhd): the heap in
// use, whatever the allocator keeps cached.
size_t ck_heap_bytes_in_use(void);

// Fixes glibc's mmap threshold at `bytes` (mallopt M_MMAP_THRESHOLD), which also turns off its
// dynamic raising: blocks at least that large are mapped and unmapped whole. Returns 1 on success.
int ck_fix_mmap_threshold(size_t bytes);

// Files (files.c). Swaps the names `a` and `b` atomically (renameat2 with RENAME_EXCHANGE: both
// must exist, nothing is replaced or removed). Returns 0, or -1 with errno set (EINVAL or ENOSYS
// where the filesystem or the kernel cannot exchange).
int ck_rename_exchange(const char *a, const char *b);

#endif
