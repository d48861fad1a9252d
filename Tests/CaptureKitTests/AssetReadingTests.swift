import CaptureKit
import Foundation
import Testing

private func stamp(of pixels: PixelBuffer) -> UInt32? {
    FrameStampReader.frameIndex(in: LumaPlane(base: UnsafeRawBufferPointer(start: pixels.baseAddress(ofPlane: 0),
                                                                           count: pixels.bytesPerRow[0] * pixels.height),
                                              width: pixels.width, height: pixels.height, bytesPerRow: pixels.bytesPerRow[0]))
}

@Suite struct AssetReadingTests {
    /// One 3.2 s recording (640x480 at 30 fps, keyframes every 2 s) shared by the tests of this suite.
    static let recording = SharedRecording()

    @Test func zeroToleranceThumbnailsAreExactFrames() async throws {
        let path = try await Self.recording.path()
        let generator = try ImageGenerator(asset: Asset(path: path))
        generator.requestedTimeToleranceBefore = .zero
        generator.requestedTimeToleranceAfter = .zero
        var stamps: [UInt32?] = []
        for time in [MediaTime(value: 5, timescale: 10), MediaTime(value: 1, timescale: 1), MediaTime(value: 29, timescale: 10)] {
            let image = try await generator.image(at: time)
            stamps.append(stamp(of: image.pixelBuffer))
            #expect(abs(image.actualTime.seconds - time.seconds) < 1e-4)
        }
        #expect(stamps == [15, 30, 87])
        // Between frames, the frame on screen is the earlier one.
        let between = try await generator.image(at: MediaTime(seconds: 1.02, preferredTimescale: 1000))
        #expect(stamp(of: between.pixelBuffer) == 30)
        // Batch generation gives the same frames, in the order asked.
        let batch = await generator.images(at: [MediaTime(value: 29, timescale: 10), MediaTime(value: 5, timescale: 10)])
        #expect(try batch.map { try stamp(of: $0.get().pixelBuffer) } == [87, 15])
        print("thumbnails at 0.5 s, 1.0 s, 2.9 s show stamps \(stamps)")
    }

    @Test func infiniteToleranceMaximumSizeTransformAndJPEG() async throws {
        let path = try await Self.recording.path()
        let generator = try ImageGenerator(asset: Asset(path: path))
        // Default tolerance: the keyframe at or before the time (frames 0 and 60 here) is good enough.
        let fast = try await generator.image(at: MediaTime(value: 1, timescale: 1))
        #expect(stamp(of: fast.pixelBuffer) == 0)
        #expect(fast.actualTime == .zero)
        generator.maximumSize = Dimensions(width: 160, height: 160)
        let small = try await generator.image(at: MediaTime(value: 2, timescale: 1))
        #expect(small.pixelBuffer.width == 160 && small.pixelBuffer.height == 120)
        let jpeg = try await generator.jpegData(at: MediaTime(value: 2, timescale: 1))
        #expect(jpeg.data.prefix(2) == [0xFF, 0xD8])
        let decoded = try JPEGCodec().decode(jpeg.data)
        #expect(decoded.width == 160 && decoded.height == 120)

        let rotatedPath = (path as NSString).deletingLastPathComponent + "/rotated.mp4"
        let ffmpeg = try await offPool("ffmpeg", ["-v", "error", "-y", "-i", path, "-c", "copy", "-metadata:s:v:0", "rotate=90", rotatedPath])
        #expect(ffmpeg.status == 0, "\(ffmpeg.stderr)")
        let rotatedAsset = try Asset(path: rotatedPath)
        let track = try require(rotatedAsset.tracks(withMediaType: .video).first)
        #expect(track.preferredTransform.rightAngleRotation?.degrees == 270)
        let turned = try ImageGenerator(asset: rotatedAsset)
        turned.appliesPreferredTrackTransform = true
        let image = try await turned.image(at: .zero)
        #expect(image.pixelBuffer.width == 480 && image.pixelBuffer.height == 640)
    }

    @Test func assetDescribesTracksAndReaderDeliversEverySampleInOrder() async throws {
        let path = try await Self.recording.path()
        let asset = try Asset(path: path)
        #expect(abs(asset.duration.seconds - 3.2) < 0.05)
        let video = try require(asset.tracks(withMediaType: .video).first)
        let audio = try require(asset.tracks(withMediaType: .audio).first)
        #expect(video.codec == "h264" && video.naturalSize == Dimensions(width: 640, height: 480))
        #expect(video.nominalFrameRate == 30)
        #expect(video.frameCount == nil || video.frameCount == 96)  // fragmented files carry no count
        #expect(audio.codec == "aac" && audio.sampleRate == 48_000 && audio.channelCount == 1)

        let reader = try AssetReader(asset: asset)
        try reader.addOutput(mediaType: .video)
        try reader.addOutput(mediaType: .audio)
        #expect(reader.startReading())
        var stamps: [UInt32?] = []
        var lastVideo = MediaTime.negativeInfinity
        var audioSamples = 0
        while let sample = reader.copyNextSampleBuffer() {
            if let pixels = sample.pixelBuffer {
                #expect(sample.presentationTime > lastVideo)
                lastVideo = sample.presentationTime
                stamps.append(stamp(of: pixels))
            } else if let buffer = sample.audioBuffer {
                audioSamples += buffer.frameLength
            }
        }
        #expect(reader.status == .completed)
        #expect(stamps == (0..<96).map { Optional(UInt32($0)) })
        #expect(abs(Double(audioSamples) / 48_000 - 3.2) < 0.05)
    }
}

/// Records once, on first use, and hands every caller the same file.
actor SharedRecording {
    private var made: String?

    func path() async throws -> String {
        if let made { return made }
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/thumbs.mp4"
        _ = try await TestSupport.record(seconds: 3.2, size: Dimensions(width: 640, height: 480), fps: 30, to: path)
        made = path
        return path
    }
}
