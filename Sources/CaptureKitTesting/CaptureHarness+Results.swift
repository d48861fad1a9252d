import CaptureKit
import Foundation

/// What a harness run produced, as plain values for `#expect`.
extension CaptureHarness {
    /// One error (or interruption) the session or an output reported, and when.
    public struct DeliveredError: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The `CaptureError` case name (`deviceDisconnected`, `diskFull`, …) or `interrupted` /
        /// `interruptionEnded`.
        public var type: String
        /// Seconds of PTS: for a device's error the end of its last delivered sample; for a
        /// recording's error the media it kept; otherwise the end of the last delivered sample.
        public var pts: Double
        public var message: String
        /// Where it came from: `session` or `movie`.
        public var source: String
        public var description: String { "\(type) at \(String(format: "%.3f", pts)) s (\(source))" }
    }

    /// What the data outputs received, as values.
    public struct Delivered: Sendable, Hashable, Codable {
        /// Sequence numbers of the delivered video frames, in order.
        public var frameSequence: [Int64] = []
        /// PTS (seconds) of the delivered video frames, in order.
        public var framePTS: [Double] = []
        /// Frames reported dropped (`didDrop`), by reason.
        public var droppedByReason: [String: Int] = [:]
        /// Audio sample frames delivered, and lost in discontinuities (xruns).
        public var audioFrames: Int64 = 0
        public var audioFramesLost: Int64 = 0
        public var audioSampleRate: Int = 0
        /// Metadata objects found, by type name.
        public var metadataObjects: [String: Int] = [:]

        public var frameCount: Int { frameSequence.count }
        /// Sequence numbers between the first and last delivered that never arrived.
        public var missingFrames: [Int64] {
            guard let first = frameSequence.first, let last = frameSequence.last, last > first else { return [] }
            let seen = Set(frameSequence)
            return (first...last).filter { !seen.contains($0) }
        }
        /// Sequence numbers delivered more than once.
        public var duplicatedFrames: [Int64] {
            var seen = Set<Int64>(), twice: [Int64] = []
            for n in frameSequence where !seen.insert(n).inserted { twice.append(n) }
            return twice
        }
        /// Milliseconds of audio lost to xruns.
        public var audioGapMilliseconds: Double { audioSampleRate > 0 ? Double(audioFramesLost) * 1000 / Double(audioSampleRate) : 0 }
        /// The largest distance (microseconds) of a frame's PTS from the frame grid of the first one.
        /// The grid is placed where it fits best (half the spread of the PTS residuals), so a
        /// jittered first frame does not count twice.
        public func maximumJitterMicroseconds(frameDuration: Double) -> Double {
            guard let firstIndex = frameSequence.first, frameDuration > 0 else { return 0 }
            let residuals = zip(frameSequence, framePTS).map { n, pts in pts - Double(n - firstIndex) * frameDuration }
            guard let low = residuals.min(), let high = residuals.max() else { return 0 }
            return ((high - low) / 2 * 1e6).rounded()
        }
    }

    /// A finished run: the recording's summary and, when a movie was written, what is in it.
    public struct Recording: Sendable {
        /// The movie's summary (nil without a movie output or when nothing was recorded).
        public var summary: RecordingSummary?
        /// The movie's path (nil without one).
        public var path: String?
        /// What the data outputs received.
        public var delivered: Delivered
        /// Errors and interruptions, in the order they were reported.
        public var errors: [DeliveredError]
        /// The camera's frame duration in seconds (0 without a camera).
        public var frameDuration: Double

        public var stopReason: String? { summary?.stopReason }
        /// Frames the movie holds (the data output's count without a movie).
        public var frameCount: Int { summary?.videoFrames ?? delivered.frameCount }
        /// Frame indices missing from the movie (its frame stamps), or from the data output when
        /// there is no movie: those injected, and — in a passing test — no others.
        public var missingFrames: [Int] {
            if let analysis { return analysis.droppedIndices }
            return delivered.missingFrames.map { Int($0) }
        }
        /// The movie analysed (frame stamps, sync markers, tone); nil without a movie.
        public var analysis: RecordingReport?
        /// The largest |A/V offset| over the sync markers with both sides (seconds); nil when none.
        public var maximumAVOffset: Double? {
            let offsets = analysis?.syncMarkers.compactMap(\.offset) ?? []
            return offsets.map(abs).max()
        }
        public var dominantFrequency: Double? { analysis?.dominantFrequency }
        public var audioLevelDBFS: Double? { analysis?.audioRMSDBFS }
        /// The movie's container and streams as read back (nil without a movie).
        public var file: MediaFileInfo?
        /// Frames the camera's driver handed back flagged as failed (`corruptData` drops on the
        /// registry's driver events: a simulated `bufferError`, V4L2's `V4L2_BUF_FLAG_ERROR`).
        public var damagedFrames = 0
    }
}
