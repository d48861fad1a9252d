@_spi(Testing) import CaptureKit
import CaptureCore
import Foundation
import Testing

/// How a movie output degrades when the encoder cannot keep the camera's rate (issue 17, target 5):
/// a frame interval the real-time policy chooses (documented skipping, counted), and a bounded
/// encoder queue that drops and counts frames instead of buffering without limit.
@Suite struct FrameSheddingTests {
    @Test func aFrameIntervalRecordsEveryNthFrameAndCountsTheRest() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let movie = MovieFileOutput()
        movie.videoFrameInterval = 3
        movie.maxRecordedDuration = MediaTime(value: 2, timescale: 1)
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        let path = try TestSupport.temporaryDirectory() + "/every-third.mp4"
        let summary = try await movie.record(to: path)
        // Frames 0, 3, …, 57 of the 60 in 2 s; the 40 others skipped and counted.
        #expect(summary.videoFrames == 20, "\(summary)")
        #expect(summary.videoFramesSkipped == 40, "\(summary)")
        #expect(summary.videoFramesDroppedLate == 0)
        let report = try TestSupport.analyze(path)
        #expect(report.frameIndices.compactMap { $0 } == Array(stride(from: 0, to: 60, by: 3)))
        // The audio is whole: the skipped frames' time is not cut out of the file.
        let info = try MediaFileReader(path: path).info
        let duration = try #require(info.duration)
        #expect(abs(duration - 2) < 0.1, "file duration \(duration) s")
        #expect(report.syncMarkers.map(\.second) == [1])
    }

    /// An encoder four times too slow at 10 fps (200 ms a frame in a 100 ms period, at most 3
    /// frames allowed to wait): the queue never holds more than 3, the frames beyond it are dropped
    /// and counted, and the file holds the rest and plays.
    @Test func aFullEncoderQueueDropsAndCountsFramesInsteadOfGrowing() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.vga640x480)
        let device = try registry.device(uniqueID: "sim:back")
        try device.lockForConfiguration()
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 10))
        try device.setActiveVideoMaxFrameDuration(MediaTime(value: 1, timescale: 10))
        device.unlockForConfiguration()
        try session.addInput(CaptureDeviceInput(device: device))
        let output = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        output.settings = settings
        output.testingEncodeDelay = .milliseconds(200)
        let frameBytes = PixelBuffer(format: .nv12, width: 640, height: 480).allocationSize
        output.maximumEncoderQueueBytes = 3 * frameBytes
        let clock = DeliveryClock(counting: "sim:back")
        try session.addOutput(output)
        try session.addOutput(clock)
        let path = try TestSupport.temporaryDirectory() + "/bounded-queue.mp4"
        try session.startRunning()
        defer { session.stopRunning() }
        let finished = RecordingFinished()
        let frames = 20
        clock.arm(frames: frames) { output.stopRecording() }
        output.startRecording(to: path, recordingDelegate: finished)
        let summary = try #require(await finished.summary(timeout: .seconds(60)))
        print("bounded encoder queue: \(summary.videoFrames) written, \(summary.videoFramesDroppedLate) dropped late, high-water \(output.encoderQueueDepth.highWater)")
        #expect(output.encoderQueueDepth.highWater <= 3, "at most 3 frames of bytes wait")
        #expect(summary.videoFramesDroppedLate >= 5, "\(summary)")
        // Every frame offered after the start is written or counted (the first may precede the start).
        #expect((frames - 1...frames).contains(summary.videoFrames + summary.videoFramesDroppedLate), "\(summary)")
        #expect(summary.videoFramesSkipped == 0)
        #expect(summary.fileIsUsable)
        #expect(try MediaFileReader(path: path).info.streams.contains { $0.mediaType == "video" })
    }
}

/// `capture record --frame-interval N`: the same skipping from the command line, in the summary.
@Suite struct FrameIntervalCommandTests {
    @Test func frameIntervalTwoKeepsHalfTheFramesAndSaysSo() throws {
        let dir = try TestSupport.temporaryDirectory()
        let result = try TestSupport.run(CommandLineTests.binary, ["record", "--camera", "sim:back", "--microphone", "sim:mic",
                                                               "--duration", "1", "--pace", "virtual", "--frame-interval", "2",
                                                               "--json", dir + "/half.mp4"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let recording = try #require(json["recording"] as? [String: Any])
        #expect(recording["videoFrames"] as? Int == 15)
        #expect(recording["videoFramesSkipped"] as? Int == 15)
        #expect(try TestSupport.analyze(dir + "/half.mp4").frameIndices.compactMap { $0 } == Array(stride(from: 0, to: 30, by: 2)))
        let refused = try TestSupport.run(CommandLineTests.binary, ["record", "--camera", "sim:back", "--duration", "1",
                                                                "--frame-interval", "0", dir + "/none.mp4"])
        #expect(refused.status != 0 && refused.stderr.contains("--frame-interval must be 1 or more"), "\(refused.stderr)")
    }
}
