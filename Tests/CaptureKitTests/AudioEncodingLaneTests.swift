import CaptureKit
import Foundation
import Testing

/// `MovieWriter` encodes audio on an `AudioEncodingLane` (its own queue) and writes the packets at
/// its next video append, before the frame's. The muxer must see what encoding in place gave it,
/// so the files are the same bytes: checked here against a writer that encodes in place
/// (`Options.encodesAudioOnLane = false`), for each container, fragmented or not, and audio only.
@Suite struct AudioEncodingLaneTests {
    /// 2 s of moving NV12 frames at `fps` and the sync tone in 1024-sample buffers, interleaved as a
    /// session delivers them (the audio up to each frame's end before the next frame). At 30 fps every
    /// frame finds audio waiting on the lane; at 60 fps some find none and are written as encoded.
    static func write(to path: String, fileType: MediaFileType, video: Bool, fragments: MediaTime?, onLane: Bool, fps: Int = 30) throws {
        let frameDuration = MediaTime(value: 1, timescale: Int32(fps))
        let size = Dimensions(width: 320, height: 240)
        var settings = VideoEncoderSettings(dimensions: size, inputPixelFormat: .nv12, frameDuration: frameDuration, preset: .ultrafast)
        settings.timeBase = TrackTimeBase.fine(for: frameDuration)
        let ticksPerFrame = TrackTimeBase.ticksPerFrame(frameDuration, in: settings.timeBase!)
        let audioFormat = AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .float32)
        var options = MovieWriter.Options(fragmentInterval: fragments)
        options.encodesAudioOnLane = onLane
        let writer = try MovieWriter(path: path, fileType: fileType, video: video ? settings : nil,
                                     audio: AudioEncoderSettings(input: audioFormat), options: options)
        let tone = ToneGenerator(spec: SyncToneSpec(), sampleRate: 48_000)
        var samples = 0
        for n in 0..<(2 * fps) {
            if video {
                let buffer = PixelBuffer(format: .nv12, width: size.width, height: size.height)
                let rowBytes = buffer.bytesPerRow[0]
                try buffer.withMutablePlane(0) { bytes in
                    for y in 0..<size.height { for x in 0..<size.width { bytes[y * rowBytes + x] = UInt8(truncatingIfNeeded: x + 2 * y + 5 * n) } }
                }
                try buffer.withMutablePlane(1) { bytes in for i in 0..<bytes.count { bytes[i] = UInt8(truncatingIfNeeded: 128 + n) } }
                try writer.appendVideo(buffer, frameIndex: Int64(n) * ticksPerFrame)
            }
            while samples < (n + 1) * (48_000 / fps) {
                let b = AudioPCMBuffer(format: audioFormat, frameCapacity: 1024)
                b.withProducerBytes { tone.fill($0.baseAddress!.assumingMemoryBound(to: Float.self), first: Int64(samples), count: 1024, channels: 1) }
                try writer.appendAudio(b)
                samples += 1024
            }
        }
        try writer.finish()
    }

    @Test(arguments: [
        (MediaFileType.mp4, true, MediaTime?.some(MediaTime(value: 1, timescale: 2)), 30),
        (.mp4, true, nil, 30),
        (.mp4, true, MediaTime(value: 1, timescale: 2), 60),
        (.mov, true, MediaTime(value: 1, timescale: 1), 30),
        (.mkv, true, nil, 30),
        (.m4a, false, nil, 30),
    ])
    func theLaneWritesTheBytesEncodingInPlaceWrites(_ fileType: MediaFileType, _ video: Bool, _ fragments: MediaTime?, _ fps: Int) throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ext = fileType.rawValue
        try Self.write(to: dir + "/lane.\(ext)", fileType: fileType, video: video, fragments: fragments, onLane: true, fps: fps)
        try Self.write(to: dir + "/inPlace.\(ext)", fileType: fileType, video: video, fragments: fragments, onLane: false, fps: fps)
        let lane = try Data(contentsOf: URL(fileURLWithPath: dir + "/lane.\(ext)"))
        let inPlace = try Data(contentsOf: URL(fileURLWithPath: dir + "/inPlace.\(ext)"))
        #expect(lane == inPlace, "\(ext): \(lane.count) bytes on the lane, \(inPlace.count) in place")
        // Not vacuous: the file holds the audio (and the video) it was given.
        let info = try MediaFileReader(path: dir + "/lane.\(ext)").info
        let audio = try #require(info.streams.first { $0.mediaType == "audio" })
        #expect(audio.codec == "aac")
        #expect(info.streams.contains { $0.mediaType == "video" } == video)
        #expect((info.duration ?? 0) > 1.9)
    }
}
