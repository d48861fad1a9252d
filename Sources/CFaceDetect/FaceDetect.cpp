#include "CFaceDetect.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/objdetect.hpp>

#include <cstdio>
#include <exception>
#include <vector>

struct ck_face_detector {
    cv::CascadeClassifier cascade;
};

static void ck_copy_error(const char *message, char *error, size_t error_size) {
    if (error != nullptr && error_size > 0) std::snprintf(error, error_size, "%s", message);
}

ck_face_detector *ck_face_detector_create(const char *cascade_path, char *error, size_t error_size) {
    try {
        auto *detector = new ck_face_detector();
        if (!detector->cascade.load(cascade_path) || detector->cascade.empty()) {
            delete detector;
            ck_copy_error("OpenCV could not load the cascade file", error, error_size);
            return nullptr;
        }
        return detector;
    } catch (const std::exception &e) {
        ck_copy_error(e.what(), error, error_size);
        return nullptr;
    }
}

void ck_face_detector_destroy(ck_face_detector *detector) { delete detector; }

int ck_face_detector_detect(ck_face_detector *detector, const uint8_t *plane, int width, int height, size_t stride,
                            double scale_factor, int min_neighbours, int min_size, int max_size,
                            ck_face_rect *out, int capacity, char *error, size_t error_size) {
    try {
        // A header over the caller's plane: no copy.
        cv::Mat grey(height, width, CV_8UC1, const_cast<uint8_t *>(plane), stride);
        std::vector<cv::Rect> faces;
        std::vector<int> neighbours;
        detector->cascade.detectMultiScale(grey, faces, neighbours, scale_factor, min_neighbours, 0,
                                           cv::Size(min_size, min_size),
                                           max_size > 0 ? cv::Size(max_size, max_size) : cv::Size());
        int count = static_cast<int>(faces.size());
        for (int i = 0; i < count && i < capacity; i++) {
            out[i].x = faces[i].x;
            out[i].y = faces[i].y;
            out[i].width = faces[i].width;
            out[i].height = faces[i].height;
            out[i].neighbours = i < static_cast<int>(neighbours.size()) ? neighbours[i] : 0;
        }
        return count;
    } catch (const std::exception &e) {
        ck_copy_error(e.what(), error, error_size);
        return -1;
    }
}
