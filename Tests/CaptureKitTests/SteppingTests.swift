import CaptureKit
import Foundation
import Testing

/// Manual stepping (`enableManualStepping`, `advance(by:)`, `advance(toFrame:)`): a virtual-pace
/// session delivers exactly what each step allows and `advance` returns once it has, so a test says
/// how much capture happens instead of sleeping.
@Suite struct SteppingTests {
    final class Counter: VideoDataOutputSampleBufferDelegate, AudioDataOutputSampleBufferDelegate, Sendable {
        struct Seen { var video: [Int64] = []; var audioEnd = MediaTime.zero }
        let seen = Locked(Seen())
        func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
            seen.withLock { $0.video.append(sample.sequenceNumber) }
        }
        func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
            seen.withLock { $0.audioEnd = sample.presentationTime + sample.duration }
        }
    }

    /// The delegates run on serial queues; `sync {}` on them after a step makes what they saw visible.
    static let videoQueue = DispatchQueue(label: "stepping.video"), audioQueue = DispatchQueue(label: "stepping.audio")

    static func rig() throws -> (CaptureSession, Counter) {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let counter = Counter()
        let video = VideoDataOutput(), audio = AudioDataOutput()
        video.setSampleBufferDelegate(counter, queue: videoQueue)
        audio.setSampleBufferDelegate(counter, queue: audioQueue)
        try session.addOutput(video)
        try session.addOutput(audio)
        try session.enableManualStepping()
        return (session, counter)
    }

    static func settle() { videoQueue.sync {}; audioQueue.sync {} }

    @Test func eachStepDeliversExactlyWhatItAllows() throws {
        let (session, counter) = try Self.rig()
        try session.startRunning()
        defer { session.stopRunning() }
        try session.advance(by: .zero)
        Self.settle()
        #expect(counter.seen.withLock { $0.video.isEmpty }, "nothing before the first step")
        try session.advance(by: MediaTime(value: 1, timescale: 1))
        Self.settle()
        #expect(counter.seen.withLock { $0.video } == Array(0..<30), "frames 0…29 in the first second")
        // Audio buffers of 1024 samples at 48 kHz: the 47 that start before 1 s.
        #expect(counter.seen.withLock { $0.audioEnd } == MediaTime(value: 47 * 1024, timescale: 48_000))
        try session.advance(by: .zero)
        Self.settle()
        #expect(counter.seen.withLock { $0.video.count } == 30, "a step of zero delivers nothing more")
        try session.advance(toFrame: 45)
        Self.settle()
        #expect(counter.seen.withLock { $0.video } == Array(0..<45))
        try session.advance(by: MediaTime(value: 1, timescale: 2))
        Self.settle()
        #expect(counter.seen.withLock { $0.video.count } == 45, "the limit was 1 s; 1.5 s reaches frame 44, already delivered")
        try session.advance(by: MediaTime(value: 1, timescale: 1))
        Self.settle()
        #expect(counter.seen.withLock { $0.video } == Array(0..<75), "the limit is now 2.5 s: frames 0…74")
    }

    @Test func aRecordingOfExactlyTwoSeconds() async throws {
        let (session, _) = try Self.rig()
        let movie = MovieFileOutput()
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        let path = try TestSupport.temporaryDirectory() + "/stepped.mp4"
        let recording = Task { try await movie.record(to: path) }
        while !movie.isRecording { try await Task.sleep(for: .milliseconds(1)) }
        try session.advance(by: MediaTime(value: 2, timescale: 1))
        movie.stopRecording()
        try session.advance(by: MediaTime(value: 1, timescale: 30))  // the stop takes effect at the next sample
        let summary = try await recording.value
        #expect(summary.videoFrames == 60, "\(summary)")
        #expect(try TestSupport.analyze(path).frameIndices.compactMap { $0 } == Array(0..<60))
    }

    @Test func steppingIsRefusedWhereItCannotWork() throws {
        #expect(throws: CaptureError.self) { try CaptureSession(pace: .realtime).enableManualStepping() }
        let plain = CaptureSession(pace: .virtual)
        #expect(throws: CaptureError.self) { try plain.advance(by: .zero) }
        let (session, _) = try Self.rig()
        #expect(throws: CaptureError.sessionNotRunning) { try session.advance(by: .zero) }
        try session.startRunning()
        defer { session.stopRunning() }
        #expect(throws: CaptureError.self) { try session.advance(by: MediaTime(value: -1, timescale: 1)) }
        #expect(throws: CaptureError.self) { try session.enableManualStepping() }
    }
}
