import CaptureCore
import Foundation

/// Records what the session's devices deliver into a fixture (layout: `FixtureFormat`): each
/// connected device's profile, every buffer as delivered with its PTS, sequence number and the
/// drops before it, and control values that changed (read with each video frame, written at its PTS).
public final class FixtureRecordingOutput: CaptureOutput {
    public struct Summary: Sendable, Codable, Equatable {
        public var path: String
        /// Buffers per device, in the fixture's device order.
        public var buffers: [Int]
        public var controlChanges: Int
        public var fileSize: Int64
        /// Why it ended: requested, sessionStopped, maximumDuration, error.
        public var stopReason: String
    }

    private struct Active {
        var path: String
        /// Not thread-safe: one thread uses it at a time (in virtual time the session's thread
        /// under `state`, in real time only `writerQueue`; `end` after draining the queue). The lock
        /// is never contended and lets the compiler check that.
        var writer: Locked<FixtureWriter>
        var devices: [CaptureDevice]
        var counts: [Int]
        var start: MediaTime?
        var values: [[ControlID: ControlValue]]
        var changes = 0
    }

    private struct State {
        var active: Active?
        var maxRecordedDuration = MediaTime.invalid
        /// `record(to:)` waiting for the end.
        var waiter: CheckedContinuation<Result<Summary, CaptureError>, Never>?
        /// How the latest recording ended, kept until the next start for a `record(to:)` that
        /// awaits after the end (stopped from its `started` closure, or at once by a limit).
        var outcome: Result<Summary, CaptureError>?
    }

    public let attachment = OutputAttachment()
    private let state = Locked(State())
    /// Real-time pace: where buffers copied on the device's thread are written, in order.
    private let writerQueue = DispatchQueue(label: "CaptureKit.FixtureRecordingOutput.writer")
    /// The first failure of a queued write; the recording ends with it.
    private let writeFailure = Locked<CaptureError?>(nil)

    public init() {}

    /// Stops on its own once a buffer starts this long after the first one (invalid: no limit).
    public var maxRecordedDuration: MediaTime {
        get { state.withLock { $0.maxRecordedDuration } }
        set { state.withLock { $0.maxRecordedDuration = newValue } }
    }

    public var isRecording: Bool { state.withLock { $0.active != nil } }

    /// Buffers taken into the current recording so far, per device in the fixture's device order
    /// (empty when not recording); in real time some may still wait to be written, and are written
    /// before the recording ends.
    public var buffersRecorded: [Int] { state.withLock { $0.active?.counts ?? [] } }

    public func accepts(_ mediaType: MediaType) -> Bool { true }

    public var demand: OutputDemand { isRecording ? .ready : .idle }

    /// Starts writing `path` from the next buffer, with the profiles of the connected devices now.
    public func startRecording(to path: String) throws(CaptureError) {
        let connections = attachment.connections
        guard !connections.isEmpty else { throw .noInputs }
        guard attachment.isSessionRunning else { throw .sessionNotRunning }
        guard !isRecording else { throw .alreadyRecording }
        var devices: [CaptureDevice] = []
        for connection in connections.sorted(by: { $0.mediaType == .video && $1.mediaType != .video })
        where !devices.contains(where: { $0 === connection.input.device }) {
            devices.append(connection.input.device)
        }
        var profiles: [FixtureDevice] = []
        var values: [[ControlID: ControlValue]] = []
        for device in devices {
            var description = try device.driverDevice().description
            description.formats = device.formats
            let current = Self.controlValues(of: device)
            profiles.append(FixtureDevice(description: description,
                                          activeFormatIndex: device.formats.firstIndex(of: device.activeFormat) ?? 0,
                                          frameDuration: device.mediaType == .video ? device.activeVideoMinFrameDuration : .zero,
                                          controls: device.controls, controlValues: current))
            values.append(current)
        }
        let writer = Locked(try FixtureWriter(path: path, devices: profiles))
        state.withLock {
            $0.active = Active(path: path, writer: writer, devices: devices, counts: Array(repeating: 0, count: devices.count), values: values)
            $0.outcome = nil
        }
        attachment.demandChanged()
    }

    /// Finishes the file; returns what was written (nil when not recording).
    @discardableResult
    public func stopRecording() throws(CaptureError) -> Summary? {
        try end(reason: "requested")
    }

    /// Records until `stopRecording`, the duration limit, or the session stops (a replayed fixture
    /// that ends stops its session), and returns the summary. `started` runs right after the
    /// recording is armed (e.g. to start another output on the same next buffer); it may stop it.
    public func record(to path: String, started: () -> Void = {}) async throws(CaptureError) -> Summary {
        try startRecording(to: path)
        started()
        let result: Result<Summary, CaptureError> = await withCheckedContinuation { continuation in
            let ended = state.withLock { s -> Result<Summary, CaptureError>? in
                if let outcome = s.outcome { return outcome }
                s.waiter = continuation
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
        return try result.get()
    }

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let realtime = attachment.pace == .realtime
        // Real time: copy the bytes out here (the device's buffer goes back at once) and leave the
        // CRC, FFV1 coding and muxing to the writer queue, so a slow machine queues buffers in
        // memory instead of making the device drop frames. Virtual time writes here (deterministic).
        let copied = realtime ? FixtureWriter.Buffer(sample) : nil
        let outcome = state.withLock { s -> Result<Bool, CaptureError> in
            guard var active = s.active else { return .success(false) }
            defer { s.active = active }
            guard let device = active.devices.firstIndex(where: { $0 === connection.input.device }) else { return .success(false) }
            let start = active.start ?? sample.presentationTime
            active.start = start
            if s.maxRecordedDuration.isNumeric, sample.presentationTime - start >= s.maxRecordedDuration { return .success(true) }
            var changes: [FixtureControlChange] = []
            if sample.mediaType == .video {
                let now = Self.controlValues(of: active.devices[device])
                for (id, value) in now.sorted(by: { $0.key.description < $1.key.description }) where active.values[device][id] != value {
                    changes.append(FixtureControlChange(device: device, presentationTime: sample.presentationTime, control: id, value: value))
                }
                active.values[device] = now
            }
            active.counts[device] += 1
            active.changes += changes.count
            let confined = active.writer
            if let copied {
                writerQueue.async { [self, changes] in
                    do throws(CaptureError) {
                        guard writeFailure.withLock({ $0 == nil }) else { return }
                        try confined.withLock { (writer) throws(CaptureError) in
                            try writer.append(copied, device: device)
                            for change in changes { try writer.appendControlChange(change) }
                        }
                    } catch {
                        writeFailure.withLock { $0 = error }
                        DispatchQueue.global().async { _ = try? self.end(reason: "error") }
                    }
                }
                return .success(false)
            }
            do throws(CaptureError) {
                try confined.withLock { (writer) throws(CaptureError) in
                    try writer.append(sample, device: device)
                    for change in changes { try writer.appendControlChange(change) }
                }
                return .success(false)
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(true): _ = try? end(reason: "maximumDuration")
        case .success(false): break
        case .failure(let error): _ = try? end(reason: "error", error: error)
        }
    }

    public func sessionDidStop() {
        _ = try? end(reason: "sessionStopped")
    }

    private func end(reason: String, error: CaptureError? = nil) throws(CaptureError) -> Summary? {
        guard let active = state.withLock({ s -> Active? in
            defer { s.active = nil }
            return s.active
        }) else { return nil }
        writerQueue.sync {}  // every queued buffer is written before the end record
        var failure = error ?? writeFailure.withLock { f in
            defer { f = nil }
            return f
        }
        do throws(CaptureError) { try active.writer.withLock { (writer) throws(CaptureError) in try writer.finish() } } catch { failure = failure ?? error }
        let size = (try? FileManager.default.attributesOfItem(atPath: active.path)[.size] as? Int64) ?? 0
        let summary = Summary(path: active.path, buffers: active.counts, controlChanges: active.changes, fileSize: size,
                              stopReason: failure == nil ? reason : "error")
        let outcome: Result<Summary, CaptureError> = failure.map { .failure($0) } ?? .success(summary)
        let waiter = state.withLock { s in
            defer { s.waiter = nil }
            if s.waiter == nil { s.outcome = outcome }
            return s.waiter
        }
        waiter?.resume(returning: outcome)
        attachment.demandChanged()
        if let failure { throw failure }
        return summary
    }

    private static func controlValues(of device: CaptureDevice) -> [ControlID: ControlValue] {
        var values: [ControlID: ControlValue] = [:]
        for control in device.controls { values[control.id] = try? device.value(of: control.id) }
        return values
    }
}
