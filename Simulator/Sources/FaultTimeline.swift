import CaptureCore

/// When a scripted fault happens: at a point of the stream's virtual time (PTS from the stream's
/// start) or at a frame index of the device named by the event (video devices only).
public enum FaultTime: Sendable, Hashable {
    case time(MediaTime)
    case frame(Int64)
}

/// How a scripted MJPEG frame is damaged (the compressed bytes the camera delivers).
public enum FrameCorruption: String, Sendable, Hashable, CaseIterable {
    /// The frame ends early: the second half of the entropy-coded data is missing, EOI included.
    case truncated
    /// The start-of-image marker is overwritten, so no JPEG decoder accepts the frame.
    case badMarker
    /// Seeded random bytes (never 0xFF, so no stray markers) replace the entropy-coded data
    /// between the headers and EOI: a whole JPEG whose picture is noise.
    case garbage
}

/// One kind of fault. The simulator, the outputs and the harness each apply the kinds that
/// concern them; `FaultTimeline` is the one place a test says what goes wrong and when.
public enum Fault: Sendable, Hashable {
    // Video devices.
    /// The camera loses `count` consecutive frames from this point (a V4L2 sequence gap).
    case dropFrames(count: Int)
    /// From this point on, each frame's PTS moves by up to ± `microseconds`, a deterministic function
    /// of (seed, device, frame index); `frames` long (0: to the end).
    case jitter(microseconds: Int64, frames: Int)
    /// The device delivers nothing for `milliseconds`; the frames it would have captured in that
    /// span are lost (reported as a gap), and capture resumes on the frame grid after the stall.
    case stall(milliseconds: Int)
    /// The next MJPEG frame is damaged as described (MJPEG formats only).
    case corruptFrame(FrameCorruption)
    /// The next frame is delivered twice: same pixels, same sequence number, same PTS (a driver
    /// re-queueing a buffer).
    case duplicateFrame
    /// The driver hands back the next frame flagged as failed (V4L2's `V4L2_BUF_FLAG_ERROR`; on
    /// vivid, its "Inject V4L2_BUF_FLAG_ERROR" control, once "Inject VIDIOC_DQBUF Error"): the
    /// frame is lost, counted as a `corruptData` drop on the registry's `driverEvents`, and the
    /// next frame reports the gap.
    case bufferError
    // Any device.
    /// The device is unplugged: its streams fail with `deviceDisconnected`, its object is dead.
    case unplug
    /// The device is plugged back in and appears as a new device object.
    case replug
    /// Another process takes the device's configuration priority (`lockedByAnotherClient`).
    case configurationPriorityTaken(holder: String)
    /// The other process releases it.
    case configurationPriorityReleased
    // Audio devices.
    /// An xrun: `milliseconds` of audio are never captured; the next buffer reports the gap.
    case audioGap(milliseconds: Int)
    /// From this point on, the microphone's clock runs `ppm` parts per million fast (negative: slow)
    /// against the video clock.
    case clockDrift(ppm: Double)
    // The session and the system (no device).
    /// The session is interrupted (another app took the devices) until `interruptionEnded`.
    case interruptionBegan
    case interruptionEnded
    /// The authorization status of a media type changes (e.g. the user revokes, later grants).
    case authorization(mediaType: MediaType, status: AuthorizationStatus)
    // Outputs (applied by the output that writes files / encodes).
    /// Writes fail with ENOSPC once the output file holds `bytes`.
    case diskFull(bytes: Int64)
    /// From this point on each write to the output file stalls `milliseconds` of wall time.
    case slowDisk(milliseconds: Int)
    /// From this point on the video encoder takes at least `milliseconds` of wall time per frame
    /// (an encoder too slow for real time).
    case slowEncoder(milliseconds: Int)
}

/// One scripted fault: what, when and on which device (nil for session, system and output faults).
public struct FaultEvent: Sendable, Hashable {
    public var at: FaultTime
    public var device: String?
    public var fault: Fault

    public init(at: FaultTime, device: String? = nil, fault: Fault) {
        self.at = at
        self.device = device
        self.fault = fault
    }
}

/// What goes wrong during a simulated run, in virtual time. Deterministic: the same timeline,
/// seed and scenario give the same frames, gaps and timestamps on every run.
public struct FaultTimeline: Sendable, Hashable {
    public var events: [FaultEvent]

    public init(_ events: [FaultEvent] = []) { self.events = events }

    public mutating func add(_ fault: Fault, at time: FaultTime, device: String? = nil) {
        events.append(FaultEvent(at: time, device: device, fault: fault))
    }

    /// The events for one device (nil: session, system and output events), in the order given.
    public func events(for device: String?) -> [FaultEvent] { events.filter { $0.device == device } }
}

// MARK: What each fault concerns

extension Fault {
    /// Who applies a fault: a device's stream, the scenario (device and system state), or the
    /// output that writes the file.
    public enum Scope: String, Sendable, Hashable {
        /// Applied by a camera's stream to its frames (needs a video device).
        case video
        /// Applied by a microphone's stream to its samples (needs an audio device).
        case audio
        /// Changes a device's state (unplug, replug, configuration priority); needs a device.
        case device
        /// Changes the session or the system (interruptions: device optional; authorization: none).
        case session
        /// Applied by a file output (`MovieFileOutput`) through its `OutputFaults`; no device.
        case output
    }

    public var scope: Scope {
        switch self {
        case .dropFrames, .jitter, .stall, .corruptFrame, .duplicateFrame, .bufferError: return .video
        case .audioGap, .clockDrift: return .audio
        case .unplug, .replug, .configurationPriorityTaken, .configurationPriorityReleased: return .device
        case .interruptionBegan, .interruptionEnded, .authorization: return .session
        case .diskFull, .slowDisk, .slowEncoder: return .output
        }
    }

    /// The fault's name as the scenario format spells it.
    public var name: String {
        switch self {
        case .dropFrames: return "dropFrames"
        case .jitter: return "jitter"
        case .stall: return "stall"
        case .corruptFrame: return "corruptFrame"
        case .duplicateFrame: return "duplicateFrame"
        case .bufferError: return "bufferError"
        case .unplug: return "unplug"
        case .replug: return "replug"
        case .configurationPriorityTaken: return "configurationPriorityTaken"
        case .configurationPriorityReleased: return "configurationPriorityReleased"
        case .audioGap: return "audioGap"
        case .clockDrift: return "clockDrift"
        case .interruptionBegan: return "interruptionBegan"
        case .interruptionEnded: return "interruptionEnded"
        case .authorization: return "authorization"
        case .diskFull: return "diskFull"
        case .slowDisk: return "slowDisk"
        case .slowEncoder: return "slowEncoder"
        }
    }
}

// MARK: Validation

extension FaultTimeline {
    /// What validation needs to know of a device a timeline may name.
    public struct Device: Sendable, Hashable {
        public var uniqueID: String
        public var mediaType: MediaType
        /// The format the device streams in (video): `corruptFrame` needs `.mjpeg`. nil: not known
        /// (then `corruptFrame` is accepted and only fails to apply on raw formats).
        public var pixelFormat: PixelFormat?
        /// The frame duration (video), to check frame-timed events against the run's duration.
        public var frameDuration: MediaTime?

        public init(uniqueID: String, mediaType: MediaType, pixelFormat: PixelFormat? = nil, frameDuration: MediaTime? = nil) {
            self.uniqueID = uniqueID
            self.mediaType = mediaType
            self.pixelFormat = pixelFormat
            self.frameDuration = frameDuration
        }
    }

    /// Checks every event against the devices of the run and its duration (nil: open-ended), and
    /// throws `invalidFaultEvent` naming the first event (0-based) that cannot happen as written:
    /// an unknown or missing device, a device where none is allowed, a video fault on a microphone
    /// (or an audio fault on a camera), a frame time on anything but a camera, a negative time or
    /// parameter, a time past the end, `corruptFrame` on a format other than MJPEG, an
    /// `interruptionEnded`/`replug`/`configurationPriorityReleased` without its beginning before it.
    public func validate(devices: [Device], duration: MediaTime? = nil) throws(CaptureError) {
        let known = Dictionary(devices.map { ($0.uniqueID, $0) }, uniquingKeysWith: { first, _ in first })
        let names = devices.isEmpty ? "(none)" : devices.map(\.uniqueID).joined(separator: ", ")
        for (index, event) in events.enumerated() {
            func fail(_ problem: String, _ allowed: String) -> CaptureError {
                .invalidFaultEvent(event: index, problem: "\(event.fault.name): \(problem)", allowed: allowed)
            }
            let fault = event.fault
            var device: Device?
            if let id = event.device {
                guard let d = known[id] else { throw fail("unknown device '\(id)'", "one of the run's devices: \(names)") }
                device = d
            }
            switch fault.scope {
            case .video, .audio, .device:
                guard let device else { throw fail("names no device", "a device: \(names)") }
                if fault.scope == .video, device.mediaType != .video {
                    throw fail("'\(device.uniqueID)' is not a camera", "a video device")
                }
                if fault.scope == .audio, device.mediaType != .audio {
                    throw fail("'\(device.uniqueID)' is not a microphone", "an audio device")
                }
            case .session:
                if case .authorization = fault, let device {
                    throw fail("names device '\(device.uniqueID)'", "no device (authorization is per media type)")
                }
            case .output:
                if let device { throw fail("names device '\(device.uniqueID)'", "no device (output faults apply to the file output)") }
            }
            switch event.at {
            case .time(let t):
                guard t.isNumeric, t >= .zero else { throw fail("time \(t) is negative or not a number", "a time ≥ 0 s from the run's start") }
                if let duration, t > duration {
                    throw fail("time \(t.seconds) s lies past the end of the run (\(duration.seconds) s)", "a time within 0…\(duration.seconds) s")
                }
            case .frame(let n):
                guard let device, device.mediaType == .video else {
                    throw fail("is timed by frame index", "a time (frame indices exist for cameras only)")
                }
                guard n >= 0 else { throw fail("frame \(n) is negative", "a frame index ≥ 0") }
                if let duration, let frameDuration = device.frameDuration, frameDuration > .zero,
                   Double(n) * frameDuration.seconds > duration.seconds {
                    let last = Int64((duration.seconds / frameDuration.seconds).rounded(.down))
                    throw fail("frame \(n) lies past the end of the run (\(duration.seconds) s)", "a frame index within 0…\(last)")
                }
            }
            switch fault {
            case .dropFrames(let count):
                guard count > 0 else { throw fail("count \(count)", "a count ≥ 1") }
            case .jitter(let microseconds, let frames):
                guard microseconds >= 0, frames >= 0 else { throw fail("\(microseconds) µs over \(frames) frames", "microseconds ≥ 0, frames ≥ 0 (0: to the end)") }
            case .stall(let ms), .audioGap(let ms):
                guard ms > 0 else { throw fail("\(ms) ms", "milliseconds ≥ 1") }
            case .slowDisk(let ms), .slowEncoder(let ms):
                guard ms >= 0 else { throw fail("\(ms) ms", "milliseconds ≥ 0 (0 ends the slowness)") }
            case .corruptFrame:
                if let format = device?.pixelFormat, format != .mjpeg {
                    throw fail("'\(device!.uniqueID)' streams \(format), not MJPEG", "a device streaming MJPEG")
                }
            case .clockDrift(let ppm):
                guard ppm.isFinite, abs(ppm) <= 100_000 else { throw fail("\(ppm) ppm", "−100000…100000 ppm") }
            case .diskFull(let bytes):
                guard bytes > 0 else { throw fail("\(bytes) bytes", "bytes ≥ 1") }
            case .configurationPriorityTaken(let holder):
                guard !holder.isEmpty else { throw fail("an empty holder", "a description of the other process") }
            case .duplicateFrame, .bufferError, .unplug, .interruptionBegan, .authorization: break
            case .replug, .configurationPriorityReleased, .interruptionEnded:
                let opener: (Fault) -> Bool = { earlier in
                    switch (fault, earlier) {
                    case (.replug, .unplug), (.configurationPriorityReleased, .configurationPriorityTaken), (.interruptionEnded, .interruptionBegan): return true
                    default: return false
                    }
                }
                let before = events[..<index].contains { $0.device == event.device && opener($0.fault) }
                guard before else {
                    let what = fault == .replug ? "unplug" : fault == .interruptionEnded ? "interruptionBegan" : "configurationPriorityTaken"
                    throw fail("has no \(what) before it\(event.device.map { " for '\($0)'" } ?? "")", "\(fault.name) after a \(what) of the same device")
                }
            }
        }
    }
}

// MARK: Output faults

extension FaultTimeline {
    /// The timeline's output faults (`diskFull`, `slowDisk`, `slowEncoder`), for a file output.
    /// Frame-timed output events do not exist (validation refuses them); times are recording times.
    public var outputFaults: OutputFaults {
        var result = OutputFaults()
        for event in events {
            guard case .time(let t) = event.at else { continue }
            switch event.fault {
            case .diskFull(let bytes): if result.diskFull == nil { result.diskFull = .init(from: t.seconds, bytes: bytes) }
            case .slowDisk(let ms): result.slowDisk.append(.init(from: t.seconds, milliseconds: ms))
            case .slowEncoder(let ms): result.slowEncoder.append(.init(from: t.seconds, milliseconds: ms))
            default: break
            }
        }
        return result
    }
}
