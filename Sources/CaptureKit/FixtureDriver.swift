import CaptureCore
import Foundation

/// Recorded fixtures as devices. `fixture:PATH` is the fixture's first device (its camera, or its
/// only microphone); `fixture:PATH#microphone` / `#camera` / `#N` pick one by role or index;
/// `fixture:PATH?loop=1` replays it in a loop instead of ending. Any such ID works wherever a
/// device ID does: the registry asks `lookUpDevice`, which reads the file; discovery lists the
/// fixtures given at init and every one looked up since.
///
/// A fixture device presents the recorded profile (every format, the recorded one as default, the
/// controls with their recorded values) and streams only the recorded format (others:
/// `formatNotSupported`). Buffers come with their recorded PTS relative to the recording's first
/// buffer (plus the session's start), so gaps and jitter are reproduced; recorded drops arrive as
/// `discontinuity`; control values follow the recorded changes. Real-time sessions are paced by the
/// recorded timestamps; virtual ones are not. Setting a control stores the value (the recorded
/// frames do not change). At the end, `nextSample` returns nil (or the replay starts over, looping).
public struct FixtureDriver: CaptureDriver {
    public let scheme = "fixture"
    private let catalog: FixtureCatalog

    public init(paths: [String] = []) {
        catalog = FixtureCatalog(listed: paths.map { "fixture:" + $0 })
    }

    public func discoverDevices() throws(CaptureError) -> [DeviceDescription] {
        var result: [DeviceDescription] = []
        for id in catalog.knownIDs {
            if let description = try? catalog.entry(for: id).description { result.append(description) }
        }
        return result
    }

    public func lookUpDevice(uniqueID: String) throws(CaptureError) -> DeviceDescription? {
        guard uniqueID.hasPrefix("fixture:") else { return nil }
        return try catalog.entry(for: uniqueID).description
    }

    public func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        guard uniqueID.hasPrefix("fixture:") else { throw .deviceNotFound(uniqueID) }
        let entry = try catalog.entry(for: uniqueID)
        return FixtureReplayDevice(entry: entry)
    }
}

/// What a fixture device ID asks for.
struct FixtureAddress: Hashable {
    var path: String
    var loop = false
    /// A role (`camera`, `microphone`) or an index; nil: the first device.
    var selector: String?

    init(uniqueID: String) throws(CaptureError) {
        var rest = String(uniqueID.dropFirst("fixture:".count))
        if let hash = rest.lastIndex(of: "#") {
            selector = String(rest[rest.index(after: hash)...])
            rest = String(rest[..<hash])
        }
        if let question = rest.lastIndex(of: "?") {
            for item in rest[rest.index(after: question)...].split(separator: "&") {
                let pair = item.split(separator: "=", maxSplits: 1).map(String.init)
                guard pair.count == 2, pair[0] == "loop", ["0", "1"].contains(pair[1]) else {
                    throw .invalidArgument("\(uniqueID): unknown fixture option '\(item)' (known: loop=0|1)")
                }
                loop = pair[1] == "1"
            }
            rest = String(rest[..<question])
        }
        guard !rest.isEmpty else { throw .invalidArgument("\(uniqueID): a fixture ID is fixture:PATH") }
        path = rest
    }
}

/// One fixture device: the file's contents, which of its devices, and how to replay it.
final class FixtureEntry: Sendable {
    let uniqueID: String
    let contents: FixtureContents
    let index: Int
    let loop: Bool
    let description: DeviceDescription

    init(uniqueID: String, contents: FixtureContents, index: Int, loop: Bool) {
        self.uniqueID = uniqueID
        self.contents = contents
        self.index = index
        self.loop = loop
        let recorded = contents.devices[index]
        var description = recorded.description
        description.uniqueID = uniqueID
        description.localizedName = recorded.description.localizedName + " (fixture)"
        description.defaultFormatIndex = recorded.activeFormatIndex
        self.description = description
    }

    var recorded: FixtureDevice { contents.devices[index] }
}

/// Fixtures read so far (by path) and the IDs discovery lists.
final class FixtureCatalog: Sendable {
    private let state: Locked<(ids: [String], files: [String: FixtureContents])>

    init(listed: [String]) { state = Locked((listed, [:])) }

    var knownIDs: [String] { state.withLock { $0.ids } }

    func entry(for uniqueID: String) throws(CaptureError) -> FixtureEntry {
        let address = try FixtureAddress(uniqueID: uniqueID)
        let contents: FixtureContents
        if let cached = state.withLock({ $0.files[address.path] }) {
            contents = cached
        } else {
            contents = try FixtureReader.read(path: address.path)
        }
        let index: Int
        switch address.selector {
        case nil: index = 0
        case "camera"?, "video"?:
            guard let i = contents.devices.firstIndex(where: { $0.description.mediaType == .video }) else { throw .deviceNotFound(uniqueID) }
            index = i
        case "microphone"?, "audio"?:
            guard let i = contents.devices.firstIndex(where: { $0.description.mediaType == .audio }) else { throw .deviceNotFound(uniqueID) }
            index = i
        case let other?:
            guard let i = Int(other), contents.devices.indices.contains(i) else { throw .deviceNotFound(uniqueID) }
            index = i
        }
        state.withLock { s in
            s.files[address.path] = contents
            if !s.ids.contains(uniqueID) { s.ids.append(uniqueID) }
        }
        return FixtureEntry(uniqueID: uniqueID, contents: contents, index: index, loop: address.loop)
    }
}

/// An opened fixture device.
final class FixtureReplayDevice: DriverDevice {
    let entry: FixtureEntry
    private let values: Locked<[ControlID: ControlValue]>

    init(entry: FixtureEntry) {
        self.entry = entry
        var initial: [ControlID: ControlValue] = [:]
        for control in entry.recorded.controls { initial[control.id] = control.defaultValue }
        initial.merge(entry.recorded.controlValues) { $1 }
        values = Locked(initial)
    }

    var description: DeviceDescription { entry.description }
    var controls: [ControlDescription] { entry.recorded.controls }

    func value(of control: ControlID) throws(CaptureError) -> ControlValue {
        guard let value = values.withLock({ $0[control] }) else {
            throw .controlNotSupported(device: entry.uniqueID, control: control.description, detail: "the recorded device has no such control")
        }
        return value
    }

    func setValue(_ value: ControlValue, for control: ControlID) throws(CaptureError) {
        guard let description = controls.first(where: { $0.id == control }) else {
            throw .controlNotSupported(device: entry.uniqueID, control: control.description, detail: "the recorded device has no such control")
        }
        guard !description.isReadOnly else {
            throw .controlNotSupported(device: entry.uniqueID, control: control.description, detail: "read-only")
        }
        values.withLock { $0[control] = value }
    }

    /// Applies recorded control changes up to `time` (recorded clock).
    func applyChanges(from start: Int, upTo time: MediaTime) -> Int {
        var next = start
        let changes = entry.contents.controlChanges
        while next < changes.count, changes[next].presentationTime <= time {
            if changes[next].device == entry.index {
                let change = changes[next]
                values.withLock { $0[change.control] = change.value }
            }
            next += 1
        }
        return next
    }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        let recorded = entry.recorded.activeFormat
        guard description.formats.contains(configuration.format) else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(entry.uniqueID)")
        }
        guard configuration.format == recorded else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(entry.uniqueID): the fixture holds only "
                                      + "\(recorded.formatDescription) buffers")
        }
        return FixtureReplayStream(device: self, pace: configuration.pace)
    }
}

/// Replays one recorded stream.
final class FixtureReplayStream: DriverStream {
    private let device: FixtureReplayDevice
    private let samples: [FixtureSample]
    private let pace: CapturePace
    private let stopSignal = StopSignal()
    private let pool: PixelBufferPool?
    /// Next index, completed laps, anchor (replay time of the recording's origin), next control change.
    private let state = Locked<(next: Int, lap: Int64, anchor: MediaTime, change: Int)>((0, 0, .zero, 0))

    init(device: FixtureReplayDevice, pace: CapturePace) {
        self.device = device
        self.samples = device.entry.contents.samples[device.entry.index]
        self.pace = pace
        if case .video(let pixelFormat, let size) = device.entry.recorded.activeFormat.formatDescription {
            pool = PixelBufferPool(format: pixelFormat, width: size.width, height: size.height, maximumBufferCount: 8)
        } else {
            pool = nil
        }
    }

    func start(at hostTime: MediaTime) throws(CaptureError) {
        state.withLock { $0 = (0, 0, hostTime, 0) }
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        if stopSignal.isStopped { return nil }
        let contents = device.entry.contents
        let claimed = state.withLock { s -> (index: Int, lap: Int64, anchor: MediaTime, change: Int)? in
            if s.next >= samples.count {
                guard device.entry.loop, !samples.isEmpty else { return nil }
                s.next = 0
                s.lap += 1
            }
            defer { s.next += 1 }
            return (s.next, s.lap, s.anchor, s.change)
        }
        guard let claimed else { return nil }
        let recorded = samples[claimed.index]
        let lapOffset = contents.span * claimed.lap
        let pts = claimed.anchor + lapOffset + (recorded.presentationTime - contents.origin)
        if pace == .realtime {
            guard stopSignal.sleep(untilHostTime: pts + recorded.duration) else { return nil }
        }
        let next = device.applyChanges(from: claimed.index == 0 ? 0 : claimed.change, upTo: recorded.presentationTime)
        state.withLock { $0.change = next }
        let sequenceSpan = (samples.last?.sequenceNumber ?? 0) - (samples.first?.sequenceNumber ?? 0) + 1
        let sequence = recorded.sequenceNumber + claimed.lap * max(sequenceSpan, 1)
        let format = device.entry.recorded.activeFormat.formatDescription
        return SampleBuffer(payload: try payload(recorded, format), formatDescription: format, presentationTime: pts,
                            duration: recorded.duration, sequenceNumber: sequence, discontinuity: recorded.discontinuity)
    }

    private func payload(_ sample: FixtureSample, _ format: FormatDescription) throws(CaptureError) -> SampleBuffer.Payload {
        switch format {
        case .audio(let audioFormat):
            let frames = sample.data.count / audioFormat.bytesPerFrame
            let buffer = AudioPCMBuffer(format: audioFormat, frameCapacity: frames)
            buffer.setProducerFrameLength(frames)
            buffer.withProducerBytes { raw in raw.copyBytes(from: sample.data) }
            return .audio(buffer)
        case .video(let pixelFormat, let size):
            let buffer = pool?.makeBuffer() ?? PixelBuffer(format: pixelFormat, width: size.width, height: size.height)
            if pixelFormat.isCompressed {
                let stored: Result<Void, CaptureError> = sample.data.withUnsafeBytes { raw in
                    do throws(CaptureError) { return .success(try buffer.setCompressedData(raw)) } catch { return .failure(error) }
                }
                try stored.get()
                return .pixels(buffer)
            }
            var offset = 0
            for (plane, geometry) in pixelFormat.planes(width: size.width, height: size.height).enumerated() {
                buffer.withProducerPlane(plane) { destination in
                    sample.data.withUnsafeBytes { source in
                        for row in 0..<geometry.rows {
                            let target = UnsafeMutableRawBufferPointer(rebasing: destination[(row * buffer.bytesPerRow[plane])...])
                            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + geometry.bytesPerRow]))
                            offset += geometry.bytesPerRow
                        }
                    }
                }
            }
            return .pixels(buffer)
        }
    }

    func stop() { stopSignal.stop() }
}
