import CFFmpeg
import CaptureCore
import Foundation

/// The container a movie is written in.
public enum MovieContainer: String, Sendable, CaseIterable {
    case mp4, mov

    /// The container for a file name's extension, if it is one CaptureKit writes.
    public init?(pathExtension: String) {
        self.init(rawValue: pathExtension.lowercased())
    }
}

/// Encodes video (H.264) and audio (AAC) and muxes them into MP4/MOV through libavformat.
///
/// Video PTS are given relative to the file's start; audio is a contiguous run of samples that
/// starts at the same instant, so the two tracks stay aligned by construction. Confined to one
/// thread at a time (the owning output's lock).
public final class MovieWriter: @unchecked Sendable {
    public let path: String
    public let container: MovieContainer
    private var formatContext: UnsafeMutablePointer<AVFormatContext>?
    private let video: VideoEncoder?
    private let audio: AudioEncoder?
    private var videoStream: UnsafeMutablePointer<AVStream>?
    private var audioStream: UnsafeMutablePointer<AVStream>?
    private var finished = false
    public private(set) var videoFramesWritten = 0
    public private(set) var audioSamplesWritten: Int64 = 0

    /// Creates the file and writes its header. Fails if the folder is missing or the file exists.
    public init(path: String, container: MovieContainer, video videoSettings: VideoEncoderSettings?,
                audio audioSettings: AudioEncoderSettings?) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        self.path = path
        self.container = container
        guard videoSettings != nil || audioSettings != nil else { throw .noInputs }
        let folder = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !folder.isEmpty, !(FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory) && isDirectory.boolValue) {
            throw .outputDirectoryMissing(path: path)
        }
        if FileManager.default.fileExists(atPath: path) { throw .outputFileExists(path: path) }

        video = try videoSettings.map { (s) throws(CaptureError) in try VideoEncoder(settings: s) }
        audio = try audioSettings.map { (s) throws(CaptureError) in try AudioEncoder(settings: s) }

        var context: UnsafeMutablePointer<AVFormatContext>? = nil
        try FFmpeg.check(avformat_alloc_output_context2(&context, nil, container.rawValue, path),
                         "creating a \(container.rawValue) muxer")
        formatContext = context
        do {
            try openStreamsAndWriteHeader()
        } catch {
            close(deleteFile: true)
            throw error
        }
    }

    deinit { close(deleteFile: false) }

    private func openStreamsAndWriteHeader() throws(CaptureError) {
        guard let fc = formatContext else { return }
        fc.pointee.flags |= AVFMT_FLAG_BITEXACT
        let globalHeader = (fc.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER) != 0
        if let video {
            try video.open(globalHeader: globalHeader)
            videoStream = try addStream(for: video.context)
        }
        if let audio {
            try audio.open(globalHeader: globalHeader)
            audioStream = try addStream(for: audio.context)
        }
        try FFmpeg.check(avio_open(&fc.pointee.pb, path, AVIO_FLAG_WRITE), "opening \(path) for writing")
        let options = OptionsDictionary([])
        try FFmpeg.check(avformat_write_header(fc, &options.pointer), "writing the \(container.rawValue) header")
        try FFmpeg.rejectLeftovers(options.pointer, "the \(container.rawValue) muxer")
    }

    private func addStream(for codec: UnsafeMutablePointer<AVCodecContext>) throws(CaptureError) -> UnsafeMutablePointer<AVStream> {
        guard let fc = formatContext, let stream = avformat_new_stream(fc, nil) else {
            throw .codecFailure(operation: "avformat_new_stream", code: -12, message: "out of memory")
        }
        try FFmpeg.check(avcodec_parameters_from_context(stream.pointee.codecpar, codec), "copying codec parameters")
        stream.pointee.time_base = codec.pointee.time_base
        return stream
    }

    /// Appends one frame; `ticks` counts frame durations from the file's start.
    public func appendVideo(_ buffer: PixelBuffer, frameIndex ticks: Int64) throws(CaptureError) {
        guard let video, let stream = videoStream else { throw .invalidState("this movie has no video track") }
        guard !finished else { throw .invalidState("the movie is already finished") }
        try video.encode(buffer, ticks: ticks) { (packet) throws(CaptureError) in
            try write(packet, timeBase: video.context.pointee.time_base, stream: stream)
        }
        videoFramesWritten += 1
    }

    /// Appends audio samples that directly follow the previous ones.
    public func appendAudio(_ buffer: AudioPCMBuffer) throws(CaptureError) {
        guard let audio, let stream = audioStream else { throw .invalidState("this movie has no audio track") }
        guard !finished else { throw .invalidState("the movie is already finished") }
        try audio.encode(buffer) { (packet) throws(CaptureError) in
            try write(packet, timeBase: audio.context.pointee.time_base, stream: stream)
        }
        audioSamplesWritten += Int64(buffer.frameLength)
    }

    /// Bytes written to the file so far.
    public var bytesWritten: Int64 {
        guard let pb = formatContext?.pointee.pb else { return 0 }
        return avio_tell(pb)
    }

    /// Flushes the encoders and writes the trailer; the file is complete and playable afterwards.
    public func finish() throws(CaptureError) {
        guard !finished, let fc = formatContext else { return }
        finished = true
        var failure: CaptureError?
        do {
            if let video, let stream = videoStream {
                try video.finish { (packet) throws(CaptureError) in
                    try write(packet, timeBase: video.context.pointee.time_base, stream: stream)
                }
            }
            if let audio, let stream = audioStream {
                try audio.finish { (packet) throws(CaptureError) in
                    try write(packet, timeBase: audio.context.pointee.time_base, stream: stream)
                }
            }
        } catch {
            failure = error
        }
        // Always write the trailer: a file with a trailer is playable even if a flush failed.
        let trailer = av_write_trailer(fc)
        close(deleteFile: false)
        if let failure { throw failure }
        try FFmpeg.check(trailer, "writing the \(container.rawValue) trailer")
    }

    private func write(_ packet: UnsafeMutablePointer<AVPacket>, timeBase: AVRational,
                       stream: UnsafeMutablePointer<AVStream>) throws(CaptureError) {
        guard let fc = formatContext else { return }
        packet.pointee.stream_index = stream.pointee.index
        // The muxer may have changed the stream's time base in write_header: rescale to it.
        av_packet_rescale_ts(packet, timeBase, stream.pointee.time_base)
        try FFmpeg.check(av_interleaved_write_frame(fc, packet), "writing a packet to \(path)")
    }

    private func close(deleteFile: Bool) {
        guard let fc = formatContext else { return }
        if fc.pointee.pb != nil { avio_closep(&fc.pointee.pb) }
        avformat_free_context(fc)
        formatContext = nil
        if deleteFile { try? FileManager.default.removeItem(atPath: path) }
    }
}
