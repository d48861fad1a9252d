import CFaceDetect
import CaptureCore
import Foundation

/// One face found by the cascade, in the full frame's pixels.
public struct DetectedFace: Sendable, Hashable {
    public var bounds: PixelBox
    /// The cascade's neighbour count (how many overlapping windows agreed).
    public var neighbours: Int
}

/// OpenCV's cascade classifier (objdetect) on grey images, thinly wrapped through
/// `Sources/CFaceDetect` (C++ behind a C header). One instance per detection thread.
public final class FaceDetector {
    private let detector: OpaquePointer
    public let cascadePath: String
    /// detectMultiScale's parameters.
    public var scaleFactor = 1.1
    public var minNeighbours = 5
    /// Smallest face looked for, in pixels of the image given to `detect` (default 40).
    public var minimumSize = 40

    /// Debian's `opencv-data` puts the cascades here.
    public static let cascadeDirectories = ["/usr/share/opencv4/haarcascades", "/usr/share/opencv/haarcascades"]
    public static let defaultCascade = "haarcascade_frontalface_default.xml"

    /// The default frontal-face cascade from `opencv-data`, or nil when it is not installed.
    public static func defaultCascadePath() -> String? {
        cascadeDirectories.map { $0 + "/" + defaultCascade }.first { FileManager.default.isReadableFile(atPath: $0) }
    }

    public init(cascadePath: String? = nil) throws(CaptureError) {
        guard let path = cascadePath ?? Self.defaultCascadePath() else {
            throw .detectorUnavailable(detector: "OpenCV face", reason: "no \(Self.defaultCascade) in \(Self.cascadeDirectories.joined(separator: " or ")) (Debian package opencv-data)")
        }
        var message = [CChar](repeating: 0, count: 256)
        let created = DetectorLibraries.lock.withLock { _ in ck_face_detector_create(path, &message, message.count) }
        guard let d = created else {
            throw .detectorUnavailable(detector: "OpenCV face", reason: "\(path): \(Self.text(message))")
        }
        detector = d
        self.cascadePath = path
    }

    /// A NUL-terminated C message buffer as a String.
    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit {
        let detector = self.detector
        DetectorLibraries.lock.withLock { _ in ck_face_detector_destroy(detector) }
    }

    /// Faces in `image`, in frame pixels. The image is searched at `downscale` (2: half size,
    /// about 4× faster); boxes are scaled back.
    public func detect(_ image: LumaImage, downscale: Int = 1) throws(CaptureError) -> [DetectedFace] {
        var source = image
        let k = max(1, downscale)
        if k > 1 {
            let w = image.width / k, h = image.height / k
            var small = [UInt8](repeating: 0, count: w * h)
            image.pixels.withUnsafeBufferPointer { src in
                for y in 0..<h {
                    for x in 0..<w {
                        var sum = 0
                        for dy in 0..<k { for dx in 0..<k { sum += Int(src[(y * k + dy) * image.width + x * k + dx]) } }
                        small[y * w + x] = UInt8(sum / (k * k))
                    }
                }
            }
            source = LumaImage(width: w, height: h, pixels: small)
        }
        var out = [ck_face_rect](repeating: ck_face_rect(), count: 64)
        var message = [CChar](repeating: 0, count: 256)
        let count = source.pixels.withUnsafeBufferPointer { p in
            DetectorLibraries.lock.withLock { _ in ck_face_detector_detect(detector, p.baseAddress, Int32(source.width), Int32(source.height), source.width,
                                    scaleFactor, Int32(minNeighbours), Int32(max(1, minimumSize / k)), 0,
                                    &out, Int32(out.count), &message, message.count) }
        }
        guard count >= 0 else { throw .detectorUnavailable(detector: "OpenCV face", reason: Self.text(message)) }
        return out.prefix(Int(min(count, Int32(out.count)))).map { r in
            DetectedFace(bounds: PixelBox(x: Double(Int(r.x) * k + image.origin.x), y: Double(Int(r.y) * k + image.origin.y),
                                          width: Double(Int(r.width) * k), height: Double(Int(r.height) * k)),
                         neighbours: Int(r.neighbours))
        }
    }
}

/// Gives faces IDs that stay the same while a face stays in view: a face matching (IoU ≥
/// `threshold`) a face of the previous detected frame keeps its ID, others get new ones.
public struct FaceTracker: Sendable {
    private var previous: [(id: Int, box: PixelBox)] = []
    private var nextID = 1
    public var threshold = 0.3

    public init() {}

    public mutating func assign(_ faces: [DetectedFace]) -> [(id: Int, face: DetectedFace)] {
        var used = Set<Int>()
        var result: [(id: Int, face: DetectedFace)] = []
        for face in faces {
            let best = previous.filter { !used.contains($0.id) }
                .map { ($0.id, $0.box.iou(face.bounds)) }.max { $0.1 < $1.1 }
            let id: Int
            if let best, best.1 >= threshold { id = best.0 } else { id = nextID; nextID += 1 }
            used.insert(id)
            result.append((id, face))
        }
        previous = result.map { ($0.id, $0.face.bounds) }
        return result
    }
}
