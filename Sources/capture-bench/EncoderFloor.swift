import CaptureKit
import Foundation

/// The encoder floor: the frames the bench's session renders, captured beforehand into memory,
/// encoded and muxed by a minimal loop over the same MovieWriter calls MovieFileOutput makes.
/// Shared by the timed rows (`pipeline ÷ encoder floor`) and the instruction workloads.
struct EncoderFloor {
    let size: Dimensions
    let frames: [PixelBuffer]
    let audio: [AudioPCMBuffer]
    static let audioFormat = AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .float32)

    /// `frameCount` frames of sim:back at `size` (seed 1: the same camera, so the same auto
    /// exposure and white balance as the pipeline's) and the microphone's tone to go with them.
    init(size: Dimensions, frameCount: Int) throws {
        self.size = size
        let session = try Rows.makeSession(seed: 1, size: size, audio: false)
        let output = VideoDataOutput()
        let collector = FrameCollector()
        output.setSampleBufferDelegate(collector, queue: DispatchQueue(label: "collect"))
        try session.addOutput(output)
        try session.startRunning()
        while collector.frames.withLock({ $0.count }) < frameCount { Thread.sleep(forTimeInterval: 0.01) }
        session.stopRunning()
        frames = Array(collector.frames.withLock { $0 }.prefix(frameCount))
        let tone = ToneGenerator(spec: SyncToneSpec(), sampleRate: 48_000)
        audio = (0..<(frameCount * 1600 / 1024 + 2)).map { n in
            let b = AudioPCMBuffer(format: Self.audioFormat, frameCapacity: 1024)
            b.withProducerBytes { tone.fill($0.baseAddress!.assumingMemoryBound(to: Float.self), first: Int64(n * 1024), count: 1024, channels: 1) }
            return b
        }
    }

    /// Encodes every frame with its audio into an MP4 at `path`: libx264 at `preset`, AAC, fragments
    /// every 10 s (the output's default) and the same track tick MovieFileOutput uses (1/90000 s),
    /// so both write the same H.264.
    func encode(to path: String, preset: VideoEncoderSettings.Preset = .veryfast) throws {
        var video = VideoEncoderSettings(dimensions: size, inputPixelFormat: .nv12, frameDuration: frameDuration)
        video.preset = preset
        video.timeBase = TrackTimeBase.fine(for: frameDuration)
        let ticksPerFrame = TrackTimeBase.ticksPerFrame(frameDuration, in: video.timeBase!)
        let writer = try MovieWriter(path: path, container: .mp4, video: video,
                                     audio: AudioEncoderSettings(input: Self.audioFormat),
                                     options: MovieWriter.Options(fragmentInterval: MediaTime(value: 10, timescale: 1)))
        var written = 0
        for n in frames.indices {
            try writer.appendVideo(frames[n], frameIndex: Int64(n) * ticksPerFrame)
            while written < (n + 1) * 1600 {
                try writer.appendAudio(audio[written / 1024])
                written += 1024
            }
        }
        try writer.finish()
    }
}
