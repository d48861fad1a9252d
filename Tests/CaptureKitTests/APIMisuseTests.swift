import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Bad API use is a typed error or a documented no-op, never a trap: each public call made in the
/// wrong state (before start, after stop, twice, without the lock, on a disconnected device, with
/// nonsense values). A trap would end the test process, so reaching the end of each test is itself
/// the check; where AVFoundation documents an error, the test asserts the exact one. Afterwards the
/// same objects must still work when used right.
@Suite struct APIMisuseTests {
    final class Finishes: CaptureFileOutputRecordingDelegate, @unchecked Sendable {
        // Confined by the lock.
        let errors = Locked<[CaptureError?]>([])
        func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                        summary: RecordingSummary, error: CaptureError?) {
            errors.withLock { $0.append(error) }
        }
    }

    final class PhotoSink: PhotoCaptureDelegate, Sendable {
        func photoOutput(_ output: PhotoOutput, didFinishProcessingPhoto photo: CapturePhoto?, error: CaptureError?) {}
    }

    @Test func sessionCallsInTheWrongOrder() throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        session.stopRunning()                       // never started: a no-op
        session.commitConfiguration()               // no begin: a no-op
        try session.startRunning()                  // no inputs: runs with nothing, as AVFoundation's does
        session.stopRunning()
        let input = try CaptureDeviceInput(device: registry.device(uniqueID: "sim:back"))
        session.removeInput(input)                  // not added: a no-op
        let output = VideoDataOutput()
        session.removeOutput(output)                // not added: a no-op
        try session.addInput(input)
        #expect(!session.canAddInput(input))
        #expect(throws: CaptureError.self) { try session.addInput(input) }  // twice
        try session.addOutput(output)
        #expect(throws: CaptureError.self) { try session.addOutput(output) } // twice
        session.beginConfiguration()
        #expect(throws: CaptureError.self) { try session.startRunning() }   // inside a configuration block
        session.commitConfiguration()
        try session.startRunning()
        #expect(throws: CaptureError.self) { try session.startRunning() }   // already running: invalidState
        session.stopRunning()
        session.stopRunning()                       // twice
        try session.startRunning()                  // and it still works
        session.stopRunning()
    }

    /// On this test's own device ID (`DeviceRig`): configuration locks are process-wide by ID, and
    /// its unlocks without a lock and its unplug must not touch a parallel test's `sim:back`.
    @Test func deviceCallsWithoutTheLockAfterUnlockAndOnADisconnectedDevice() throws {
        let rig = try DeviceRig()
        let scenario = rig.scenario
        let device = try rig.device("sim:back")
        device.unlockForConfiguration()             // not locked: a no-op
        #expect(throws: CaptureError.self) { try device.setActiveFormat(device.formats[0]) }
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 30)) }
        try device.lockForConfiguration()
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 100_000)) }
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: -1, timescale: 30)) }
        // A timescale of 0 is an invalid time (CMTimeMake's rule), which restores the default.
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 0))
        #expect(throws: CaptureError.self) { try device.applyControl(key: "zoom.factor", value: "nan") }
        #expect(throws: CaptureError.self) { try device.applyControl(key: "no.such.control", value: "1") }
        device.unlockForConfiguration()
        device.unlockForConfiguration()             // twice
        scenario.disconnect(device.uniqueID)
        #expect(throws: CaptureError.self) { try device.lockForConfiguration() }
        let session = CaptureSession(pace: .virtual)
        #expect(throws: CaptureError.self) {
            try session.addInput(CaptureDeviceInput(device: device))
            try session.startRunning()
        }
        session.stopRunning()
    }

    @Test func movieOutputCallsInTheWrongState() async throws {
        let output = MovieFileOutput()
        output.stopRecording()                      // not recording: no-ops
        output.pauseRecording()
        output.resumeRecording()
        let finishes = Finishes()
        let dir = try TestSupport.temporaryDirectory()
        // Not attached to a running session: didFinish fires once with sessionNotRunning or noInputs.
        output.startRecording(to: "\(dir)/a.mp4", recordingDelegate: finishes)
        // Nonsense limits are clamped or ignored, never trapped on.
        output.maxRecordedFileSize = -5
        output.minFreeDiskSpaceLimit = -1
        output.maxRecordedDuration = MediaTime(value: 3, timescale: 0)
        output.movieFragmentInterval = MediaTime(value: -1, timescale: 1)
        try await eventually("the refused recording's finish", timeout: .seconds(30)) { finishes.errors.withLock { $0.count } >= 1 }
        #expect(finishes.errors.withLock { $0.count } == 1)
        #expect(finishes.errors.withLock { $0.first ?? nil } != nil)

        // Attached and running, then used right after all that: it still records.
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addOutput(output)
        output.maxRecordedDuration = MediaTime(value: 1, timescale: 1)
        output.movieFragmentInterval = MediaTime(value: 10, timescale: 1)
        try session.startRunning()
        defer { session.stopRunning() }
        // Not a movie extension, a folder that does not exist: typed errors through didFinish.
        await #expect(throws: CaptureError.self) { _ = try await output.record(to: "\(dir)/a.txt") }
        await #expect(throws: CaptureError.self) { _ = try await output.record(to: "\(dir)/missing/a.mp4") }
        let summary = try await output.record(to: "\(dir)/b.mp4")
        #expect(summary.videoFrames == 30)
        // A second recording to the same file: outputFileExists.
        await #expect(throws: CaptureError.outputFileExists(path: "\(dir)/b.mp4")) { _ = try await output.record(to: "\(dir)/b.mp4") }
    }

    @Test func photoAndAssetWriterCallsInTheWrongState() async throws {
        let photo = PhotoOutput()
        #expect(throws: CaptureError.self) { try photo.capturePhoto(with: PhotoSettings(), delegate: PhotoSink()) }  // no session
        let settings = PhotoSettings(quality: 7)     // out of 0…1
        #expect(throws: CaptureError.self) { try photo.capturePhoto(with: settings, delegate: PhotoSink()) }

        let dir = try TestSupport.temporaryDirectory()
        let writer = try AssetWriter(path: "\(dir)/w.mp4", fileType: .mp4)
        writer.startSession(atSourceTime: .zero)     // before startWriting: ignored
        writer.endSession(atSourceTime: .zero)
        #expect(!writer.startWriting())              // no inputs: fails with an error, no trap
        #expect(writer.status == .failed && writer.error != nil)
        await writer.finishWriting()                 // after failing: nothing to finish
        writer.cancelWriting()
        #expect(throws: CaptureError.self) { try AssetWriter(url: URL(fileURLWithPath: "\(dir)/w.xyz")) }
        #expect(throws: CaptureError.self) { try AssetWriterInput(mediaType: .video, outputSettings: ["AVVideoWidthKey": -3]) }

        #expect(throws: CaptureError.self) { try AudioRecorder(path: "\(dir)/r.wav", settings: AudioRecorderSettings(format: .wav), microphone: "sim:back") }
        let recorder = try AudioRecorder(path: "\(dir)/r.wav", settings: AudioRecorderSettings(format: .wav))
        recorder.stop()                              // never recorded
        recorder.pause()
        #expect(recorder.averagePower(forChannel: 99) <= 0)   // no such channel: silence, not a trap
        #expect(!recorder.deleteRecording() || !FileManager.default.fileExists(atPath: "\(dir)/r.wav"))
    }

    @Test func timesAndBuffersWithNonsenseValues() throws {
        #expect(!MediaTime(value: 1, timescale: 0).isValid)
        #expect(!MediaTime(value: 1, timescale: -30).isValid)
        #expect(!MediaTime(seconds: 1, preferredTimescale: 0).isValid)
        #expect(MediaTime(seconds: 3.7e25, preferredTimescale: 1_000_000_000) == .positiveInfinity)  // beyond Int64 ticks: out of range, not a trap
        #expect(MediaTime(seconds: -3.7e25, preferredTimescale: 1_000_000_000) == .negativeInfinity)
        let buffer = AudioPCMBuffer(format: AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .int16), frameCapacity: 10)
        try buffer.setFrameLength(99)
        #expect(buffer.frameLength == 10)
        try buffer.setFrameLength(-1)
        #expect(buffer.frameLength == 0)
        #expect(buffer.withFloatSamples { $0.count } == 0)   // not float: empty, not a trap
    }
}
