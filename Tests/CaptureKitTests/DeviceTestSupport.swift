import CaptureKit
import CaptureKitTesting
import Foundation

/// A simulator whose devices carry IDs unique to one test (`sim:back-1a2b3c…`), so the
/// process-wide configuration locks of tests running in parallel never meet.
struct DeviceRig {
    let registry: DeviceRegistry
    let scenario: SimulatorScenario
    let suffix: String

    /// The suffix keeps device IDs (and so the process-wide configuration locks) apart between tests
    /// running in parallel. It comes from the calling test's name, not from randomness: the
    /// simulator mixes the device ID into its seed, so a random suffix would change the picture —
    /// and what auto-focus settles on — from run to run.
    init(seed: UInt64 = 0, scenario: SimulatorScenario = SimulatorScenario(), suffix: String? = nil,
         caller: String = #function) throws {
        let suffix = suffix ?? String(caller.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) }
            .map(Character.init)).lowercased()
        let profiles = try SimulatedDeviceProfile.builtIn().map { p -> SimulatedDeviceProfile in
            var p = p
            p.uniqueID += "-" + suffix
            return p
        }
        self.scenario = scenario
        self.suffix = suffix
        registry = DeviceRegistry(drivers: [SimulatorDriver(seed: seed, profiles: profiles, scenario: scenario)])
    }

    /// `sim:back` → this rig's `sim:back-<suffix>`.
    func id(_ name: String) -> String { name + "-" + suffix }

    func device(_ name: String) throws -> CaptureDevice { try registry.device(uniqueID: id(name)) }
}

/// What the tests measure on a delivered NV12 frame (video range), in the scene's own regions.
struct FrameStats: Sendable {
    var presentationTime: MediaTime
    var index: Int64
    /// Mean luma of the 18 % grey card (left quarter of the bottom third), and its linear light.
    var greyLuma: Double
    var greyLinear: Double
    var greyStdDev: Double
    /// Linear R / B of the grey card.
    var greyRedOverBlue: Double
    /// Mean |ΔY| between horizontal neighbours in the textured band.
    var sharpness: Double
    /// Mean luma of the centre (the exposure metering region) and of the whole picture below the stamp.
    var centreLuma: Double
    var meanLuma: Double
    var stamp: UInt32?
    var flash: Bool
    var hash: UInt64

    init(_ sample: SampleBuffer) {
        let buffer = sample.pixelBuffer!
        presentationTime = sample.presentationTime
        index = sample.sequenceNumber
        let w = buffer.width, h = buffer.height
        let y = buffer.baseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
        let uv = buffer.baseAddress(ofPlane: 1).assumingMemoryBound(to: UInt8.self)
        let ys = buffer.bytesPerRow[0], uvs = buffer.bytesPerRow[1]
        var sum = 0.0, sq = 0.0, cb = 0.0, cr = 0.0, n = 0.0
        for row in (2 * h / 3 + 8)..<(h - 8) {
            for x in 8..<(w / 4 - 8) {
                let v = Double(y[row * ys + x])
                sum += v; sq += v * v; n += 1
                cb += Double(uv[(row / 2) * uvs + (x / 2) * 2])
                cr += Double(uv[(row / 2) * uvs + (x / 2) * 2 + 1])
            }
        }
        greyLuma = sum / n
        greyStdDev = (sq / n - greyLuma * greyLuma).squareRoot()
        greyLinear = SyntheticFrameRenderer.linearLight(ofLuma: greyLuma)
        let yp = (greyLuma - 16) / 219, cbp = (cb / n - 128) / 224, crp = (cr / n - 128) / 224
        func lin(_ v: Double) -> Double { pow(min(max(v, 1e-6), 1), SyntheticFrameRenderer.gamma) }
        greyRedOverBlue = lin(yp + 1.402 * crp) / lin(yp + 1.772 * cbp)
        var diff = 0.0, count = 0.0
        for row in stride(from: 2 * h / 3 + 8, to: h - h / 8 - 8, by: 2) {
            for x in (w / 4 + 8)..<(w * 7 / 8 - 8) {
                diff += abs(Double(y[row * ys + x + 1]) - Double(y[row * ys + x]))
                count += 1
            }
        }
        sharpness = diff / count
        let band = FrameMarkerLayout(width: w, height: h).stampBandHeight
        var centre = 0.0, cn = 0.0, all = 0.0, an = 0.0
        for row in stride(from: band, to: h, by: 4) {
            for x in stride(from: 0, to: w, by: 4) {
                let v = Double(y[row * ys + x])
                all += v; an += 1
                if row >= h / 4 && row < 3 * h / 4 && x >= w / 4 && x < 3 * w / 4 { centre += v; cn += 1 }
            }
        }
        centreLuma = centre / cn
        meanLuma = all / an
        let luma = LumaPlane(base: UnsafeRawBufferPointer(start: buffer.baseAddress(ofPlane: 0), count: ys * h),
                             width: w, height: h, bytesPerRow: ys)
        stamp = FrameStampReader.frameIndex(in: luma)
        flash = FrameStampReader.hasSyncFlash(in: luma)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for plane in 0..<buffer.planeCount {
            let base = buffer.baseAddress(ofPlane: plane).assumingMemoryBound(to: UInt8.self)
            let rowBytes = plane == 0 ? w : w
            for row in 0..<buffer.planeRows[plane] {
                for x in 0..<rowBytes { hash = (hash ^ UInt64(base[row * buffer.bytesPerRow[plane] + x])) &* 0x100_0000_01b3 }
            }
        }
        self.hash = hash
    }
}

/// A test output that measures each delivered video frame and may run a script after it (on the
/// session's delivery thread, so in virtual pace a change made after frame n applies to frame n+1).
final class FrameCollector: CaptureOutput {
    let attachment = OutputAttachment()
    private let limit: Int
    private let script: @Sendable (Int, SampleBuffer) -> Void
    private let state = Locked<[FrameStats]>([])

    init(limit: Int, script: @escaping @Sendable (Int, SampleBuffer) -> Void) {
        self.limit = limit
        self.script = script
    }

    func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }
    var demand: OutputDemand { state.withLock { $0.count < limit ? .ready : .idle } }
    var frames: [FrameStats] { state.withLock { $0 } }

    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let stats = FrameStats(sample)
        let count = state.withLock { s -> Int in
            guard s.count < limit else { return -1 }
            s.append(stats)
            return s.count
        }
        guard count > 0 else { return }
        script(count - 1, sample)
        if count == limit { attachment.demandChanged() }
    }

    func sessionDidStop() {}

    func waitUntilDone(seconds: Double = 120) async throws {
        let limit = self.limit
        try await eventually("\(limit) frames (\(frames.count) arrived)", timeout: .seconds(seconds)) { frames.count >= limit }
    }
}

enum DeviceTestSupport {
    /// Captures `frames` frames from `device` in virtual time, running `script` after each one.
    static func capture(_ device: CaptureDevice, frames: Int,
                        script: @escaping @Sendable (Int, SampleBuffer) -> Void = { _, _ in }) async throws -> [FrameStats] {
        let session = CaptureSession(pace: .virtual)
        // Keep the format the test chose (the default `high` preset would pick its own).
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: device))
        let collector = FrameCollector(limit: frames, script: script)
        try session.addOutput(collector)
        try session.startRunning()
        defer { session.stopRunning() }
        try await collector.waitUntilDone()
        return collector.frames
    }

    /// Runs `body` holding the configuration lock (for scripts; failures are programmer errors in the test).
    static func configure(_ device: CaptureDevice, _ body: () throws(CaptureError) -> Void) {
        do {
            try device.lockForConfiguration()
            defer { device.unlockForConfiguration() }
            try body()
        } catch {
            fatalError("test script failed: \(error)")
        }
    }

    /// A steady camera for physics measurements: custom exposure, white balance and focus locked.
    static func fixCamera(_ device: CaptureDevice, duration: MediaTime = MediaTime(value: 1, timescale: 100), iso: Double = 100) throws {
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        try device.setExposureModeCustom(duration: duration, iso: iso)
        try device.setWhiteBalanceModeLocked(gains: .unity)
        if device.isLockingFocusWithCustomLensPositionSupported { try device.setFocusModeLocked(lensPosition: 0.9) }
    }

    /// Collects values from an AsyncStream in the background.
    final class Recorder<T: Sendable>: Sendable {
        private let values = Locked<[T]>([])
        private let task: Task<Void, Never>
        init(_ stream: AsyncStream<T>) {
            let values = self.values
            task = Task {
                for await v in stream { values.mutate { $0.append(v) } }
            }
        }
        var all: [T] { values.value }
        func waitFor(count: Int, seconds: Double = 10) async -> [T] {
            await waitUntil(timeout: .seconds(seconds)) { all.count >= count }
            return all
        }
        func cancel() { task.cancel() }
    }
}

/// Shorthands for test code that shares a value with escaping closures.
extension Locked where Value: Sendable {
    var value: Value { withLock { $0 } }
    func mutate(_ body: (inout Value) -> Void) { withLock { body(&$0) } }
}
