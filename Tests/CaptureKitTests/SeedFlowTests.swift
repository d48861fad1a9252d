import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// The seed articles' Objective-C flows, translated line by line to Swift and run against the
/// simulator. Each step keeps the seed's order and checks.

/// Seed 000's recording delegate: remembers the finish.
private final class FinishWaiter: CaptureFileOutputRecordingDelegate {
    let finished = Locked<(path: String, error: CaptureError?, summary: RecordingSummary)?>(nil)
    let started = Locked(false)
    func fileOutput(_ output: MovieFileOutput, didStartRecordingTo path: String, from connections: [CaptureConnection]) {
        started.withLock { $0 = true }
    }
    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        finished.withLock { $0 = (path, error, summary) }
    }
    func wait() async {
        await waitUntil(timeout: .seconds(30)) { finished.withLock { $0 != nil } }
    }
}

@Suite struct SeedFlowTests {
    /// Seed 000: the photo/video controller — authorization, session preset with fallbacks, camera
    /// by position, audio input, still-image output with JPEG settings, movie output with
    /// stabilization, a still with the connection's orientation, then start/stop recording with a
    /// delegate, and switching cameras inside a configuration block.
    @Test func seed000PhotoAndVideoController() async throws {
        let scenario = SimulatorScenario(authorization: .notDetermined)
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 0, scenario: scenario)])
        // [AVCaptureDevice requestAccessForMediaType:…]
        #expect(registry.authorizationStatus(for: .video) == .notDetermined)
        #expect(await registry.requestAccess(for: .video))
        #expect(await registry.requestAccess(for: .audio))

        // AVCaptureSession *session = [[AVCaptureSession alloc] init]; preset high, else medium, else low.
        let session = CaptureSession(pace: .virtual)
        // - addDeviceInputToSession:AVCaptureDevicePositionBack
        let videoDevices = try registry.devices(mediaType: .video)
        let videoDevice = try #require(videoDevices.first { $0.position == .back } ?? videoDevices.first)
        let videoInput = try CaptureDeviceInput(device: videoDevice)
        #expect(session.canAddInput(videoInput))
        try session.addInput(videoInput)
        let audioDevice = try #require(try registry.devices(mediaType: .audio).first)
        let audioInput = try CaptureDeviceInput(device: audioDevice)
        if session.canAddInput(audioInput) { try session.addInput(audioInput) }
        for preset in [SessionPreset.high, .medium, .low] where session.canSetSessionPreset(preset) {
            try session.setSessionPreset(preset)
            break
        }
        #expect(session.sessionPreset == .high)
        // Keep the test quick: the seed's "photo" branch for stills, then a small video preset.
        #expect(session.canSetSessionPreset(.photo))
        try session.setSessionPreset(.vga640x480)

        // AVCaptureStillImageOutput with @{AVVideoCodecKey: AVVideoCodecJPEG}
        let stillImageOutput = StillImageOutput(quality: 0.9)
        #expect(session.canAddOutput(stillImageOutput))
        try session.addOutput(stillImageOutput)
        // AVCaptureMovieFileOutput; stabilization auto when supported.
        let movieFileOutput = MovieFileOutput()
        #expect(session.canAddOutput(movieFileOutput))
        try session.addOutput(movieFileOutput)
        let movieVideo = try #require(movieFileOutput.connection(with: .video))
        if movieVideo.isVideoStabilizationSupported {
            movieVideo.preferredVideoStabilizationMode = .auto
        }
        #expect(movieVideo.isVideoStabilizationSupported, "the phone profile's formats stabilize")
        #expect(movieVideo.activeVideoStabilizationMode != .off && movieVideo.activeVideoStabilizationMode != .auto)
        try session.startRunning()
        defer { session.stopRunning() }

        // captureStillImageAsynchronouslyFromConnection with the device orientation.
        let stillConnection = try #require(stillImageOutput.connection(with: .video))
        stillConnection.videoOrientation = .portrait
        let jpeg: [UInt8] = try await withCheckedThrowingContinuation { continuation in
            stillImageOutput.captureStillImageAsynchronously(from: stillConnection) { continuation.resume(with: $0) }
        }
        #expect(ExifOrientation.read(from: jpeg) == 6)
        #expect(try JPEGCodec().decode(jpeg).width == 640)

        // - startRecordingWithFilePath: orientation on the connection, then startRecordingToOutputFileURL.
        movieVideo.videoOrientation = .landscapeRight
        let filePath = try TestSupport.temporaryDirectory() + "/seed000.mov"
        let waiter = FinishWaiter()
        movieFileOutput.startRecording(to: filePath, recordingDelegate: waiter)
        try await eventually("1 s recorded", timeout: .seconds(600)) { movieFileOutput.recordedDuration >= MediaTime(value: 1, timescale: 1) }
        movieFileOutput.stopRecording()
        await waiter.wait()
        let finish = try #require(waiter.finished.withLock { $0 })
        #expect(finish.error == nil && finish.path == filePath)
        #expect(waiter.started.withLock { $0 })
        #expect(finish.summary.videoFrames >= 30)
        #expect(try TestSupport.probeStreams(filePath).map { $0["codec_name"] as? String } == ["h264", "aac"])

        // Switch cameras: back → front inside begin/commitConfiguration.
        let front = try #require(try registry.devices(mediaType: .video).first { $0.position == .front })
        session.beginConfiguration()
        session.removeInput(videoInput)
        let frontInput = try CaptureDeviceInput(device: front)
        if session.canAddInput(frontInput) { try session.addInput(frontInput) } else { try session.addInput(videoInput) }
        session.commitConfiguration()
        #expect(session.inputs.contains { $0.device === front })
        #expect(movieFileOutput.connection(with: .video)?.input.device === front)
    }

    /// Seed 004: recording with orientation, stabilization and smooth autofocus to a unique URL,
    /// the finish delegate, then a thumbnail of the first frame from the recorded file.
    @Test func seed004RecordingWithThumbnail() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        let activeCamera = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: activeCamera))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let movieOutput = MovieFileOutput()
        try session.addOutput(movieOutput)
        try session.startRunning()
        defer { session.stopRunning() }

        // - (void)startRecording
        #expect(!movieOutput.isRecording)
        let videoConnection = try #require(movieOutput.connection(with: .video))
        if videoConnection.isVideoRotationAngleSupported(VideoOrientation.portrait.rotationAngle) {
            videoConnection.videoOrientation = .portrait   // currentVideoOrientation
        }
        if videoConnection.isVideoStabilizationSupported {
            videoConnection.preferredVideoStabilizationMode = .auto
        }
        let device = activeCamera
        if device.isSmoothAutoFocusSupported {
            try device.lockForConfiguration()
            try device.setSmoothAutoFocusEnabled(true)
            device.unlockForConfiguration()
        }
        #expect(device.isSmoothAutoFocusEnabled)
        // - (NSURL *)uniqueURL: a fresh temporary folder, output.mov
        let outputURL = try TestSupport.temporaryDirectory() + "/output.mov"
        movieOutput.maxRecordedDuration = MediaTime(value: 2, timescale: 1)
        let waiter = FinishWaiter()
        movieOutput.startRecording(to: outputURL, recordingDelegate: waiter)
        await waiter.wait()
        // captureOutput:didFinishRecordingToOutputFileAtURL:… — a limit is a successful finish.
        let finish = try #require(waiter.finished.withLock { $0 })
        #expect(finish.error?.recordingFinishedSuccessfully ?? true)
        #expect(finish.summary.videoFrames == 60)

        // - generateThumbnailForVideoAtURL: AVAssetImageGenerator, copyCGImageAtTime:kCMTimeZero
        let asset = try Asset(path: outputURL)
        let imageGenerator = try ImageGenerator(asset: asset)
        imageGenerator.appliesPreferredTrackTransform = true
        let thumbnail = try await imageGenerator.image(at: .zero)
        #expect(thumbnail.actualTime == .zero)
        // Portrait recording: the transform turns the 640x480 frame upright.
        #expect(thumbnail.pixelBuffer.width == 480 && thumbnail.pixelBuffer.height == 640)
        let rotation = try TestSupport.probeStreams(outputURL).first { $0["codec_type"] as? String == "video" }
        #expect(((rotation?["side_data_list"] as? [[String: Any]])?.first?["rotation"] as? Int) == -90)
    }
}
