#ifndef CFACEDETECT_H
#define CFACEDETECT_H
// A C face of OpenCV's cascade classifier (objdetect), for Swift. Thin: load a cascade file, run
// detectMultiScale on an 8-bit grey plane (a camera's luma, read in place through its stride).
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ck_face_detector ck_face_detector;

typedef struct {
    int32_t x, y, width, height;
    /// detectMultiScale's neighbour count for the box (higher: more certain).
    int32_t neighbours;
} ck_face_rect;

/// Loads a cascade (Haar or LBP XML). NULL when the file cannot be read; `error` gets a message.
ck_face_detector *ck_face_detector_create(const char *cascade_path, char *error, size_t error_size);
void ck_face_detector_destroy(ck_face_detector *detector);

/// Finds faces in a width×height grey plane. Writes at most `capacity` boxes, returns how many
/// were found (may exceed capacity), or -1 on an OpenCV exception (message in `error`).
int ck_face_detector_detect(ck_face_detector *detector, const uint8_t *plane, int width, int height, size_t stride,
                            double scale_factor, int min_neighbours, int min_size, int max_size,
                            ck_face_rect *out, int capacity, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif
#endif
