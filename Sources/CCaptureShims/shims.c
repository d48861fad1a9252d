#include "CCaptureShims.h"
#include <malloc.h>
#include <errno.h>
#include <libavutil/error.h>
#include <libavutil/avutil.h>
#include <libavutil/log.h>
#include <linux/videodev2.h>
#include <alsa/asoundlib.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

int ck_averror(int posix_errno) { return AVERROR(posix_errno); }
int ck_averror_eof(void) { return AVERROR_EOF; }
int ck_averror_eagain(void) { return AVERROR(EAGAIN); }
int64_t ck_av_nopts_value(void) { return AV_NOPTS_VALUE; }
void ck_av_set_log_quiet(int quiet) { av_log_set_level(quiet ? AV_LOG_ERROR : AV_LOG_INFO); }

unsigned long ck_vidioc_querycap(void) { return VIDIOC_QUERYCAP; }
unsigned long ck_vidioc_enum_fmt(void) { return VIDIOC_ENUM_FMT; }
unsigned long ck_vidioc_enum_framesizes(void) { return VIDIOC_ENUM_FRAMESIZES; }
unsigned long ck_vidioc_enum_frameintervals(void) { return VIDIOC_ENUM_FRAMEINTERVALS; }
unsigned long ck_vidioc_s_fmt(void) { return VIDIOC_S_FMT; }
unsigned long ck_vidioc_g_fmt(void) { return VIDIOC_G_FMT; }
unsigned long ck_vidioc_s_parm(void) { return VIDIOC_S_PARM; }
unsigned long ck_vidioc_g_parm(void) { return VIDIOC_G_PARM; }
unsigned long ck_vidioc_reqbufs(void) { return VIDIOC_REQBUFS; }
unsigned long ck_vidioc_querybuf(void) { return VIDIOC_QUERYBUF; }
unsigned long ck_vidioc_qbuf(void) { return VIDIOC_QBUF; }
unsigned long ck_vidioc_dqbuf(void) { return VIDIOC_DQBUF; }
unsigned long ck_vidioc_streamon(void) { return VIDIOC_STREAMON; }
unsigned long ck_vidioc_streamoff(void) { return VIDIOC_STREAMOFF; }
unsigned long ck_vidioc_queryctrl(void) { return VIDIOC_QUERYCTRL; }
unsigned long ck_vidioc_g_ctrl(void) { return VIDIOC_G_CTRL; }
unsigned long ck_vidioc_s_ctrl(void) { return VIDIOC_S_CTRL; }
unsigned long ck_vidioc_s_priority(void) { return VIDIOC_S_PRIORITY; }
uint32_t ck_v4l2_fourcc(char a, char b, char c, char d) { return v4l2_fourcc(a, b, c, d); }
unsigned long ck_vidioc_g_priority(void) { return VIDIOC_G_PRIORITY; }
unsigned long ck_vidioc_querymenu(void) { return VIDIOC_QUERYMENU; }
unsigned long ck_vidioc_query_ext_ctrl(void) { return VIDIOC_QUERY_EXT_CTRL; }

static void ck_alsa_silent(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
void ck_alsa_set_quiet(int quiet) { snd_lib_error_set_handler(quiet ? ck_alsa_silent : NULL); }

// Log routing: FFmpeg's av_log and ALSA's error handler hand whole lines to a Swift sink.
static _Atomic(ck_log_sink) ck_ffmpeg_sink;
static _Atomic(ck_log_sink) ck_alsa_sink;
// FFmpeg may print one line in several calls: the parts are joined per thread until a newline.
static _Thread_local char ck_av_pending[2048];
static _Thread_local size_t ck_av_pending_length;
static _Thread_local int ck_av_print_prefix = 1;

static void ck_av_log_callback(void *avcl, int level, const char *fmt, va_list vl) {
    if (level > av_log_get_level()) return;
    ck_log_sink sink = atomic_load(&ck_ffmpeg_sink);
    if (!sink) return;
    char part[1024];
    if (av_log_format_line2(avcl, level, fmt, vl, part, sizeof part, &ck_av_print_prefix) < 0) return;
    size_t n = strlen(part);
    size_t room = sizeof ck_av_pending - 1 - ck_av_pending_length;
    if (n > room) n = room;
    memcpy(ck_av_pending + ck_av_pending_length, part, n);
    ck_av_pending_length += n;
    ck_av_pending[ck_av_pending_length] = 0;
    int complete = ck_av_pending_length > 0 && (ck_av_pending[ck_av_pending_length - 1] == '\n' || n == room);
    if (!complete) return;
    while (ck_av_pending_length > 0 && (ck_av_pending[ck_av_pending_length - 1] == '\n' || ck_av_pending[ck_av_pending_length - 1] == '\r'))
        ck_av_pending[--ck_av_pending_length] = 0;
    if (ck_av_pending_length > 0) sink(level, ck_av_pending);
    ck_av_pending_length = 0;
    ck_av_pending[0] = 0;
}

void ck_log_route_ffmpeg(ck_log_sink sink) {
    atomic_store(&ck_ffmpeg_sink, sink);
    av_log_set_callback(sink ? ck_av_log_callback : av_log_default_callback);
}

static void ck_alsa_log_handler(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    ck_log_sink sink = atomic_load(&ck_alsa_sink);
    if (!sink) return;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    char line_text[1400];
    // ALSA's own format: "ALSA lib file:line:(function) message[: error]".
    if (err)
        snprintf(line_text, sizeof line_text, "%s:%d:(%s) %s: %s", file ? file : "?", line, function ? function : "?", message, snd_strerror(err));
    else
        snprintf(line_text, sizeof line_text, "%s:%d:(%s) %s", file ? file : "?", line, function ? function : "?", message);
    sink(err, line_text);
}

void ck_log_route_alsa(ck_log_sink sink) {
    atomic_store(&ck_alsa_sink, sink);
    snd_lib_error_set_handler(sink ? ck_alsa_log_handler : NULL);
}

extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t)) __attribute__((weak));

int ck_fuzzer_run_driver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size)) {
    return LLVMFuzzerRunDriver ? LLVMFuzzerRunDriver(argc, argv, callback) : -1;
}

int ck_release_free_memory(void) { return malloc_trim(0); }

size_t ck_heap_bytes_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

int ck_fix_mmap_threshold(size_t bytes) {
    return mallopt(M_MMAP_THRESHOLD, (int)bytes);
}
