import Foundation

/// One moment of a running capture, as a status line shows it.
public struct CaptureStatus: Sendable, Equatable {
    /// Wall-clock seconds since the recording began.
    public var elapsed: Double
    /// Seconds of media written (nil when the command cannot tell).
    public var mediaSeconds: Double?
    /// Video frames received, and frames lost before they arrived.
    public var frames: Int?
    public var dropped: Int?
    /// Bytes written so far.
    public var fileSize: Int64?
    /// Samples waiting for the encoder (real time).
    public var encoderQueue: Int?
    /// Peak level of the newest audio (dBFS).
    public var audioLevelDBFS: Float?
    /// Newest video time minus the end of the newest audio (s), when both inputs run.
    public var avDrift: Double?

    public init(elapsed: Double, mediaSeconds: Double?, frames: Int? = nil, dropped: Int? = nil, fileSize: Int64? = nil,
                encoderQueue: Int? = nil, audioLevelDBFS: Float? = nil, avDrift: Double? = nil) {
        self.elapsed = elapsed; self.mediaSeconds = mediaSeconds; self.frames = frames; self.dropped = dropped
        self.fileSize = fileSize; self.encoderQueue = encoderQueue; self.audioLevelDBFS = audioLevelDBFS; self.avDrift = avDrift
    }
}

/// Renders `CaptureStatus` as one line in the style of ffmpeg's progress line:
/// `frame=  300 fps= 30 drop=0 size=    1024kB time=00:00:10.00 bitrate= 838.9kbits/s queue=0 level=[#######---] -12dB A-V=+3ms elapsed=10.0s`.
/// A pure function of its input, so it is tested without a terminal.
public enum StatusLine {
    public static func render(_ s: CaptureStatus) -> String {
        var parts: [String] = []
        if let frames = s.frames {
            parts.append("frame=" + pad("\(frames)", 5))
            let fps = s.elapsed > 0 ? Double(frames) / s.elapsed : 0
            parts.append("fps=" + pad(String(format: fps < 10 ? "%.1f" : "%.0f", fps), 4))
            parts.append("drop=\(s.dropped ?? 0)")
        }
        if let size = s.fileSize { parts.append("size=" + pad("\(size / 1024)kB", 9)) }
        parts.append("time=" + (s.mediaSeconds.map(clock) ?? "N/A"))
        if let size = s.fileSize, let media = s.mediaSeconds, media > 0 {
            parts.append("bitrate=" + pad(String(format: "%.1fkbits/s", Double(size * 8) / media / 1000), 14))
        } else {
            parts.append("bitrate=" + pad("N/A", 14))
        }
        if let queue = s.encoderQueue { parts.append("queue=\(queue)") }
        if let level = s.audioLevelDBFS { parts.append("level=\(meter(level)) " + pad(String(format: "%.0fdB", max(-99, level)), 5)) }
        if let drift = s.avDrift { parts.append(String(format: "A-V=%+.0fms", drift * 1000)) }
        parts.append(String(format: "elapsed=%.1fs", s.elapsed))
        return parts.joined(separator: " ")
    }

    /// A ten-cell meter over −60…0 dBFS: `[######----]`.
    public static func meter(_ dBFS: Float, cells: Int = 10) -> String {
        let filled = Int(((max(-60, min(0, dBFS)) + 60) / 60 * Float(cells)).rounded())
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: cells - filled) + "]"
    }

    /// `HH:MM:SS.cc`.
    public static func clock(_ seconds: Double) -> String {
        let centis = Int((max(0, seconds) * 100).rounded(.down))
        return String(format: "%02d:%02d:%02d.%02d", centis / 360_000, centis / 6000 % 60, centis / 100 % 60, centis % 100)
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }
}
