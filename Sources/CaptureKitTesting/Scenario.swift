import CaptureKit
import Foundation

/// A scenario file (version 1, JSON; Simulator/Scenarios/README.md documents every key): the
/// devices, what happens to them (controls and a `FaultTimeline`), the outputs, and what must
/// come out. `Scenario.load` decodes strictly: an unknown key, a wrong type, a fault past the end
/// or an unknown device is a `CaptureError.invalidScenario` naming the file, the JSON path of the
/// field (`faults[2].at`) and what is allowed.
public struct Scenario: Sendable {
    public static let version = 1

    /// A device of the scenario: a unique ID (simulator profile, `/dev/videoN`, `hw:…`) or a fixture.
    public struct Device: Sendable, Hashable {
        public var uniqueID: String
        /// `WxH@FPS[:FOURCC]`.
        public var format: String?
        /// `KEY=VALUE` controls applied before the run.
        public var controls: [String] = []
        public init(uniqueID: String, format: String? = nil, controls: [String] = []) {
            self.uniqueID = uniqueID
            self.format = format
            self.controls = controls
        }
    }

    /// The outputs attached to the session.
    public struct Outputs: Sendable, Hashable {
        /// The movie's container (`mp4`, `mov`, `mkv`); nil: no movie output.
        public var movieContainer: String? = "mp4"
        public var movieCodec: String?
        public var fragmentInterval: Double = 1
        public var videoData = true
        public var audioData = true
        public var metadataTypes: [String] = []
        public init() {}
    }

    /// A closed range of numbers (a bare number in the file is an exact value).
    public struct Range: Sendable, Hashable, Codable, CustomStringConvertible {
        public var min: Double?
        public var max: Double?
        public init(min: Double? = nil, max: Double? = nil) { self.min = min; self.max = max }
        public func contains(_ value: Double) -> Bool { (min.map { value >= $0 } ?? true) && (max.map { value <= $0 } ?? true) }
        public var description: String {
            func f(_ v: Double) -> String { v == v.rounded() && abs(v) < 1e12 ? String(Int64(v)) : String(format: "%g", v) }
            switch (min, max) {
            case let (a?, b?) where a == b: return f(a)
            case let (a?, b?): return "\(f(a))…\(f(b))"
            case let (a?, nil): return "≥ \(f(a))"
            case let (nil, b?): return "≤ \(f(b))"
            default: return "any"
            }
        }
    }

    /// An error that must be delivered: its type and, optionally, its PTS.
    public struct ExpectedError: Sendable, Hashable {
        public var type: String
        public var at: Double?
        public var tolerance: Double = 0.1
        public init(type: String, at: Double? = nil, tolerance: Double = 0.1) {
            self.type = type
            self.at = at
            self.tolerance = tolerance
        }
    }

    /// What must come out. Every key is optional; a scenario states at least one.
    public struct Expectations: Sendable, Hashable {
        /// Video frames in the movie (the data output's count without a movie).
        public var frames: Range?
        /// Video frames the data output received.
        public var deliveredFrames: Range?
        /// Exactly these frame indices are missing (those injected and no others).
        public var missingFrames: [Int]?
        /// Exactly these frame indices were delivered twice.
        public var duplicatedFrames: [Int]?
        /// Seconds: the largest |A/V offset| over the sync markers.
        public var maxAVOffset: Double?
        public var stopReason: String?
        /// ffprobe reads every stream and decodes frames.
        public var playable: Bool?
        /// gst-discoverer-1.0 reads the file (skipped, and said so, when GStreamer is not installed).
        public var gstreamer: Bool?
        /// Exactly these errors, in order.
        public var errors: [ExpectedError]?
        /// Metadata objects found per type (`qr`, `face`, …).
        public var metadata: [String: Range]?
        /// The recorded tone's dominant frequency (Hz) and RMS level (dBFS).
        public var audioFrequency: Range?
        public var audioLevel: Range?
        /// Milliseconds of audio lost to xruns (the audio data output's discontinuities).
        public var audioGapMilliseconds: Range?
        /// The largest distance (µs) of a delivered frame's PTS from the frame grid.
        public var jitterMicroseconds: Range?
        /// Damaged camera frames the movie left out.
        public var invalidFramesSkipped: Range?
        /// Frames the camera's driver handed back flagged as failed (`bufferError`; V4L2's
        /// `V4L2_BUF_FLAG_ERROR`), counted as `corruptData` drops on the registry's driver events.
        public var damagedFrames: Range?

        public init() {}
        public var isEmpty: Bool { self == Expectations() }
    }

    /// The file it came from (shown in every message about it).
    public var file: String
    public var name: String
    public var summary: String?
    public var seed: UInt64 = 0
    public var pace: CapturePace = .virtual
    /// Seconds of media.
    public var duration: Double
    public var camera: Device?
    public var microphone: Device?
    public var outputs = Outputs()
    /// `SECONDS:KEY=VALUE` changes (`capture record --control-at`).
    public var controls: [String] = []
    public var faults = FaultTimeline()
    public var expectations = Expectations()

    /// The camera's frame rate from its format (30 when none is given).
    public var frameRate: Double {
        camera?.format.flatMap(FormatRequest.init).map { Double($0.frameRate) } ?? 30
    }

    /// Runs the scenario on another camera (`capture test --camera`): its faults follow, and a
    /// V4L2 camera (`/dev/videoN`) runs in real time. Nothing changes without a camera.
    public mutating func replaceCamera(with uniqueID: String) {
        guard let old = camera?.uniqueID else { return }
        camera?.uniqueID = uniqueID
        for i in faults.events.indices where faults.events[i].device == old { faults.events[i].device = uniqueID }
        if uniqueID.hasPrefix("/dev/video") { pace = .realtime }
    }

    /// Reads and validates a scenario file.
    public static func load(path: String) throws(CaptureError) -> Scenario {
        try requireRegularFile(path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidScenario(file: path, field: "(file)", problem: "cannot be read (no such file, or not readable)")
        }
        let base = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        return try parse(data, file: path, defaultName: base, directory: (path as NSString).deletingLastPathComponent)
    }

    /// Decodes a scenario document; `file` names it in errors, `directory` resolves relative fixture paths.
    public static func parse(_ data: Data, file: String, defaultName: String = "scenario", directory: String = ".") throws(CaptureError) -> Scenario {
        let json: Any
        do {
            json = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw .invalidScenario(file: file, field: "(document)", problem: "not valid JSON (\(error.localizedDescription))")
        }
        return try ScenarioParser(file: file, directory: directory).scenario(json, defaultName: defaultName)
    }

    /// The scenarios a list of files and folders names: folders give their `*.json` files (sorted;
    /// README and non-JSON files are ignored), in the order given.
    public static func files(in paths: [String]) throws(CaptureError) -> [String] {
        var result: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw .fileOperationFailed(path: path, reason: "no such scenario file or folder")
            }
            if isDirectory.boolValue {
                let names = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
                result += names.map { (path as NSString).appendingPathComponent($0) }
            } else {
                result.append(path)
            }
        }
        return result
    }
}
