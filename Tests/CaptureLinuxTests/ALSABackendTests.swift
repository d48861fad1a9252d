import CaptureKit
import CaptureKitTesting
import Foundation
import Testing
@testable import CaptureALSA

/// The ALSA backend against a fake sound card (`FakeALSA`): discovery, the calls a start makes,
/// hardware timestamps, and every error path — busy, refused parameters, overrun (EPIPE), suspend
/// (ESTRPIPE), unplug (ENODEV, DISCONNECTED), a failed recovery — with the exact typed error and
/// the call trace. Each test has its own fake and driver, so its own `DeviceEventCenter`.
@Suite struct ALSABackendTests {
    static let id = FakeALSA.pcmName
    static let mono = AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .int16)
    static let ms: Int64 = 1_000_000

    static func ns(_ value: Int64) -> MediaTime { MediaTime(value: value, timescale: 1_000_000_000) }

    /// A mono S16 stream on the fake, the trace cleared of the probing `openDevice` did.
    static func stream(_ fake: FakeALSA, pace: CapturePace = .realtime) throws -> any DriverStream {
        try streamAndEvents(fake, pace: pace).stream
    }

    /// The stream and its driver's event center.
    static func streamAndEvents(_ fake: FakeALSA, pace: CapturePace = .realtime) throws -> (stream: any DriverStream, events: DeviceEventCenter) {
        let driver = ALSADriver(system: fake)
        let device = try driver.openDevice(uniqueID: id)
        let format = try #require(device.description.formats.first { $0.audioFormat == mono })
        let stream = try device.makeStream(StreamConfiguration(format: format, frameDuration: .invalid, pace: pace))
        fake.clearTrace()
        return (stream, driver.events)
    }

    static func values(_ sample: SampleBuffer) -> Set<Int16> {
        guard let buffer = sample.audioBuffer else { return [] }
        return buffer.withBytes { Set($0.bindMemory(to: Int16.self)) }
    }

    @Test func discoveryListsTheCardPCMWithItsFormats() throws {
        let fake = FakeALSA()
        let driver = ALSADriver(system: fake)
        let devices = try driver.discoverDevices()
        #expect(devices.map(\.uniqueID) == [Self.id])
        let pcm = try #require(devices.first)
        #expect(pcm.localizedName == "Fake Card: Fake PCM (device 0, subdevice 0)")
        #expect(pcm.modelID == "alsa card 0 Fake")
        #expect(pcm.mediaType == .audio)
        #expect(pcm.formats.compactMap(\.audioFormat) == [
            AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .int16),
            AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .float32),
            AudioStreamFormat(sampleRate: 48_000, channelCount: 2, sampleFormat: .int16),
            AudioStreamFormat(sampleRate: 48_000, channelCount: 2, sampleFormat: .float32),
        ])
        #expect(fake.openHandles == 0, "probing closes every PCM it opens")
        #expect(throws: CaptureError.deviceNotFound("hw:NoSuchCard,0,0")) { try driver.openDevice(uniqueID: "hw:NoSuchCard,0,0") }
    }

    @Test func aStartConfiguresThePCMAndReadsAreStampedByTheHardwareClock() throws {
        let fake = FakeALSA(script: FakeALSA.blocks(3, from: 2_000 * Self.ms))
        let stream = try Self.stream(fake)
        try stream.start(at: .zero)
        var samples: [SampleBuffer] = []
        for _ in 0..<3 { samples.append(try #require(try stream.nextSample())) }
        stream.stop()
        #expect(try stream.nextSample() == nil)
        // The first sample of each read was captured at htstamp − (delay + frames) / rate.
        #expect(samples.map(\.presentationTime) == [Self.ns(2_000 * Self.ms), Self.ns(2_010 * Self.ms), Self.ns(2_020 * Self.ms)])
        #expect(samples.map(\.sequenceNumber) == [0, 480, 960])
        #expect(samples.map(\.duration) == Array(repeating: MediaTime(value: 480, timescale: 48_000), count: 3))
        #expect(samples.map(Self.values) == [[1], [2], [3]])
        #expect(samples.allSatisfy { $0.discontinuity == nil })
        #expect(fake.controlTrace == ["open hw:Fake,0,0", "hw_params 48000 Hz 1 ch s16 period 480", "sw_params avail_min 480",
                                      "prepare", "start", "drop", "close"])
        #expect(fake.openHandles == 0)
    }

    @Test func nothingToReadWaitsOnThePCM() throws {
        let fake = FakeALSA(script: [.fail(.wouldBlock)] + FakeALSA.blocks(1, from: 3_000 * Self.ms))
        let stream = try Self.stream(fake)
        try stream.start(at: .zero)
        let sample = try #require(try stream.nextSample())
        stream.stop()
        #expect(sample.presentationTime == Self.ns(3_000 * Self.ms))
        let reads = fake.trace.filter { $0.hasPrefix("readi") || $0 == "wait" }
        #expect(reads == ["readi 480 → EAGAIN", "wait", "readi 480 → 480"])
    }

    /// A PCM with nothing to give (a stalled card) must not hold `stop()` up: the reader waits in
    /// short turns and returns nil once stopped.
    @Test func stopEndsAReadThatHasNothingToRead() async throws {
        let fake = FakeALSA()
        let stream = try Self.stream(fake)
        try stream.start(at: .zero)
        let returned = DispatchSemaphore(value: 0)
        let gotNil = Locked<Bool?>(nil)
        DispatchQueue.global().async {
            let sample = try? stream.nextSample()
            gotNil.withLock { $0 = sample == nil }
            returned.signal()
        }
        // Stop while the reader waits on the PCM (the fake logs the wait).
        try await eventually("the reader to wait on the PCM") { fake.trace.contains("wait") }
        stream.stop()
        #expect(returned.wait(timeout: .now() + 5) == .success, "nextSample still blocked after stop()")
        #expect(gotNil.withLock { $0 } == true)
        #expect(fake.openHandles == 0)
    }

    @Test func aBusyPCMFailsTheStartNamingBusy() throws {
        let fake = FakeALSA(script: FakeALSA.blocks(1, from: 1_000 * Self.ms))
        let stream = try Self.stream(fake)
        fake.inject(.open, .busy)
        #expect(throws: CaptureError.deviceStartFailed(device: Self.id, reason: "snd_pcm_open: the device is busy (another process is capturing)")) {
            try stream.start(at: .zero)
        }
        #expect(fake.controlTrace == ["open hw:Fake,0,0 → EBUSY"])
        #expect(fake.openHandles == 0)
        // Once the other process lets go, the same stream starts.
        try stream.start(at: .zero)
        #expect(try stream.nextSample() != nil)
        stream.stop()
    }

    @Test func accessDeniedAtOpenIsTyped() throws {
        let fake = FakeALSA()
        let stream = try Self.stream(fake)
        fake.inject(.open, .accessDenied)
        #expect(throws: CaptureError.deviceAccessDenied(Self.id)) { try stream.start(at: .zero) }
    }

    @Test func refusedHardwareParametersFailTheStartAndCloseThePCM() throws {
        let fake = FakeALSA()
        let stream = try Self.stream(fake)
        fake.inject(.hwParams, .invalidArgument)
        #expect(throws: CaptureError.deviceStartFailed(device: Self.id, reason: "snd_pcm_hw_params: Invalid argument")) {
            try stream.start(at: .zero)
        }
        #expect(fake.controlTrace == ["open hw:Fake,0,0", "hw_params 48000 Hz 1 ch s16 period 480 → EINVAL", "drop", "close"])
        #expect(fake.openHandles == 0)
        // A refused format, channel count or rate is formatNotSupported.
        fake.inject(.hwParams, .invalidArgument, operation: "snd_pcm_hw_params_set_format")
        #expect(throws: CaptureError.formatNotSupported("\(Self.mono) on \(Self.id)")) { try stream.start(at: .zero) }
        #expect(fake.openHandles == 0)
    }

    @Test func aFailedPrepareClosesThePCM() throws {
        let fake = FakeALSA()
        let stream = try Self.stream(fake)
        fake.inject(.prepare, ALSAErrno(rawValue: EIO))
        #expect(throws: CaptureError.deviceStartFailed(device: Self.id, reason: "snd_pcm_prepare: Input/output error")) {
            try stream.start(at: .zero)
        }
        #expect(fake.controlTrace.suffix(3) == ["prepare → EIO", "drop", "close"])
        #expect(fake.openHandles == 0)
    }

    /// An overrun (EPIPE) or a suspend (ESTRPIPE): `snd_pcm_recover`, a new `snd_pcm_start`, and
    /// the samples lost meanwhile (measured on the hardware clock) delivered as silence, so the
    /// audio stays continuous and in sync; that silence carries the loss (`discontinuity`).
    @Test(arguments: [ALSAErrno.brokenPipe, ALSAErrno.suspended])
    func anXrunIsRecoveredAndItsGapFilledWithSilence(_ code: ALSAErrno) throws {
        let fake = FakeALSA(script: FakeALSA.blocks(2, from: 1_000 * Self.ms) + [.fail(code)]
                                  + FakeALSA.blocks(2, from: 1_050 * Self.ms, firstValue: 10))
        let (stream, events) = try Self.streamAndEvents(fake)
        try stream.start(at: .zero)
        var samples: [SampleBuffer] = []
        for _ in 0..<5 { samples.append(try #require(try stream.nextSample())) }
        stream.stop()
        // 1.020 … 1.050 s was lost: 30 ms = 1440 frames of silence in its place.
        #expect(samples.map(\.presentationTime) == [1_000, 1_010, 1_020, 1_050, 1_060].map { Self.ns($0 * Self.ms) })
        #expect(samples.map(\.sequenceNumber) == [0, 480, 960, 2400, 2880])
        #expect(samples[2].audioBuffer?.frameLength == 1440)
        #expect(samples.map(Self.values) == [[1], [2], [0], [10], [11]])
        #expect(samples.map(\.discontinuity) == [nil, nil, Discontinuity(count: 1440, reason: .discontinuity), nil, nil])
        #expect(events.droppedCount(deviceID: Self.id, reason: .overrun) == 1440)
        // Recovered, then restarted, before the next read.
        let name = FakeALSA.name(code)
        let trace = fake.trace
        let failed = try #require(trace.firstIndex(of: "readi 480 → \(name)"))
        let recovered = try #require(trace.firstIndex(of: "recover \(name)"))
        let restarted = try #require(trace[recovered...].firstIndex(of: "start"))
        let nextRead = try #require(trace[failed...].dropFirst().firstIndex { $0.hasPrefix("readi") })
        #expect(failed < recovered && recovered < restarted && restarted < nextRead)
        #expect(!events.hasDisconnected(deviceID: Self.id))
    }

    @Test func unplugDuringAReadEndsTheStreamWithDisconnected() throws {
        let fake = FakeALSA(script: FakeALSA.blocks(1, from: 1_000 * Self.ms) + [.fail(.noDevice)])
        let (stream, events) = try Self.streamAndEvents(fake)
        try stream.start(at: .zero)
        #expect(try stream.nextSample() != nil)
        #expect(throws: CaptureError.deviceDisconnected(Self.id)) { try stream.nextSample() }
        #expect(events.hasDisconnected(deviceID: Self.id))
        #expect(!fake.trace.contains { $0.hasPrefix("recover") }, "a gone device is not recovered")
        stream.stop()
        #expect(fake.openHandles == 0)
    }

    /// Another error on a PCM whose state is DISCONNECTED (the card went away mid-read) is an unplug too.
    @Test func anErrorOnADisconnectedPCMIsAnUnplug() throws {
        let fake = FakeALSA(script: [.unplug(ALSAErrno(rawValue: EIO))])
        let (stream, events) = try Self.streamAndEvents(fake)
        try stream.start(at: .zero)
        #expect(throws: CaptureError.deviceDisconnected(Self.id)) { try stream.nextSample() }
        #expect(fake.trace.suffix(2) == ["readi 480 → EIO", "state"])
        #expect(events.hasDisconnected(deviceID: Self.id))
        stream.stop()
    }

    @Test func aFailedRecoveryIsTyped() throws {
        let fake = FakeALSA(script: [.fail(ALSAErrno(rawValue: EIO)), .fail(.brokenPipe)])
        let (stream, events) = try Self.streamAndEvents(fake)
        try stream.start(at: .zero)
        fake.inject(.recover, ALSAErrno(rawValue: EIO))
        #expect(throws: CaptureError.deviceStartFailed(device: Self.id, reason: "capture failed and could not recover: Input/output error")) {
            try stream.nextSample()
        }
        #expect(fake.trace.last == "recover EIO → EIO")
        // A recovery that finds the device gone is an unplug.
        fake.inject(.recover, .noDevice)
        #expect(throws: CaptureError.deviceDisconnected(Self.id)) { try stream.nextSample() }
        #expect(fake.trace.last == "recover EPIPE → ENODEV")
        #expect(events.hasDisconnected(deviceID: Self.id))
        stream.stop()
    }

    /// Virtual pace stamps PTS by the sample count and makes no silence up: the sample after the
    /// xrun carries the loss, measured on the hardware clock.
    @Test func inVirtualPaceTheSampleAfterAnXrunCarriesTheLoss() throws {
        let fake = FakeALSA(script: FakeALSA.blocks(2, from: 1_000 * Self.ms) + [.fail(.brokenPipe)]
                                  + FakeALSA.blocks(2, from: 1_050 * Self.ms, firstValue: 10))
        let stream = try Self.stream(fake, pace: .virtual)
        try stream.start(at: .zero)
        var samples: [SampleBuffer] = []
        for _ in 0..<4 { samples.append(try #require(try stream.nextSample())) }
        stream.stop()
        #expect(samples.map(\.presentationTime) == [0, 480, 960, 1440].map { MediaTime(value: $0, timescale: 48_000) })
        #expect(samples.map(Self.values) == [[1], [2], [10], [11]])
        #expect(samples.map(\.discontinuity) == [nil, nil, Discontinuity(count: 1440, reason: .discontinuity), nil])
        #expect(fake.controlTrace.contains("recover EPIPE"))
    }

    /// A PCM that stamps nothing cannot say how much an xrun lost: the next sample carries the least
    /// it lost, the buffer recovery discards (32 periods).
    @Test func anXrunOnAPCMWithoutTimestampsCarriesTheDiscardedBuffer() throws {
        let fake = FakeALSA(script: [.block(startNs: nil, frames: 480, value: 1), .fail(.brokenPipe), .block(startNs: nil, frames: 480, value: 2)])
        let stream = try Self.stream(fake)
        try stream.start(at: Self.ns(5_000 * Self.ms))
        let first = try #require(try stream.nextSample())
        let second = try #require(try stream.nextSample())
        stream.stop()
        #expect(first.discontinuity == nil)
        #expect(second.discontinuity == Discontinuity(count: 480 * 32, reason: .discontinuity))
        #expect(first.presentationTime == Self.ns(5_000 * Self.ms))
        #expect(second.presentationTime == Self.ns(5_010 * Self.ms))
    }

    /// End to end: a session with an `AudioDataOutput` on the fake card; the delegate hears
    /// `didDrop` for the overrun — 1440 frames, reason `.discontinuity`, at the PTS where the loss
    /// began — in order, just before the silence that stands in for them.
    @Test func anXrunReachesTheAudioDataOutputAsDidDrop() async throws {
        let fake = FakeALSA(script: FakeALSA.blocks(2, from: 1_000 * Self.ms) + [.fail(.brokenPipe)]
                                  + FakeALSA.blocks(2, from: 1_050 * Self.ms, firstValue: 10))
        let registry = DeviceRegistry(drivers: [ALSADriver(system: fake)])
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: Self.id)))
        let output = AudioDataOutput()
        let recorder = AudioEventRecorder()
        let queue = DispatchQueue(label: "alsa-drops")
        output.setSampleBufferDelegate(recorder, queue: queue)
        try session.addOutput(output)
        try session.startRunning()
        await waitUntil(timeout: .seconds(20)) { recorder.events.withLock { $0.count } >= 6 }
        session.stopRunning()
        queue.sync {}
        func pts(_ ms: Int64) -> MediaTime { Self.ns(ms * Self.ms) }
        #expect(recorder.events.withLock { $0 } == [
            .output(pts: pts(1_000), frames: 480), .output(pts: pts(1_010), frames: 480),
            .drop(Discontinuity(count: 1440, reason: .discontinuity), pts: pts(1_020)),
            .output(pts: pts(1_020), frames: 1440),
            .output(pts: pts(1_050), frames: 480), .output(pts: pts(1_060), frames: 480),
        ])
    }
}

/// What an audio data output's delegate heard, in order.
final class AudioEventRecorder: AudioDataOutputSampleBufferDelegate, Sendable {
    enum Event: Equatable, Sendable {
        case output(pts: MediaTime, frames: Int)
        case drop(Discontinuity, pts: MediaTime)
    }
    let events = Locked<[Event]>([])
    func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        events.withLock { $0.append(.output(pts: sample.presentationTime, frames: sample.audioBuffer?.frameLength ?? 0)) }
    }
    func dataOutput(_ output: AudioDataOutput, didDrop gap: Discontinuity, presentationTime: MediaTime, from connection: CaptureConnection) {
        events.withLock { $0.append(.drop(gap, pts: presentationTime)) }
    }
}
