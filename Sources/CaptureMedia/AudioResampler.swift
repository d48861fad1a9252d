import CFFmpeg
import CaptureCore

/// Sample format, rate and layout conversion through libswresample, from interleaved PCM to the
/// planar float an AAC encoder takes. Confined to one thread at a time.
public final class AudioResampler {
    public let input: AudioStreamFormat
    public let outputSampleRate: Int
    public let outputChannels: Int
    private var context: OpaquePointer?

    public init(input: AudioStreamFormat, outputSampleRate: Int, outputChannels: Int) throws(CaptureError) {
        self.input = input
        self.outputSampleRate = outputSampleRate
        self.outputChannels = outputChannels
        var inLayout = AVChannelLayout()
        var outLayout = AVChannelLayout()
        av_channel_layout_default(&inLayout, Int32(input.channelCount))
        av_channel_layout_default(&outLayout, Int32(outputChannels))
        defer {
            av_channel_layout_uninit(&inLayout)
            av_channel_layout_uninit(&outLayout)
        }
        let inFormat = input.sampleFormat == .float32 ? AV_SAMPLE_FMT_FLT : AV_SAMPLE_FMT_S16
        try FFmpeg.check(swr_alloc_set_opts2(&context, &outLayout, AV_SAMPLE_FMT_FLTP, Int32(outputSampleRate),
                                             &inLayout, inFormat, Int32(input.sampleRate), 0, nil),
                         "configuring libswresample")
        try FFmpeg.check(swr_init(context), "initialising libswresample \(input) → \(outputSampleRate) Hz \(outputChannels) ch")
    }

    deinit { swr_free(&context) }

    /// Converts one buffer; returns planar float channels. Resampling may hold back a few samples (see `flush`).
    public func convert(_ buffer: AudioPCMBuffer) throws(CaptureError) -> [[Float]] {
        guard buffer.format == input else { throw .invalidArgument("buffer format \(buffer.format) is not the resampler's \(input)") }
        return try buffer.withBytes { (raw) throws(CaptureError) -> [[Float]] in
            try run(input: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), frames: buffer.frameLength)
        }
    }

    /// Returns what the resampler still holds at the end of a stream.
    public func flush() throws(CaptureError) -> [[Float]] {
        try run(input: nil, frames: 0)
    }

    private func run(input pointer: UnsafePointer<UInt8>?, frames: Int) throws(CaptureError) -> [[Float]] {
        let capacity = Int(swr_get_out_samples(context, Int32(frames))) + 16
        let storage = (0..<outputChannels).map { _ in UnsafeMutablePointer<Float>.allocate(capacity: capacity) }
        defer { storage.forEach { $0.deallocate() } }
        var outPointers: [UnsafeMutablePointer<UInt8>?] = storage.map { UnsafeMutableRawPointer($0).assumingMemoryBound(to: UInt8.self) }
        var inPointers: [UnsafePointer<UInt8>?] = [pointer]
        let produced = swr_convert(context, &outPointers, Int32(capacity), &inPointers, Int32(frames))
        try FFmpeg.check(produced, "swr_convert")
        return storage.map { Array(UnsafeBufferPointer(start: $0, count: Int(produced))) }
    }
}
