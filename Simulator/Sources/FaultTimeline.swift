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
    /// Seeded random bytes replace the entropy-coded data between the headers and EOI.
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
