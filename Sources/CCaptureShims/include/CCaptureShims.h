// What Swift cannot import from the C headers: function-like macros, compound
// literals and ioctl request numbers. Everything here is a thin, total function.
#ifndef CCAPTURE_SHIMS_H
#define CCAPTURE_SHIMS_H
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

#endif
