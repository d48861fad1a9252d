#include "CCaptureShims.h"
#include <malloc.h>
#include <errno.h>
#include <libavutil/error.h>
#include <libavutil/avutil.h>
#include <libavutil/log.h>
#include <linux/videodev2.h>
#include <alsa/asoundlib.h>

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

extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t)) __attribute__((weak));

int ck_fuzzer_run_driver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size)) {
    return LLVMFuzzerRunDriver ? LLVMFuzzerRunDriver(argc, argv, callback) : -1;
}

int ck_release_free_memory(void) { return malloc_trim(0); }

size_t ck_heap_bytes_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
