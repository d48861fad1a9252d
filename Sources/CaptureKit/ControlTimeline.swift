import CaptureCore
import Foundation

/// Changes to a camera at given media times while it runs: controls (`focus.mode`, `zoom.factor`,
/// `scene.luminance`, … — `CaptureDevice.controlKeys`), the format (`format=1280x720@240[:420v]`)
/// and the frame rate (`frameRate=60`). `capture record --control-at SECONDS:KEY=VALUE` builds one;
/// scenario files use the same type.
///
/// Times are seconds of media from the first video frame the timeline sees (the first recorded
/// frame when it is added with the recording). A change applies on the session's delivery thread
/// when the first frame at or past its time is delivered, under the device's configuration lock,
/// so it reaches the stream at the next frame boundary; `applied` then holds the PTS of the first
/// frame delivered with it. In virtual pace this is deterministic: the same timeline gives the same
/// file on every run.
public final class ControlTimeline: CaptureOutput {
    /// One change of the timeline.
    public enum Change: Sendable, Hashable, CustomStringConvertible {
        /// A control by key and text value, as `--control` takes it.
        case control(key: String, value: String)
        /// `WxH@FPS[:FOURCC]`: a format and a constant frame rate.
        case format(FormatRequest)
        /// A constant frame rate within the active format's ranges.
        case frameRate(Int)

        public var description: String {
            switch self {
            case .control(let key, let value): return "\(key)=\(value)"
            case .format(let request):
                return "format=\(request.dimensions)@\(request.frameRate)" + (request.fourcc.map { ":\($0)" } ?? "")
            case .frameRate(let fps): return "frameRate=\(fps)"
            }
        }
    }

    public struct Entry: Sendable, Hashable {
        /// Seconds of media from the first video frame.
        public var time: Double
        public var change: Change
        public init(time: Double, change: Change) {
            self.time = time
            self.change = change
        }
    }

    /// A change that was made: when it was asked for, and the PTS of the first frame delivered with
    /// it (nil for controls whose driver does not report frames, or not yet known).
    public struct Applied: Sendable, Codable, Hashable {
        public var time: Double
        public var change: String
        /// Session PTS in seconds of the first frame with the change.
        public var presentationTime: Double?
        /// `presentationTime` from the first video frame the timeline saw (media time).
        public var mediaTime: Double?
        /// Why the change could not be made (the change was skipped; the recording went on).
        public var error: String?
    }

    public let entries: [Entry]
    public let device: CaptureDevice
    public let attachment = OutputAttachment()
    private struct State {
        var origin: MediaTime?
        var next = 0
        var applied: [Applied] = []
    }
    private let state = Locked(State())

    /// Parses `SECONDS:KEY=VALUE` entries (e.g. `2.5:zoom.factor=2`, `1:format=1280x720@240`,
    /// `3:frameRate=60`); keys are checked against the device now, values when they apply.
    public init(device: CaptureDevice, entries texts: [String]) throws(CaptureError) {
        var parsed: [Entry] = []
        for text in texts { parsed.append(try Self.parse(text)) }
        self.device = device
        for entry in parsed {
            if case .control(let key, _) = entry.change, !CaptureDevice.controlKeys.contains(key) {
                throw .unknownControl(key: key, known: (CaptureDevice.controlKeys + ["format", "frameRate"]).joined(separator: ", "))
            }
        }
        // Stable: entries at the same time apply in the order given.
        entries = parsed.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    public init(device: CaptureDevice, entries: [Entry]) {
        self.device = device
        self.entries = entries.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    /// One `SECONDS:KEY=VALUE` entry.
    public static func parse(_ text: String) throws(CaptureError) -> Entry {
        let usage = "--control-at '\(text)' must look like SECONDS:KEY=VALUE, e.g. 2.5:zoom.factor=2, 1:format=1280x720@240:420v or 3:frameRate=60"
        guard let colon = text.firstIndex(of: ":"), let time = Double(text[..<colon]), time >= 0, time.isFinite else {
            throw .invalidArgument(usage)
        }
        let rest = text[text.index(after: colon)...]
        guard let eq = rest.firstIndex(of: "="), eq != rest.startIndex, rest.index(after: eq) != rest.endIndex else {
            throw .invalidArgument(usage)
        }
        let key = String(rest[..<eq]), value = String(rest[rest.index(after: eq)...])
        switch key {
        case "format":
            guard let request = FormatRequest(value) else {
                throw .invalidArgument("\(text): format must look like 1280x720@240 or 1280x720@240:420v (pixel formats: 420v, 420f, NV12, I420, YUYV, MJPG)")
            }
            return Entry(time: time, change: .format(request))
        case "frameRate":
            guard let fps = Int(value), fps > 0, fps <= FormatRequest.maximumFrameRate else {
                throw .invalidArgument("\(text): frameRate must be a whole number of frames per second, 1…\(FormatRequest.maximumFrameRate)")
            }
            return Entry(time: time, change: .frameRate(fps))
        default:
            return Entry(time: time, change: .control(key: key, value: value))
        }
    }

    /// What has been applied so far, in order (PTS filled in as the frames come).
    public var applied: [Applied] { state.withLock { $0.applied } }

    /// The format of `device` a request names: its size, a range holding its rate and, when given,
    /// its pixel format (420v/420f tell NV12's ranges apart).
    public static func format(for request: FormatRequest, on device: CaptureDevice) throws(CaptureError) -> DeviceFormat {
        let match = device.formats.first { format in
            guard format.dimensions == request.dimensions, format.supports(frameDuration: request.frameDuration) else { return false }
            guard let fourcc = request.fourcc else { return true }
            guard format.pixelFormat == PixelFormat(name: fourcc) else { return false }
            switch fourcc.lowercased() {
            case "420f": return format.isFullRange
            case "420v": return !format.isFullRange
            default: return true
            }
        }
        guard let match else {
            let available = device.formats.map { "\(CaptureDevice.formatName($0)) @ \($0.frameRateRanges.map(\.description).joined(separator: ", "))" }
            throw .formatNotSupported("\(device.uniqueID) has no format \(request.dimensions)@\(request.frameRate) (it has: \(available.joined(separator: "; ")))")
        }
        return match
    }

    /// Makes one change now, under the configuration lock (taken here); `completion` gets the PTS of
    /// the first frame with it.
    public static func apply(_ change: Change, to device: CaptureDevice,
                             completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        // Scene parameters describe the world, not the device: no lock.
        if case .control(let key, let value) = change, ControlID.custom(key).isSceneParameter {
            try device.applyControl(key: key, value: value)
            return
        }
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        switch change {
        case .control(let key, let value):
            try device.applyControl(key: key, value: value)
        case .format(let request):
            let format = try format(for: request, on: device)
            try device.setActiveFormat(format)
            try device.setActiveVideoMaxFrameDuration(request.frameDuration)
            try device.setActiveVideoMinFrameDuration(request.frameDuration, completion: completion)
            return
        case .frameRate(let fps):
            let duration = MediaTime(value: 1, timescale: Int32(fps))
            guard device.activeFormat.supports(frameDuration: duration) else {
                throw .valueOutOfRange(control: "frameRate", value: "\(fps)",
                                       allowed: device.activeFormat.frameRateRanges.map(\.description).joined(separator: ", "))
            }
            // Lower the minimum first when slowing down (min ≤ max always holds on the way).
            try device.setActiveVideoMaxFrameDuration(duration)
            try device.setActiveVideoMinFrameDuration(duration, completion: completion)
            return
        }
        completion?(.invalid)
    }

    // MARK: CaptureOutput

    public func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }

    /// Never holds a virtual-time session back.
    public var demand: OutputDemand { .idle }

    public func sessionDidStop() {}

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        guard connection.input.device === device else { return }
        let due = state.withLock { s -> [(Int, Entry, MediaTime)] in
            let origin = s.origin ?? sample.presentationTime
            s.origin = origin
            let now = (sample.presentationTime - origin).seconds
            var due: [(Int, Entry, MediaTime)] = []
            while s.next < entries.count, entries[s.next].time <= now + 1e-9 {
                let entry = entries[s.next]
                due.append((s.applied.count, entry, origin))
                s.applied.append(Applied(time: entry.time, change: entry.change.description))
                s.next += 1
            }
            return due
        }
        for (slot, entry, origin) in due {
            do {
                try Self.apply(entry.change, to: device) { [state] pts in
                    guard pts.isValid else { return }
                    state.withLock { s in
                        s.applied[slot].presentationTime = pts.seconds
                        s.applied[slot].mediaTime = (pts - origin).seconds
                    }
                }
            } catch {
                state.withLock { $0.applied[slot].error = error.description }
            }
        }
    }
}
