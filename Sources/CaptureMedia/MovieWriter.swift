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

/// The file types `MovieWriter` (and the asset writer and audio recorder built on it) can write.
public enum MediaFileType: String, Sendable, Hashable, CaseIterable, Codable {
    case mp4, mov, m4a, wav

    /// The type for a file name's extension, if it is one CaptureKit writes.
    public init?(pathExtension: String) {
        self.init(rawValue: pathExtension.lowercased())
    }

    /// libavformat's muxer for this type (`ipod` writes the M4A brand).
    var muxerName: String {
        switch self {
        case .mp4: return "mp4"
        case .mov: return "mov"
        case .m4a: return "ipod"
        case .wav: return "wav"
        }
    }

    /// Whether the type can hold a video track.
    public var canHoldVideo: Bool { self == .mp4 || self == .mov }
}

/// Encodes video (H.264) and audio (AAC) and muxes them into MP4/MOV through libavformat.
///
/// Video PTS are given relative to the file's start; audio is a contiguous run of samples that
/// starts at the same instant, so the two tracks stay aligned by construction. Confined to one
/// thread at a time (the owning output's lock).
public final class MovieWriter: @unchecked Sendable {
    public let path: String
    /// The movie container (`.mp4` for the MP4 family, M4A and WAV included; see `fileType`).
    public let container: MovieContainer
    /// The exact file type written.
    public let fileType: MediaFileType
    private var formatContext: UnsafeMutablePointer<AVFormatContext>?
    private let video: VideoEncoder?
    private let audio: AudioEncoder?
    private var videoStream: UnsafeMutablePointer<AVStream>?
    private var audioStream: UnsafeMutablePointer<AVStream>?
    private var finished = false
    public private(set) var videoFramesWritten = 0
    public private(set) var audioSamplesWritten: Int64 = 0

    /// How the file is laid out and shown.
    public struct Options: Sendable, Hashable {
        /// Write a fragment (moof+mdat) every this often, so a crash loses at most one interval;
        /// nil writes one moov at the end (a crash leaves an unreadable file).
        public var fragmentInterval: MediaTime?
        /// Clockwise degrees a player should rotate the video (written as the display matrix).
        public var rotation: Int = 0
        /// A player should mirror the video left-right (also in the display matrix).
        public var mirrored = false
        public init(fragmentInterval: MediaTime? = nil, rotation: Int = 0, mirrored: Bool = false) {
            self.fragmentInterval = fragmentInterval
            self.rotation = rotation
            self.mirrored = mirrored
        }
    }

    public let options: Options

    /// Creates the file and writes its header. Fails if the folder is missing or the file exists.
    public convenience init(path: String, container: MovieContainer, video videoSettings: VideoEncoderSettings?,
                            audio audioSettings: AudioEncoderSettings?, options: Options = Options()) throws(CaptureError) {
        try self.init(path: path, fileType: container == .mov ? .mov : .mp4, video: videoSettings,
                      audio: audioSettings, options: options)
    }

    /// Creates a file of any `MediaFileType` (M4A and WAV hold audio only) and writes its header.
    public init(path: String, fileType: MediaFileType, video videoSettings: VideoEncoderSettings?,
                audio audioSettings: AudioEncoderSettings?, options: Options = Options()) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        self.path = path
        self.fileType = fileType
        self.container = fileType == .mov ? .mov : .mp4
        self.options = options
        guard videoSettings != nil || audioSettings != nil else { throw .noInputs }
        if videoSettings != nil, !fileType.canHoldVideo {
            throw .invalidArgument("a \(fileType.rawValue) file cannot hold video")
        }
        let folder = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !folder.isEmpty, !(FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory) && isDirectory.boolValue) {
            throw .outputDirectoryMissing(path: path)
        }
        if FileManager.default.fileExists(atPath: path) { throw .outputFileExists(path: path) }

        video = try videoSettings.map { (s) throws(CaptureError) in try VideoEncoder(settings: s) }
        audio = try audioSettings.map { (s) throws(CaptureError) in try AudioEncoder(settings: s) }

        var context: UnsafeMutablePointer<AVFormatContext>? = nil
        try FFmpeg.check(avformat_alloc_output_context2(&context, nil, fileType.muxerName, path),
                         "creating a \(fileType.rawValue) muxer")
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
            let stream = try addStream(for: video.context)
            videoStream = stream
            if options.rotation != 0 || options.mirrored {
                guard let matrix = av_stream_new_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, 9 * 4) else {
                    throw .codecFailure(operation: "av_stream_new_side_data", code: -12, message: "out of memory")
                }
                let m = UnsafeMutableRawPointer(matrix).assumingMemoryBound(to: Int32.self)
                // av_display_rotation_set takes clockwise degrees; ffprobe then reports the
                // counter-clockwise angle (−90 for 90° clockwise, as phone portrait videos read)
                // and ffmpeg's autorotate turns such a video clockwise.
                av_display_rotation_set(m, Double(options.rotation))
                if options.mirrored { av_display_matrix_flip(m, 1, 0) }
            }
        }
        if let audio {
            try audio.open(globalHeader: globalHeader)
            audioStream = try addStream(for: audio.context)
        }
        try FFmpeg.check(avio_open(&fc.pointee.pb, path, AVIO_FLAG_WRITE), "opening \(path) for writing")
        var muxerOptions: [(String, String)] = []
        if let interval = options.fragmentInterval, interval.isNumeric, interval > .zero {
            // delay_moov keeps A/V aligned (empty_moov shifts video by the B-frame delay and shows
            // the AAC priming); we cut fragments ourselves (frag_custom): a tiny first one as soon as
            // every track has a packet, so the moov reaches the disk early, then one at the first
            // video keyframe after each interval.
            muxerOptions.append(("movflags", "+delay_moov+default_base_moof+frag_custom"))
            fragmentInterval = interval.seconds
        }
        let dictionary = OptionsDictionary(muxerOptions)
        try FFmpeg.check(avformat_write_header(fc, &dictionary.pointer), "writing the \(fileType.rawValue) header")
        try FFmpeg.rejectLeftovers(dictionary.pointer, "the \(fileType.rawValue) muxer")
        headerBytes = avio_tell(fc.pointee.pb)
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

    /// Bytes the file holds so far, counting packets the muxer still buffers (a fragment is
    /// written whole), so size limits see data as soon as it is encoded.
    public var bytesWritten: Int64 {
        guard let pb = formatContext?.pointee.pb else { return 0 }
        return max(avio_tell(pb), headerBytes + packetBytes)
    }
    private var headerBytes: Int64 = 0
    private var packetBytes: Int64 = 0
    private var fragmentInterval: Double?
    private var lastFragmentStart: Double?
    private var videoPackets = 0
    private var audioPackets = 0
    /// Fragments flushed to disk so far (0 for unfragmented movies).
    public private(set) var fragmentsWritten = 0

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
        try FFmpeg.check(trailer, "writing the \(fileType.rawValue) trailer")
    }

    private func write(_ packet: UnsafeMutablePointer<AVPacket>, timeBase: AVRational,
                       stream: UnsafeMutablePointer<AVStream>) throws(CaptureError) {
        guard let fc = formatContext else { return }
        packet.pointee.stream_index = stream.pointee.index
        packetBytes += Int64(packet.pointee.size)
        if stream == videoStream, lastFragmentStart != nil {
            let seconds = Double(packet.pointee.pts) * Double(timeBase.num) / Double(timeBase.den)
            try cutFragmentIfDue(beforeVideoAt: seconds, isKeyframe: packet.pointee.flags & AV_PKT_FLAG_KEY != 0)
        }
        if stream == videoStream { videoPackets += 1 } else { audioPackets += 1 }
        defer {
            // The first fragment is cut as soon as every track has a packet, so the moov is on disk early.
            if fragmentInterval != nil, lastFragmentStart == nil, videoStream == nil || videoPackets > 0,
               audioStream == nil || audioPackets > 0 {
                try? cutFragment(at: 0)
            }
        }
        // The muxer may have changed the stream's time base in write_header: rescale to it.
        av_packet_rescale_ts(packet, timeBase, stream.pointee.time_base)
        try FFmpeg.check(av_interleaved_write_frame(fc, packet), "writing a packet to \(path)")
    }

    /// Cuts a fragment before the first video keyframe at least one interval after the previous cut.
    private func cutFragmentIfDue(beforeVideoAt seconds: Double, isKeyframe: Bool) throws(CaptureError) {
        guard let interval = fragmentInterval, let last = lastFragmentStart,
              isKeyframe, seconds - last >= interval - 1e-6 else { return }
        try cutFragment(at: seconds)
    }

    private func cutFragment(at seconds: Double) throws(CaptureError) {
        guard let fc = formatContext else { return }
        // Drain the interleaving queue, then a NULL packet makes the muxer write the fragment it holds (frag_custom).
        try FFmpeg.check(av_interleaved_write_frame(fc, nil), "flushing interleaved packets")
        let moovPending = fragmentsWritten == 0
        try FFmpeg.check(av_write_frame(fc, nil), "writing a fragment to \(path)")
        // With delay_moov the first flush writes only the moov; flush again for the samples.
        if moovPending { try FFmpeg.check(av_write_frame(fc, nil), "writing the first fragment to \(path)") }
        avio_flush(fc.pointee.pb)
        fragmentsWritten += 1
        lastFragmentStart = seconds
    }

    private func close(deleteFile: Bool) {
        guard let fc = formatContext else { return }
        if fc.pointee.pb != nil { avio_closep(&fc.pointee.pb) }
        avformat_free_context(fc)
        formatContext = nil
        if deleteFile { try? FileManager.default.removeItem(atPath: path) }
    }
}
