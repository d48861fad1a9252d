import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Seed 001's picker delegate: remembers the finish or the cancel.
private final class PickerDelegate: VideoRecorderDelegate {
    let finished = Locked<(url: URL, duration: Double, summary: RecordingSummary)?>(nil)
    let cancelled = Locked(false)
    func videoRecorder(_ recorder: VideoRecorder, didFinishRecordingTo url: URL, duration: Double, summary: RecordingSummary) {
        finished.withLock { $0 = (url, duration, summary) }
    }
    func videoRecorderDidCancel(_ recorder: VideoRecorder) { cancelled.withLock { $0 = true } }
    func wait(_ done: @escaping @Sendable () -> Bool) async {
        await waitUntil(timeout: .seconds(30), done)
    }
}

/// The one-call recorder (issue 15), as seed 001's UIImagePickerController path uses it.
@Suite struct VideoRecorderTests {
    /// Seed 001: isVideoRecordingAvailable (camera source, kUTTypeMovie), switchCameraIsFront:NO
    /// (rear), videoQuality medium, cameraFlashMode auto, videoMaximumDuration 20 — recorded in
    /// virtual time until the maximum duration ends it.
    @Test func seed001PickerFlowRecordsTwentySecondsAtMediumQuality() async throws {
        let recorder = VideoRecorder(registry: CaptureKit.makeRegistry(seed: 1), pace: .virtual)
        // - (BOOL)isVideoRecordingAvailable
        #expect(recorder.isSourceTypeAvailable(.camera))
        #expect(recorder.availableMediaTypes(for: .camera).contains(VideoRecorder.movieMediaType))
        #expect(!recorder.isSourceTypeAvailable(.photoLibrary))
        // - (void)switchCameraIsFront:NO
        if recorder.isCameraDeviceAvailable(.rear) { try recorder.setCameraDevice(.rear) }
        #expect(recorder.cameraDevice == .rear)
        recorder.videoQuality = .medium
        recorder.cameraFlashMode = .auto
        recorder.videoMaximumDuration = 20
        recorder.encoderPreset = .ultrafast
        let delegate = PickerDelegate()
        recorder.delegate = delegate
        let path = try TestSupport.temporaryDirectory() + "/seed001.mov"
        let summary = try await recorder.record(to: path)
        #expect(summary.stopReason == "maximumDuration")
        #expect(summary.duration <= 20 && summary.duration > 19.9, "\(summary.duration) s")
        await delegate.wait { delegate.finished.withLock { $0 != nil } }
        let finish = try #require(delegate.finished.withLock { $0 })
        #expect(finish.url.path == path && finish.duration == summary.duration && finish.summary == summary)
        // The file: the medium preset's size on the back camera (640x480), H.264 + AAC, at most 20 s.
        let streams = try TestSupport.probeStreams(path)
        #expect(streams.map { $0["codec_name"] as? String } == ["h264", "aac"])
        #expect(streams.first?["width"] as? Int == 640 && streams.first?["height"] as? Int == 480)
        let durationText = try #require(streams.first?["duration"] as? String)
        let duration = try #require(Double(durationText))
        #expect(duration <= 20.0001)
        #expect((streams.first?["nb_read_frames"] as? String).flatMap(Int.init) == summary.videoFrames)
        print("seed001 picker: \(summary.videoFrames) frames, \(summary.duration) s, \(summary.fileSize) bytes, stop \(summary.stopReason)")
    }

    /// A profile set without a front camera: the front camera is unavailable and cannot be chosen.
    @Test func frontCameraIsUnavailableWithoutOne() throws {
        let profiles = try SimulatedDeviceProfile.builtInAndEnvironment().filter { $0.uniqueID == "sim:back" || $0.uniqueID == "sim:mic" }
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 0, profiles: profiles)])
        let recorder = VideoRecorder(registry: registry, pace: .virtual)
        #expect(recorder.isCameraDeviceAvailable(.rear))
        #expect(!recorder.isCameraDeviceAvailable(.front))
        #expect(throws: CaptureError.self) { try recorder.setCameraDevice(.front) }
        #expect(recorder.cameraDevice == .rear)
        // With the full set both are there.
        let full = VideoRecorder(registry: CaptureKit.makeRegistry(), pace: .virtual)
        #expect(full.isCameraDeviceAvailable(.front))
        // No cameras at all: the camera source is unavailable.
        let micOnly = VideoRecorder(registry: DeviceRegistry(drivers: [SimulatorDriver(seed: 0, profiles: profiles.filter { $0.uniqueID == "sim:mic" })]))
        #expect(!micOnly.isSourceTypeAvailable(.camera) && micOnly.availableMediaTypes(for: .camera).isEmpty)
    }

    /// Flash on lights the torch while recording (observed with the PTS of the first lit frame);
    /// cancel stops, removes the file and tells the delegate.
    @Test func flashOnLightsTheTorchAndCancelRemovesTheFile() async throws {
        let registry = CaptureKit.makeRegistry(seed: 2)
        let recorder = VideoRecorder(registry: registry, pace: .virtual)
        recorder.cameraFlashMode = .on
        recorder.videoMaximumDuration = 1
        recorder.encoderPreset = .ultrafast
        recorder.capturesAudio = false
        let torch = try registry.device(uniqueID: "sim:back").observe(.torchLevel)
        let lit = Task { () -> TimedControlValue? in
            for await value in torch where (value.value.doubleValue ?? 0) > 0 { return value }
            return nil
        }
        let path = try TestSupport.temporaryDirectory() + "/flash.mp4"
        let summary = try await recorder.record(to: path)
        #expect(summary.stopReason == "maximumDuration")
        let firstLit = try #require(await lit.value)
        #expect(firstLit.presentationTime == .zero, "the torch is on from the first frame")
        #expect(try registry.device(uniqueID: "sim:back").torchMode == .off, "off again after recording")

        let delegate = PickerDelegate()
        recorder.delegate = delegate
        recorder.videoMaximumDuration = 600
        let cancelled = "\(try TestSupport.temporaryDirectory())/cancelled.mp4"
        let recording = Task { () -> CaptureError? in
            do throws(CaptureError) { _ = try await recorder.record(to: cancelled); return nil } catch { return error }
        }
        try await eventually("the recorder to start recording") { recorder.isRecording }
        recorder.cancel()
        let error = await recording.value
        #expect(error == .recordingCancelled)
        await delegate.wait { delegate.cancelled.withLock { $0 } }

        #expect(delegate.cancelled.withLock { $0 })
        #expect(!FileManager.default.fileExists(atPath: cancelled))
        #expect(delegate.finished.withLock { $0 } == nil)
    }
}
