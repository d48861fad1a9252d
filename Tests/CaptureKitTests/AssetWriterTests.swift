import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Feeds video and audio data outputs into asset writer inputs, as seed 001's delegate does:
/// samples before `end` are appended; when an input is not ready the delegate waits (which holds
/// the virtual-time session back), counting how often it had to.
final class AssetFeeder: VideoDataOutputSampleBufferDelegate, AudioDataOutputSampleBufferDelegate {
    let video: AssetWriterInput?
    let audio: AssetWriterInput?
    let end: MediaTime
    struct Counts { var video = 0; var audio = 0; var videoWaits = 0; var audioWaits = 0; var errors: [CaptureError] = []; var audioEnd = 0.0 }
    let counts = Locked(Counts())

    init(video: AssetWriterInput?, audio: AssetWriterInput?, end: MediaTime) {
        self.video = video
        self.audio = audio
        self.end = end
    }

    private func feed(_ sample: SampleBuffer, to input: AssetWriterInput, isVideo: Bool) {
        guard sample.presentationTime < end else { return }
        var waited = false
        while !input.isReadyForMoreMediaData {
            if input.writer?.status != .writing { return }
            waited = true
            // On the delegate's queue (its own thread), not the pool.
            blockUntil(timeout: .seconds(30)) { input.isReadyForMoreMediaData || input.writer?.status != .writing }
        }
        do {
            try input.append(sample)
            counts.withLock {
                if isVideo { $0.video += 1; $0.videoWaits += waited ? 1 : 0 } else {
                    $0.audio += 1
                    $0.audioWaits += waited ? 1 : 0
                    $0.audioEnd = (sample.presentationTime + sample.duration).seconds
                }
            }
        } catch {
            counts.withLock { $0.errors.append(error) }
        }
    }

    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        if let video { feed(sample, to: video, isVideo: true) }
    }

    func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        if let audio { feed(sample, to: audio, isVideo: false) }
    }

    /// True once both tracks reached `end`.
    func reachedEnd(frames: Int) -> Bool {
        counts.withLock { c in (video == nil || c.video >= frames) && (audio == nil || c.audioEnd >= end.seconds) }
    }
}

enum AssetTestSupport {
    /// A virtual-time session with the simulated camera (640x480 NV12, 30 fps) and microphone
    /// feeding data outputs; returns the session and outputs (not yet running).
    static func dataOutputSession(audio: Bool = true) throws -> (CaptureSession, VideoDataOutput, AudioDataOutput) {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        if audio { try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic"))) }
        let videoOutput = VideoDataOutput()
        let audioOutput = AudioDataOutput()
        try session.addOutput(videoOutput)
        if audio { try session.addOutput(audioOutput) }
        return (session, videoOutput, audioOutput)
    }

    /// Runs the session until `feeder` has both tracks up to its end, then finishes the writer.
    static func run(_ session: CaptureSession, _ writer: AssetWriter, _ feeder: AssetFeeder, frames: Int) async throws {
        try session.startRunning()
        try await eventually("feeder.reachedEnd(frames: frames) || writer.status == .failed", timeout: .seconds(120)) { feeder.reachedEnd(frames: frames) || writer.status == .failed }
        session.stopRunning()
        writer.endSession(atSourceTime: feeder.end)
        await writer.finishWriting()
    }

    /// The encoder settings libx264 writes into its first SEI ("… rc=abr … bitrate=1843 …").
    static func x264Settings(_ path: String) throws -> String {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let marker = Array("x264 - core".utf8)
        guard let start = (0..<(bytes.count - marker.count)).first(where: { bytes[$0..<($0 + marker.count)].elementsEqual(marker) }) else {
            throw CaptureError.invalidState("no x264 settings in \(path)")
        }
        let end = bytes[start...].firstIndex(of: 0) ?? bytes.count
        return String(decoding: bytes[start..<end], as: UTF8.self) + " "
    }

    static func ffprobeJSON(_ arguments: [String]) throws -> [String: Any] {
        let result = try TestSupport.run("ffprobe", ["-v", "error", "-of", "json"] + arguments)
        guard result.status == 0, let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw CaptureError.invalidState("ffprobe failed: \(result.stderr)")
        }
        return json
    }
}

@Suite struct AssetWriterTests {
    /// Seed 001, "AVCaptureSession+AVAssetWriter", as written: 640x480, bits per pixel 6 × pixels,
    /// 30 fps expected, keyframe interval 30, baseline, AAC 22.05 kHz mono 28 kbit/s per channel,
    /// a rotation of π/2, inputs expecting real-time data.
    @Test func seed001AssetWriterPathEndToEnd() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/seed001.mp4"
        let (session, videoOutput, audioOutput) = try AssetTestSupport.dataOutputSession()
        videoOutput.alwaysDiscardsLateVideoFrames = true

        let writer = try AssetWriter(url: URL(fileURLWithPath: path), fileType: .mp4)
        let outputSize = Dimensions(width: 640, height: 480)
        let numPixels = outputSize.width * outputSize.height
        let bitsPerPixel = 6.0
        let bitsPerSecond = Int(Double(numPixels) * bitsPerPixel)
        let compressionProperties: SettingValue = [
            VideoSettingsKey.averageBitRate: .int(bitsPerSecond),
            VideoSettingsKey.expectedSourceFrameRate: 30,
            VideoSettingsKey.maxKeyFrameInterval: 30,
            VideoSettingsKey.profileLevel: .string(VideoProfileLevel.h264BaselineAutoLevel),
        ]
        let videoCompressionSettings: OutputSettings = [
            VideoSettingsKey.codec: .string(VideoCodecType.h264),
            VideoSettingsKey.scalingMode: .string(VideoScalingMode.fill.rawValue),
            VideoSettingsKey.width: .int(outputSize.width),
            VideoSettingsKey.height: .int(outputSize.height),
            VideoSettingsKey.compressionProperties: compressionProperties,
        ]
        let videoInput = try AssetWriterInput(mediaType: .video, outputSettings: videoCompressionSettings)
        videoInput.expectsMediaDataInRealTime = true
        videoInput.transform = AffineTransform(rotationAngle: .pi / 2)
        let audioCompressionSettings: OutputSettings = [
            AudioSettingsKey.encoderBitRatePerChannel: 28000,
            AudioSettingsKey.formatID: .string(AudioFormatID.mpeg4AAC),
            AudioSettingsKey.numberOfChannels: 1,
            AudioSettingsKey.sampleRate: 22050,
        ]
        let audioInput = try AssetWriterInput(mediaType: .audio, outputSettings: audioCompressionSettings)
        audioInput.expectsMediaDataInRealTime = true
        #expect(writer.canAdd(videoInput))
        try writer.add(videoInput)
        #expect(writer.canAdd(audioInput))
        try writer.add(audioInput)

        let feeder = AssetFeeder(video: videoInput, audio: audioInput, end: MediaTime(value: 3, timescale: 1))
        videoOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "video"))
        audioOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "audio"))
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: .zero)
        try await AssetTestSupport.run(session, writer, feeder, frames: 90)
        #expect(writer.status == .completed, "\(String(describing: writer.error))")
        #expect(feeder.counts.withLock { $0.errors }.isEmpty)

        let streams = try TestSupport.probeStreams(path)
        let video = try require(streams.first { $0["codec_type"] as? String == "video" })
        let audio = try require(streams.first { $0["codec_type"] as? String == "audio" })
        #expect(video["codec_name"] as? String == "h264")
        #expect(video["width"] as? Int == 640 && video["height"] as? Int == 480)
        #expect(video["profile"] as? String == "Constrained Baseline")
        #expect(video["avg_frame_rate"] as? String == "30/1")
        #expect(video["nb_read_frames"] as? String == "90")
        // The simulator's mostly static picture needs far less than the target (x264 skips static
        // blocks), so the measured rate says little: read the rate control x264 was given from the
        // settings string it writes into the stream.
        let x264 = try AssetTestSupport.x264Settings(path)
        #expect(x264.contains("rc=abr") && x264.contains("bitrate=\(bitsPerSecond / 1000) "), "\(x264)")
        #expect(x264.contains("keyint=30 ") && x264.contains("bframes=0 "), "\(x264)")
        let rotation = ((video["side_data_list"] as? [[String: Any]]) ?? []).compactMap { $0["rotation"] as? Int }.first
        #expect(rotation == -90)
        #expect(audio["codec_name"] as? String == "aac")
        #expect(audio["sample_rate"] as? String == "22050")
        #expect(audio["channels"] as? Int == 1)
        let audioBitrate = Double(audio["bit_rate"] as? String ?? "0") ?? 0
        #expect(abs(audioBitrate - 28000) < 6000, "audio bit rate \(audioBitrate)")

        // Keyframes at most 30 frames apart (x264 may add scene-cut keyframes in between).
        let frames = try AssetTestSupport.ffprobeJSON(["-select_streams", "v", "-show_entries", "frame=key_frame", path])
        let keys = ((frames["frames"] as? [[String: Any]]) ?? []).enumerated().filter { $0.element["key_frame"] as? Int == 1 }.map(\.offset)
        #expect(keys.first == 0)
        #expect(zip(keys, keys.dropFirst() + [90]).allSatisfy { $1 - $0 <= 30 }, "keyframes at \(keys)")

        let report = try await offPool { try TestSupport.analyze(path) }
        #expect(report.isClean, "drops \(report.droppedIndices) dups \(report.duplicatedIndices)")
        #expect(report.frameIndices == (0..<90).map { Optional($0) })
        let offsets = report.syncMarkers.compactMap(\.offset)
        #expect(offsets.count == 2, "markers \(report.syncMarkers)")
        #expect(offsets.allSatisfy { abs($0) <= 1.0 / 30 }, "A/V offsets \(offsets)")
        print("seed 001: A/V offsets \(offsets), keyframes at \(keys)")
    }

    /// A producer faster than the encoder sees `isReadyForMoreMediaData` false and waits; every
    /// frame it appended is in the file. The frames are rendered up front, so the producer is a
    /// tight loop (microseconds per append) against x264 (milliseconds per frame): the outcome does
    /// not depend on how busy the machine is.
    @Test func backPressureIsRealAndNothingIsLost() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/pressure.mov"
        let writer = try AssetWriter(path: path, fileType: .mov)
        let input = try AssetWriterInput(mediaType: .video, outputSettings: [
            VideoSettingsKey.codec: .string(VideoCodecType.h264),
            VideoSettingsKey.width: 640, VideoSettingsKey.height: 480,
        ])
        input.expectsMediaDataInRealTime = false
        try writer.add(input)
        let duration = MediaTime(value: 1, timescale: 30)
        let renderer = try SyntheticFrameRenderer(pixelFormat: .nv12, dimensions: Dimensions(width: 640, height: 480),
                                                  frameDuration: duration, seed: 4)
        let frames: [SampleBuffer] = (0..<60).map { n in
            let buffer = PixelBuffer(format: .nv12, width: 640, height: 480)
            renderer.render(frame: Int64(n), into: buffer)
            return SampleBuffer(payload: .pixels(buffer), formatDescription: .video(pixelFormat: .nv12, dimensions: Dimensions(width: 640, height: 480)),
                                presentationTime: duration * Int64(n), duration: duration, sequenceNumber: Int64(n))
        }
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: .zero)
        var waits = 0
        for frame in frames {
            let waited = !input.isReadyForMoreMediaData
            try await eventually("the input to be ready for more media data") { input.isReadyForMoreMediaData }
            if waited { waits += 1 }
            try input.append(frame)
        }
        input.markAsFinished()
        await writer.finishWriting()
        #expect(writer.status == .completed, "\(String(describing: writer.error))")
        #expect(waits >= 1, "the producer never had to wait")
        #expect(input.notReadyCount >= 1)
        #expect(input.appendedSampleCount == 60)
        let report = try await offPool { try TestSupport.analyze(path) }
        #expect(report.frameIndices == (0..<60).map { Optional($0) })
        print("back-pressure: \(waits) of 60 appends waited; isReadyForMoreMediaData was false \(input.notReadyCount) times")
    }

    /// Seed 003: take the recommended dictionary, raise the bitrate, create the input.
    @Test func seed003RecommendedSettingsRecipe() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/recommended.mp4"
        let (session, videoOutput, audioOutput) = try AssetTestSupport.dataOutputSession()
        var videoSettings = try require(videoOutput.recommendedVideoSettingsForAssetWriter(writingTo: .mp4))
        let audioSettings = try require(audioOutput.recommendedAudioSettingsForAssetWriter(writingTo: .mp4))
        guard case .dictionary(var compression)? = videoSettings[VideoSettingsKey.compressionProperties],
              let recommended = compression[VideoSettingsKey.averageBitRate]?.number else {
            Issue.record("no recommended bit rate in \(videoSettings)")
            return
        }
        compression[VideoSettingsKey.averageBitRate] = .int(Int(recommended) * 2)
        videoSettings[VideoSettingsKey.compressionProperties] = .dictionary(compression)

        let writer = try AssetWriter(path: path, fileType: .mp4)
        let videoInput = try AssetWriterInput(mediaType: .video, outputSettings: videoSettings)
        let audioInput = try AssetWriterInput(mediaType: .audio, outputSettings: audioSettings)
        videoInput.expectsMediaDataInRealTime = true
        audioInput.expectsMediaDataInRealTime = true
        try writer.add(videoInput)
        try writer.add(audioInput)
        let feeder = AssetFeeder(video: videoInput, audio: audioInput, end: MediaTime(value: 2, timescale: 1))
        videoOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "video"))
        audioOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "audio"))
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: .zero)
        try await AssetTestSupport.run(session, writer, feeder, frames: 60)
        #expect(writer.status == .completed, "\(String(describing: writer.error))")
        let streams = try TestSupport.probeStreams(path)
        let video = try require(streams.first { $0["codec_type"] as? String == "video" })
        let audio = try require(streams.first { $0["codec_type"] as? String == "audio" })
        #expect(video["profile"] as? String == "High")
        #expect(video["width"] as? Int == 640)
        let x264 = try AssetTestSupport.x264Settings(path)
        #expect(x264.contains("bitrate=\(Int(recommended) * 2 / 1000) "), "raised from \(recommended): \(x264)")
        #expect(audio["sample_rate"] as? String == "48000")
        #expect(try await offPool { try TestSupport.analyze(path) }.isClean)
    }

    /// Samples before the session start are not presented; the file starts at the start time.
    /// A scenario's disk fault reaches an asset writer as it reaches a movie output: writes fail
    /// with ENOSPC past the byte limit, the writer fails with `diskFull`, and the fragments already
    /// complete stay a playable file.
    @Test func outputFaultsFillTheDiskOfAnAssetWriter() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/full.mp4"
        let (session, videoOutput, _) = try AssetTestSupport.dataOutputSession(audio: false)
        let writer = try AssetWriter(path: path, fileType: .mp4)
        writer.movieFragmentInterval = MediaTime(value: 1, timescale: 2)
        var faults = FaultTimeline()
        faults.add(.diskFull(bytes: 40_000), at: .time(.zero))
        writer.outputFaults = faults.outputFaults
        let input = try AssetWriterInput(mediaType: .video, outputSettings: [
            VideoSettingsKey.codec: .string(VideoCodecType.h264),
            VideoSettingsKey.width: 640, VideoSettingsKey.height: 480,
        ])
        try writer.add(input)
        let feeder = AssetFeeder(video: input, audio: nil, end: MediaTime(value: 10, timescale: 1))
        videoOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "video"))
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: .zero)
        try await AssetTestSupport.run(session, writer, feeder, frames: 300)
        #expect(writer.status == .failed)
        guard case .diskFull = writer.error else {
            Issue.record("expected diskFull, got \(String(describing: writer.error))")
            return
        }
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        #expect(size <= 40_000, "the file stays within the disk: \(size) bytes")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
        var frames = 0
        try MediaFileReader(path: path).decode(video: { _ in frames += 1 }, audio: nil)
        #expect(frames >= 15 && frames < 300, "whole fragments kept: \(frames) frames")
    }

    @Test func sessionStartOffsetsTheFileAndFitScalesDown() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/offset.mov"
        let (session, videoOutput, _) = try AssetTestSupport.dataOutputSession(audio: false)
        let writer = try AssetWriter(path: path, fileType: .mov)
        let input = try AssetWriterInput(mediaType: .video, outputSettings: [
            VideoSettingsKey.codec: .string(VideoCodecType.h264),
            VideoSettingsKey.width: 320, VideoSettingsKey.height: 320,
            VideoSettingsKey.scalingMode: .string(VideoScalingMode.fit.rawValue),
        ])
        try writer.add(input)
        let feeder = AssetFeeder(video: input, audio: nil, end: MediaTime(value: 2, timescale: 1))
        videoOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "video"))
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: MediaTime(value: 1, timescale: 1))
        try await AssetTestSupport.run(session, writer, feeder, frames: 60)
        #expect(writer.status == .completed, "\(String(describing: writer.error))")
        var first: (Double, Int, Int)?
        var count = 0
        var barLuma = 0
        try MediaFileReader(path: path).decode(video: { frame in
            if first == nil {
                first = (frame.presentationTime, frame.width, frame.height)
                barLuma = Int(frame.luma[5 * frame.bytesPerRow[0] + 160])  // inside the top letterbox bar
            }
            count += 1
        }, audio: nil)
        #expect(count == 30)
        #expect(first?.0 == 0)
        #expect(first?.1 == 320 && first?.2 == 320)
        #expect(barLuma == 16)
    }

    @Test func settingsAreValidatedUpFrontNamingTheProblem() throws {
        func message(_ body: () throws -> Void) -> String {
            do { try body() } catch { return "\(error)" }
            return ""
        }
        let base: OutputSettings = [VideoSettingsKey.codec: .string(VideoCodecType.h264), VideoSettingsKey.width: 640, VideoSettingsKey.height: 480]
        var unknown = base
        unknown["AVVideoColorPropertiesKey"] = "x"
        #expect(message { _ = try AssetWriterInput(mediaType: .video, outputSettings: unknown) }.contains("AVVideoColorPropertiesKey"))
        var odd = base
        odd[VideoSettingsKey.width] = 641
        #expect(message { _ = try AssetWriterInput(mediaType: .video, outputSettings: odd) }.contains(VideoSettingsKey.width))
        var prores = base
        prores[VideoSettingsKey.codec] = "ap4h"
        #expect(message { _ = try AssetWriterInput(mediaType: .video, outputSettings: prores) }.contains("ap4h"))
        var mismatch = base
        mismatch[VideoSettingsKey.compressionProperties] = [VideoSettingsKey.profileLevel: "HEVC_Main_AutoLevel"]
        #expect(message { _ = try AssetWriterInput(mediaType: .video, outputSettings: mismatch) }.contains("HEVC_Main_AutoLevel"))
        #expect(message { _ = try AssetWriterInput(mediaType: .audio, outputSettings: [AudioSettingsKey.formatID: "aac ", AudioSettingsKey.sampleRate: 7000]) }
            .contains(AudioSettingsKey.sampleRate))
        #expect(message { _ = try AssetWriterInput(mediaType: .audio, outputSettings: [AudioSettingsKey.formatID: "lpcm", AudioSettingsKey.encoderBitRate: 64000]) }
            .contains("bit rate"))

        let dir = try TestSupport.temporaryDirectory()
        let wav = try AssetWriter(path: dir + "/a.wav", fileType: .wav)
        let video = try AssetWriterInput(mediaType: .video, outputSettings: base)
        #expect(!wav.canAdd(video))
        let aac = try AssetWriterInput(mediaType: .audio, outputSettings: [AudioSettingsKey.formatID: "aac "])
        #expect(!wav.canAdd(aac))
        let mp4 = try AssetWriter(path: dir + "/a.mp4", fileType: .mp4)
        let pcm = try AssetWriterInput(mediaType: .audio, outputSettings: [AudioSettingsKey.formatID: "lpcm"])
        #expect(message { try mp4.add(pcm) }.contains("linear PCM"))
        let passVideo = try AssetWriterInput(mediaType: .video, outputSettings: nil)
        #expect(message { try mp4.add(passVideo) }.contains("pass-through"))
    }

    /// Out-of-order and mismatched appends fail the writer with the reason; appends after
    /// finishing are refused.
    @Test func badAppendsFailTheWriterCleanly() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let pixels = PixelBuffer(format: .yuv420, width: 64, height: 64)
        func frame(_ n: Int64) -> SampleBuffer {
            SampleBuffer(payload: .pixels(pixels), formatDescription: .video(pixelFormat: .yuv420, dimensions: Dimensions(width: 64, height: 64)),
                         presentationTime: MediaTime(value: n, timescale: 30), duration: MediaTime(value: 1, timescale: 30), sequenceNumber: n)
        }
        let settings: OutputSettings = [VideoSettingsKey.codec: .string(VideoCodecType.h264), VideoSettingsKey.width: 64, VideoSettingsKey.height: 64]

        let writer = try AssetWriter(path: dir + "/order.mp4", fileType: .mp4)
        let input = try AssetWriterInput(mediaType: .video, outputSettings: settings)
        try writer.add(input)
        #expect(throws: CaptureError.self) { try input.append(frame(0)) }  // before startWriting
        #expect(writer.startWriting())
        #expect(throws: CaptureError.self) { try input.append(frame(0)) }  // before startSession
        writer.startSession(atSourceTime: .zero)
        try input.append(frame(0))
        try input.append(frame(1))
        #expect(throws: CaptureError.self) { try input.append(frame(1)) }
        #expect(writer.status == .failed)
        #expect("\(writer.error!)".contains("out of order"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/order.mp4") || writer.status == .failed)

        let mixed = try AssetWriter(path: dir + "/mixed.mp4", fileType: .mp4)
        let mixedInput = try AssetWriterInput(mediaType: .video, outputSettings: settings)
        try mixed.add(mixedInput)
        mixed.startWriting()
        mixed.startSession(atSourceTime: .zero)
        try mixedInput.append(frame(0))
        let other = SampleBuffer(payload: .pixels(PixelBuffer(format: .nv12, width: 64, height: 64)),
                                 formatDescription: .video(pixelFormat: .nv12, dimensions: Dimensions(width: 64, height: 64)),
                                 presentationTime: MediaTime(value: 1, timescale: 30), duration: MediaTime(value: 1, timescale: 30), sequenceNumber: 1)
        #expect(throws: CaptureError.self) { try mixedInput.append(other) }
        #expect(mixed.status == .failed)
        #expect("\(mixed.error!)".contains("changed format"))

        let done = try AssetWriter(path: dir + "/done.mp4", fileType: .mp4)
        let doneInput = try AssetWriterInput(mediaType: .video, outputSettings: settings)
        try done.add(doneInput)
        done.startWriting()
        done.startSession(atSourceTime: .zero)
        for n in 0..<5 {
            try await eventually("the input to be ready for frame \(n)") { doneInput.isReadyForMoreMediaData }
            try doneInput.append(frame(Int64(n)))
        }
        await done.finishWriting()
        #expect(done.status == .completed)
        #expect(throws: CaptureError.self) { try doneInput.append(frame(5)) }
        #expect(done.status == .completed)
        #expect(try TestSupport.probeStreams(dir + "/done.mp4").first?["nb_read_frames"] as? String == "5")
    }

    /// A pull source through requestMediaDataWhenReady, finishing through the completion handler;
    /// PCM pass-through into WAV; cancelling removes the file.
    @Test func pullSourcePassThroughAndCancel() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let format = AudioStreamFormat(sampleRate: 16_000, channelCount: 1, sampleFormat: .int16)
        let writer = try AssetWriter(path: dir + "/pull.wav", fileType: .wav)
        let input = try AssetWriterInput(mediaType: .audio, outputSettings: nil)
        try writer.add(input)
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: .zero)
        let next = Locked(0)
        let done = Locked(false)
        input.requestMediaDataWhenReady(on: DispatchQueue(label: "pull")) {
            while input.isReadyForMoreMediaData {
                let n = next.withLock { n -> Int in defer { n += 1 }; return n }
                if n == 20 { input.markAsFinished(); break }
                let buffer = AudioPCMBuffer(format: format, frameCapacity: 800)
                buffer.withProducerBytes { raw in
                    let p = raw.bindMemory(to: Int16.self)
                    for i in 0..<800 { p[i] = Int16(truncatingIfNeeded: (n * 800 + i) % 20_000 - 10_000) }
                }
                try? input.append(SampleBuffer(payload: .audio(buffer), formatDescription: .audio(format),
                                               presentationTime: MediaTime(value: Int64(n * 800), timescale: 16_000),
                                               duration: MediaTime(value: 800, timescale: 16_000), sequenceNumber: Int64(n * 800)))
            }
        }
        try await eventually("next.withLock { $0 } > 20", timeout: .seconds(120)) { next.withLock { $0 } > 20 }
        writer.finishWriting { done.withLock { $0 = true } }
        try await eventually("done.withLock { $0 }", timeout: .seconds(120)) { done.withLock { $0 } }
        #expect(writer.status == .completed)
        var samples: [Float] = []
        try MediaFileReader(path: dir + "/pull.wav").decode(video: nil, audio: { s, _, _, _ in samples += s })
        #expect(samples.count == 16_000)
        #expect(samples.enumerated().allSatisfy { Int(($1 * 32768).rounded()) == $0 % 20_000 - 10_000 })

        let cancelled = try AssetWriter(path: dir + "/cancel.mov", fileType: .mov)
        let cancelInput = try AssetWriterInput(mediaType: .audio, outputSettings: nil)
        try cancelled.add(cancelInput)
        cancelled.startWriting()
        cancelled.startSession(atSourceTime: .zero)
        cancelled.cancelWriting()
        #expect(cancelled.status == .cancelled)
        await cancelled.finishWriting()
        #expect(!FileManager.default.fileExists(atPath: dir + "/cancel.mov"))
    }
}
