import CFFmpeg
import CaptureCore
import Foundation
import Logging

/// The container a movie is written in.
public enum MovieContainer: String, Sendable, CaseIterable {
    case mp4, mov
    /// Matroska (`.mkv`): holds H.264, MJPEG (copied or encoded) and AAC. FFmpeg 5.1's muxer has
    /// no place for a display matrix, so rotation and mirroring are refused for it.
    case mkv

    /// The container for a file name's extension, if it is one CaptureKit writes.
    public init?(pathExtension: String) {
        self.init(rawValue: pathExtension.lowercased())
    }
}

/// The file types `MovieWriter` (and the asset writer and audio recorder built on it) can write.
public enum MediaFileType: String, Sendable, Hashable, CaseIterable, Codable {
    case mp4, mov, m4a, wav, mkv

    /// The type for a file name's extension, if it is one CaptureKit writes.
    public init?(pathExtension: String) {
        self.init(rawValue: pathExtension.lowercased())
    }

    /// libavformat's muxer for this type (`ipod` writes the M4A brand).
    var muxerName: String {
        switch self {
        case .mp4: return "mp4"
        case .mov: return "mov"
        case .m4a: return "ipod"
        case .wav: return "wav"
        case .mkv: return "matroska"
        }
    }

    /// Whether the type can hold a video track.
    public var canHoldVideo: Bool { self == .mp4 || self == .mov || self == .mkv }

    /// The movie file type of a container.
    public init(_ container: MovieContainer) {
        switch container {
        case .mp4: self = .mp4
        case .mov: self = .mov
        case .mkv: self = .mkv
        }
    }
}

/// A video track whose frames arrive already compressed and are muxed as they are: no decoding,
/// no encoding (`ffmpeg -c:v copy`). Today that is MJPEG, every frame a keyframe.
public struct VideoPassthroughSettings: Sendable, Hashable {
    /// The compressed format the frames arrive in (`.mjpeg`).
    public var format: PixelFormat
    public var dimensions: Dimensions
    /// Nominal time between frames.
    public var frameDuration: MediaTime
    /// The track's tick; nil: one tick per frame duration (frame n at tick n). See
    /// `VideoEncoderSettings.timeBase`.
    public var timeBase: MediaTime?

    public init(format: PixelFormat = .mjpeg, dimensions: Dimensions, frameDuration: MediaTime, timeBase: MediaTime? = nil) {
        self.format = format
        self.dimensions = dimensions
        self.frameDuration = frameDuration
        self.timeBase = timeBase
    }

    /// The tick `appendCompressedVideo` counts in.
    var tick: MediaTime { timeBase ?? frameDuration }
}

/// Video track time bases. A track ticking once per frame cannot hold a real device's jittered
/// timestamps; 1/90000 s (MPEG's clock) can, and still puts every common frame rate on whole ticks.
public enum TrackTimeBase {
    /// 1/90000 s when the frame duration is a whole number of such ticks (every common rate),
    /// otherwise the frame duration itself.
    public static func fine(for frameDuration: MediaTime) -> MediaTime {
        guard frameDuration.isNumeric, frameDuration.value > 0 else { return frameDuration }
        let (product, overflow) = frameDuration.value.multipliedReportingOverflow(by: 90_000)
        return !overflow && product % Int64(frameDuration.timescale) == 0 ? MediaTime(value: 1, timescale: 90_000) : frameDuration
    }

    /// `time` in whole ticks of `base` (rounded to nearest).
    public static func ticks(_ time: MediaTime, in base: MediaTime) -> Int64 {
        if base.value == 1 { return time.convertScale(base.timescale).value }
        return Int64((time.seconds / base.seconds).rounded())
    }

    /// Ticks per frame (at least 1).
    public static func ticksPerFrame(_ frameDuration: MediaTime, in base: MediaTime) -> Int64 {
        max(1, ticks(frameDuration, in: base))
    }
}

/// Checks that a buffer holds one whole JPEG: SOI (FF D8) at its first byte and EOI (FF D9) at its
/// end, or within its last 64 bytes (some UVC cameras pad a frame after EOI).
public enum JPEGFrameCheck {
    /// Why `bytes` are not a whole JPEG frame, or nil when they are; `length` is the frame's size up
    /// to and including EOI (trailing padding excluded).
    public static func inspect(_ bytes: UnsafeRawBufferPointer) -> (length: Int, problem: String?) {
        guard bytes.count >= 4 else { return (0, "only \(bytes.count) bytes") }
        guard bytes[0] == 0xFF, bytes[1] == 0xD8 else {
            return (0, String(format: "no JPEG start-of-image marker (first bytes %02X %02X, expected FF D8)", bytes[0], bytes[1]))
        }
        var end = bytes.count
        let floor = max(2, bytes.count - 64)
        while end - 2 >= floor {
            if bytes[end - 2] == 0xFF && bytes[end - 1] == 0xD9 { return (end, nil) }
            end -= 1
        }
        return (0, "no JPEG end-of-image marker (FF D9) at the end of the frame's \(bytes.count) bytes: the frame is truncated")
    }
}

extension MovieWriter {
    /// How the file is laid out and shown.
    public struct Options: Sendable, Hashable {
        /// Write a fragment (moof+mdat) every this often, so a crash loses at most one interval;
        /// nil writes one moov at the end (a crash leaves an unreadable file).
        public var fragmentInterval: MediaTime?
        /// Clockwise degrees a player should rotate the video (written as the display matrix).
        public var rotation: Int = 0
        /// A player should mirror the video left-right (also in the display matrix).
        public var mirrored = false
        /// A fragmented MP4/MOV becomes a regular movie when it finishes (`MovieDefragmenter`), as
        /// AVFoundation's do, so every reader hides the AAC priming; false keeps the fragments.
        public var defragmentsOnFinish = true
        /// Injected faults (tests, simulated runs): none by default.
        public var faults = OutputFaults()
        /// Tests: false encodes each audio buffer in place, on the appending thread, as before
        /// `AudioEncodingLane` (to compare the two: the files must be the same bytes).
        package var encodesAudioOnLane = true
        public init(fragmentInterval: MediaTime? = nil, rotation: Int = 0, mirrored: Bool = false,
                    defragmentsOnFinish: Bool = true) {
            self.fragmentInterval = fragmentInterval
            self.rotation = rotation
            self.mirrored = mirrored
            self.defragmentsOnFinish = defragmentsOnFinish
        }
    }

    /// What the file holds in complete fragments: the bytes up to the end of the last fragment the
    /// OS took whole, the media in them, and how many fragments. All zero until the first fragment
    /// is on disk (and always, for WAV and unfragmented MKV).
    public struct CompletePart: Sendable, Equatable {
        public var bytes: Int64 = 0
        public var seconds: Double = 0
        public var videoFrames = 0
        public var fragments = 0
    }
}
