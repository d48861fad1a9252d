// Over 500 lines, on purpose: MovieWriter owns one AVFormatContext and every path that writes to it
// (header, packets, held video, fragments and forced keyframes, write-error checks and the cut back
// to complete fragments, trailer, defragmentation); the small value types at the top go with it.
import CFFmpeg
import CaptureCore
import Foundation
import Logging

/// The container a movie is written in.
public enum MovieContainer: String, Sendable, CaseIterable {
    case mp4, mov
    /// Matroska (`.mkv`): holds H.264, MJPEG (copied or encoded) and AAC. FFmpeg 5.1's muxer has
    /// no place for a display matrix, so rotation and mirroring are refused for it.
    case mkv

    /// The container for a file name's extension, if it is one CaptureKit writes.
    public init?(pathExtension: String) {
        self.init(rawValue: pathExtension.lowercased())
    }
}

/// The file types `MovieWriter` (and the asset writer and audio recorder built on it) can write.
public enum MediaFileType: String, Sendable, Hashable, CaseIterable, Codable {
    case mp4, mov, m4a, wav, mkv

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
        case .mkv: return "matroska"
        }
    }

    /// Whether the type can hold a video track.
    public var canHoldVideo: Bool { self == .mp4 || self == .mov || self == .mkv }

    /// The movie file type of a container.
    public init(_ container: MovieContainer) {
        switch container {
        case .mp4: self = .mp4
        case .mov: self = .mov
        case .mkv: self = .mkv
        }
    }
}

/// A video track whose frames arrive already compressed and are muxed as they are: no decoding,
/// no encoding (`ffmpeg -c:v copy`). Today that is MJPEG, every frame a keyframe.
public struct VideoPassthroughSettings: Sendable, Hashable {
    /// The compressed format the frames arrive in (`.mjpeg`).
    public var format: PixelFormat
    public var dimensions: Dimensions
    /// Nominal time between frames.
    public var frameDuration: MediaTime
    /// The track's tick; nil: one tick per frame duration (frame n at tick n). See
    /// `VideoEncoderSettings.timeBase`.
    public var timeBase: MediaTime?

    public init(format: PixelFormat = .mjpeg, dimensions: Dimensions, frameDuration: MediaTime, timeBase: MediaTime? = nil) {
        self.format = format
        self.dimensions = dimensions
        self.frameDuration = frameDuration
        self.timeBase = timeBase
    }

    /// The tick `appendCompressedVideo` counts in.
    var tick: MediaTime { timeBase ?? frameDuration }
}

/// Video track time bases. A track ticking once per frame cannot hold a real device's jittered
/// timestamps; 1/90000 s (MPEG's clock) can, and still puts every common frame rate on whole ticks.
public enum TrackTimeBase {
    /// 1/90000 s when the frame duration is a whole number of such ticks (every common rate),
    /// otherwise the frame duration itself.
    public static func fine(for frameDuration: MediaTime) -> MediaTime {
        guard frameDuration.isNumeric, frameDuration.value > 0 else { return frameDuration }
        let (product, overflow) = frameDuration.value.multipliedReportingOverflow(by: 90_000)
        return !overflow && product % Int64(frameDuration.timescale) == 0 ? MediaTime(value: 1, timescale: 90_000) : frameDuration
    }

    /// `time` in whole ticks of `base` (rounded to nearest).
    public static func ticks(_ time: MediaTime, in base: MediaTime) -> Int64 {
        if base.value == 1 { return time.convertScale(base.timescale).value }
        return Int64((time.seconds / base.seconds).rounded())
    }

    /// Ticks per frame (at least 1).
    public static func ticksPerFrame(_ frameDuration: MediaTime, in base: MediaTime) -> Int64 {
        max(1, ticks(frameDuration, in: base))
    }
}

/// Checks that a buffer holds one whole JPEG: SOI (FF D8) at its first byte and EOI (FF D9) at its
/// end, or within its last 64 bytes (some UVC cameras pad a frame after EOI).
public enum JPEGFrameCheck {
    /// Why `bytes` are not a whole JPEG frame, or nil when they are; `length` is the frame's size up
    /// to and including EOI (trailing padding excluded).
    public static func inspect(_ bytes: UnsafeRawBufferPointer) -> (length: Int, problem: String?) {
        guard bytes.count >= 4 else { return (0, "only \(bytes.count) bytes") }
        guard bytes[0] == 0xFF, bytes[1] == 0xD8 else {
            return (0, String(format: "no JPEG start-of-image marker (first bytes %02X %02X, expected FF D8)", bytes[0], bytes[1]))
        }
        var end = bytes.count
        let floor = max(2, bytes.count - 64)
        while end - 2 >= floor {
            if bytes[end - 2] == 0xFF && bytes[end - 1] == 0xD9 { return (end, nil) }
            end -= 1
        }
        return (0, "no JPEG end-of-image marker (FF D9) at the end of the frame's \(bytes.count) bytes: the frame is truncated")
    }
}

/// Encodes video (H.264, MJPEG, HEVC) and audio (AAC) and muxes them into MP4/MOV/MKV through
/// libavformat; or, for a pass-through video track, muxes already-compressed MJPEG frames as they are.
///
/// Video PTS are given relative to the file's start; audio is a contiguous run of samples that
/// starts at the same instant, so the two tracks stay aligned by construction. Confined to one
/// thread at a time (the owning output's lock).
///
/// Pass-through (`videoPassthrough`): each frame's bytes become one `AV_CODEC_ID_MJPEG` packet,
/// a keyframe, with PTS = its tick × the frame duration, referenced (not copied) from its
/// `PixelBuffer` until libavformat has written it. MOV and MKV take it; MP4 is refused
/// (`passthroughUnavailable`: MP4 players rarely play Motion JPEG — encode H.264 for MP4).
/// A frame that is not a whole JPEG throws `invalidCompressedFrame` and nothing is written.
public final class MovieWriter {
    public let path: String
    /// The movie container (`.mp4` for the MP4 family, M4A and WAV included; see `fileType`).
    public let container: MovieContainer
    /// The exact file type written.
    public let fileType: MediaFileType
    private var formatContext: UnsafeMutablePointer<AVFormatContext>?
    private let video: VideoEncoder?
    private let passthrough: VideoPassthroughSettings?
    /// The pass-through track's packet (its data referenced from the frame's `PixelBuffer`).
    private let passthroughPacket: PacketOwner?
    /// The newest video packet, held until the next one arrives so that its duration is the real
    /// gap to it: a fragmented file starts each fragment where the previous one's durations end,
    /// so a nominal duration would move a jittered frame onto the grid.
    private let heldVideo: PacketOwner
    private var isHoldingVideo = false
    private var heldVideoTimeBase = AVRational(num: 1, den: 1)
    private let audio: AudioEncoder?
    /// Encodes each audio buffer on a queue while the writer goes on (see `AudioEncodingLane`).
    private let audioLane: AudioEncodingLane?
    /// Audio buffers that may wait for the next video frame before they are written (a frame
    /// period holds 1–2 buffers of 1024 samples at 48 kHz and 30 fps).
    static let audioBuffersAhead = 8
    private var videoStream: UnsafeMutablePointer<AVStream>?
    private var audioStream: UnsafeMutablePointer<AVStream>?
    private var finished = false
    public private(set) var videoFramesWritten = 0
    public private(set) var audioSamplesWritten: Int64 = 0
    /// Called on the writing thread after each video packet is handed to the muxer
    /// (`av_interleaved_write_frame` returned), with its PTS in seconds of file time: what a latency
    /// measurement from capture to file needs (capture-bench's latency (b)).
    public var videoPacketWritten: ((_ fileSeconds: Double) -> Void)?

    /// How the file is laid out and shown.
    public struct Options: Sendable, Hashable {
        /// Write a fragment (moof+mdat) every this often, so a crash loses at most one interval;
        /// nil writes one moov at the end (a crash leaves an unreadable file).
        public var fragmentInterval: MediaTime?
        /// Clockwise degrees a player should rotate the video (written as the display matrix).
        public var rotation: Int = 0
        /// A player should mirror the video left-right (also in the display matrix).
        public var mirrored = false
        /// A fragmented MP4/MOV becomes a regular movie when it finishes (`MovieDefragmenter`), as
        /// AVFoundation's do, so every reader hides the AAC priming; false keeps the fragments.
        public var defragmentsOnFinish = true
        /// Injected faults (tests, simulated runs): none by default.
        public var faults = OutputFaults()
        /// Tests: false encodes each audio buffer in place, on the appending thread, as before
        /// `AudioEncodingLane` (to compare the two: the files must be the same bytes).
        package var encodesAudioOnLane = true
        public init(fragmentInterval: MediaTime? = nil, rotation: Int = 0, mirrored: Bool = false,
                    defragmentsOnFinish: Bool = true) {
            self.fragmentInterval = fragmentInterval
            self.rotation = rotation
            self.mirrored = mirrored
            self.defragmentsOnFinish = defragmentsOnFinish
        }
    }

    public let options: Options

    /// Creates the file and writes its header. Fails if the folder is missing or the file exists.
    public convenience init(path: String, container: MovieContainer, video videoSettings: VideoEncoderSettings?,
                            videoPassthrough: VideoPassthroughSettings? = nil,
                            audio audioSettings: AudioEncoderSettings?, options: Options = Options()) throws(CaptureError) {
        try self.init(path: path, fileType: MediaFileType(container), video: videoSettings, videoPassthrough: videoPassthrough,
                      audio: audioSettings, options: options)
    }

    /// Creates a file of any `MediaFileType` (M4A and WAV hold audio only) and writes its header.
    /// `videoPassthrough` instead of `video` makes a track of already-compressed frames
    /// (`appendCompressedVideo`); MOV and MKV only.
    public init(path: String, fileType: MediaFileType, video videoSettings: VideoEncoderSettings?,
                videoPassthrough: VideoPassthroughSettings? = nil,
                audio audioSettings: AudioEncoderSettings?, options: Options = Options()) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        // The notes are described only when the debug message is logged (metadata is an autoclosure):
        // describing the enums by reflection costs about a millisecond per file.
        CaptureLogging.logger(.media).debug("opening \(fileType.rawValue) file", metadata: [
            "path": "\(path)",
            "video": "\(videoSettings.map { "\($0.codec) \($0.dimensions)" } ?? (videoPassthrough != nil ? "passthrough" : "none"))",
            "audio": "\(audioSettings.map { "\($0.codec)" } ?? "none")"])
        self.path = path
        self.fileType = fileType
        self.container = fileType == .mov ? .mov : fileType == .mkv ? .mkv : .mp4
        self.options = options
        guard videoSettings != nil || videoPassthrough != nil || audioSettings != nil else { throw .noInputs }
        let hasVideo = videoSettings != nil || videoPassthrough != nil
        if hasVideo, !fileType.canHoldVideo {
            throw .invalidArgument("a \(fileType.rawValue) file cannot hold video")
        }
        if videoSettings != nil, videoPassthrough != nil {
            throw .invalidArgument("a movie has one video track: give encoder settings or pass-through settings, not both")
        }
        if let videoPassthrough {
            guard videoPassthrough.format == .mjpeg else {
                throw .passthroughUnavailable("only MJPEG frames can be copied into a movie, not \(videoPassthrough.format)")
            }
            guard fileType == .mov || fileType == .mkv else {
                throw .passthroughUnavailable("MJPEG is copied into MOV or MKV files only, not \(fileType.rawValue) (MP4 players rarely play Motion JPEG); record to .mov or .mkv, or encode H.264 for MP4")
            }
            guard videoPassthrough.frameDuration.isNumeric, videoPassthrough.frameDuration > .zero else {
                throw .invalidArgument("a pass-through track needs a positive frame duration, not \(videoPassthrough.frameDuration)")
            }
        }
        if hasVideo, fileType == .mkv, options.rotation != 0 || options.mirrored {
            throw .invalidArgument("a Matroska (.mkv) file cannot carry rotation or mirroring: this FFmpeg writes no display matrix into MKV; record to .mov, or turn the pixels with a VideoDataOutput")
        }
        try OutputPath.checkNew(path)

        video = try videoSettings.map { (s) throws(CaptureError) in try VideoEncoder(settings: s) }
        passthrough = videoPassthrough
        passthroughPacket = videoPassthrough == nil ? nil : try PacketOwner()
        heldVideo = try PacketOwner()
        audio = try audioSettings.map { (s) throws(CaptureError) in try AudioEncoder(settings: s) }
        audioLane = options.encodesAudioOnLane ? audio.map { AudioEncodingLane(encoder: $0) } : nil

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
            try addDisplayMatrix(to: stream)
        }
        if let passthrough {
            let stream = try addPassthroughStream(passthrough)
            videoStream = stream
            try addDisplayMatrix(to: stream)
        }
        if let audio {
            try audio.open(globalHeader: globalHeader)
            audioStream = try addStream(for: audio.context)
        }
        // Created here, exclusively (never through a symlink), then opened by name by libavformat.
        syncDescriptor = try OutputPath.claimKeepingOpen(path)
        claimedFile = true
        fileIdentity = FileIdentity(descriptor: syncDescriptor)
        try checkWrite(avio_open(&fc.pointee.pb, path, AVIO_FLAG_WRITE), "opening \(path) for writing")
        var muxerOptions: [(String, String)] = []
        if let interval = options.fragmentInterval, interval.isNumeric, interval > .zero, fileType == .mkv {
            // Matroska is written cluster by cluster anyway; we end a cluster at the same points
            // (a NULL packet flushes it), so a killed process loses at most one interval.
            fragmentInterval = interval.seconds
        } else if let interval = options.fragmentInterval, interval.isNumeric, interval > .zero {
            // delay_moov keeps A/V aligned (empty_moov shifts video by the B-frame delay and shows
            // the AAC priming); we cut fragments ourselves (frag_custom): a tiny first one as soon as
            // every track has a packet, so the moov reaches the disk early, then one at the first
            // video keyframe after each interval.
            muxerOptions.append(("movflags", "+delay_moov+default_base_moof+frag_custom"))
            fragmentInterval = interval.seconds
        } else if fileType == .mp4 || fileType == .mov || fileType == .m4a {
            // Unfragmented asked for: written in hidden fragments all the same, then defragmented
            // like any other, so a full disk or a killed process still leaves the complete
            // fragments playable instead of an mdat without its index. No keyframe is forced:
            // fragments are cut at the encoder's own keyframes, so the pictures are unchanged.
            muxerOptions.append(("movflags", "+delay_moov+default_base_moof+frag_custom"))
            fragmentInterval = Self.hiddenFragmentInterval
            hiddenFragments = true
        }
        let dictionary = OptionsDictionary(muxerOptions)
        try checkWrite(avformat_write_header(fc, &dictionary.pointer), "writing the \(fileType.rawValue) header")
        try FFmpeg.rejectLeftovers(dictionary.pointer, "the \(fileType.rawValue) muxer")
        headerBytes = avio_tell(fc.pointee.pb)
    }

    /// The connection's rotation and mirroring as the track's display matrix (MP4/MOV).
    private func addDisplayMatrix(to stream: UnsafeMutablePointer<AVStream>) throws(CaptureError) {
        guard options.rotation != 0 || options.mirrored else { return }
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

    /// A video stream described by hand (no encoder): MJPEG, the frame size, one tick per frame.
    private func addPassthroughStream(_ settings: VideoPassthroughSettings) throws(CaptureError) -> UnsafeMutablePointer<AVStream> {
        guard let fc = formatContext, let stream = avformat_new_stream(fc, nil), let par = stream.pointee.codecpar else {
            throw .codecFailure(operation: "avformat_new_stream", code: -12, message: "out of memory")
        }
        par.pointee.codec_type = AVMEDIA_TYPE_VIDEO
        par.pointee.codec_id = AV_CODEC_ID_MJPEG
        par.pointee.codec_tag = 0  // the muxer's own tag: 'jpeg' in MOV, V_MJPEG in MKV
        par.pointee.width = Int32(settings.dimensions.width)
        par.pointee.height = Int32(settings.dimensions.height)
        par.pointee.field_order = AV_FIELD_PROGRESSIVE
        par.pointee.color_range = AVCOL_RANGE_JPEG
        stream.pointee.time_base = FFmpeg.rational(settings.tick)
        let rate = AVRational(num: settings.frameDuration.timescale, den: Int32(clamping: settings.frameDuration.value))
        stream.pointee.avg_frame_rate = rate
        stream.pointee.r_frame_rate = rate
        return stream
    }

    private func addStream(for codec: UnsafeMutablePointer<AVCodecContext>) throws(CaptureError) -> UnsafeMutablePointer<AVStream> {
        guard let fc = formatContext, let stream = avformat_new_stream(fc, nil) else {
            throw .codecFailure(operation: "avformat_new_stream", code: -12, message: "out of memory")
        }
        try FFmpeg.check(avcodec_parameters_from_context(stream.pointee.codecpar, codec), "copying codec parameters")
        stream.pointee.time_base = codec.pointee.time_base
        return stream
    }

    /// Appends one frame; `ticks` counts the track's ticks (`VideoEncoderSettings.timeBase`, by default frame durations)
    /// from the file's start. A frame not written (`invalidCompressedFrame`) leaves a keyframe due at it to the next one.
    public func appendVideo(_ buffer: PixelBuffer, frameIndex ticks: Int64) throws(CaptureError) {
        guard let video, let stream = videoStream else { throw .invalidState("this movie has no video track") }
        guard !finished else { throw .invalidState("the movie is already finished") }
        let tick = video.settings.timeBase ?? video.settings.frameDuration, written = videoFramesWritten, due = nextForcedKeyframe
        defer { if videoFramesWritten == written { nextForcedKeyframe = due } }
        let forceKeyframe = keyframeDue(at: Double(ticks) * tick.seconds)
        // An injected slow encoder: this frame takes at least that long (wall time).
        let stall = options.faults.encoderStall(at: Double(ticks) * tick.seconds)
        if stall > 0 { usleep(useconds_t(stall) * 1000) }
        // No audio waiting (video only, or none appended since the last frame): written as encoded
        // (nothing can be appended meanwhile: appends come one at a time, so the order is the same).
        if (audioLane?.pendingCount ?? 0) == 0 {
            try video.encode(buffer, ticks: ticks, forceKeyframe: forceKeyframe) { (packet) throws(CaptureError) in
                try write(packet, timeBase: video.context.pointee.time_base, stream: stream)
            }
            videoFramesWritten += 1
            return
        }
        // Encoded first (the audio buffers appended since the last frame are encoded meanwhile),
        // then written after their packets, in the order encoding both in place gave.
        var packets: [PacketOwner] = []
        var encodeFailure: CaptureError?
        do {
            try video.encode(buffer, ticks: ticks, forceKeyframe: forceKeyframe) { (packet) throws(CaptureError) in
                let kept = try PacketOwner()
                av_packet_move_ref(kept.packet, packet)
                packets.append(kept)
            }
        } catch {
            encodeFailure = error
        }
        var audioFailure: CaptureError?
        do { try writeEncodedAudio() } catch { audioFailure = error }
        for kept in packets { try write(kept.packet, timeBase: video.context.pointee.time_base, stream: stream) }
        if let failure = audioFailure ?? encodeFailure { throw failure }
        videoFramesWritten += 1
    }

    /// Writes the packets of the audio buffers appended since the last call that wrote (see
    /// `AudioEncodingLane`), then throws what stopped their encoding, if anything did.
    private func writeEncodedAudio() throws(CaptureError) {
        guard let audio, let stream = audioStream, let audioLane, audioLane.pendingCount > 0 else { return }
        let encoded = audioLane.take()
        for kept in encoded.packets { try write(kept.packet, timeBase: audio.context.pointee.time_base, stream: stream) }
        if let failure = encoded.failure { throw failure }
    }

    /// Appends one already-compressed frame (a pass-through track) as it is: its bytes become one
    /// keyframe packet at `ticks` track ticks (`VideoPassthroughSettings.timeBase`) from the file's start. The packet references the
    /// buffer (no copy); the buffer goes back to its pool once libavformat has written it. Throws
    /// `invalidCompressedFrame` (and writes nothing) when the bytes are not one whole JPEG.
    public func appendCompressedVideo(_ buffer: PixelBuffer, frameIndex ticks: Int64) throws(CaptureError) {
        guard let passthrough, let packet = passthroughPacket, let stream = videoStream else {
            throw .invalidState("this movie has no pass-through video track")
        }
        guard !finished else { throw .invalidState("the movie is already finished") }
        guard buffer.format == passthrough.format, buffer.width == passthrough.dimensions.width,
              buffer.height == passthrough.dimensions.height else {
            throw .passthroughUnavailable("a \(buffer.format) \(buffer.width)x\(buffer.height) frame cannot be copied into a \(passthrough.format) \(passthrough.dimensions) track (the camera changed format)")
        }
        let inspection = buffer.withCompressedData { JPEGFrameCheck.inspect($0) }
        if let problem = inspection.problem { throw .invalidCompressedFrame(problem) }
        try writeEncodedAudio()
        let p = packet.packet
        defer { av_packet_unref(p) }
        try PixelBufferPackets.wrap(buffer, length: inspection.length, into: p)
        p.pointee.pts = ticks
        p.pointee.dts = ticks
        p.pointee.duration = TrackTimeBase.ticksPerFrame(passthrough.frameDuration, in: passthrough.tick)
        p.pointee.flags |= AV_PKT_FLAG_KEY
        try write(p, timeBase: FFmpeg.rational(passthrough.tick), stream: stream)
        videoFramesWritten += 1
    }

    /// Appends audio samples that directly follow the previous ones. They are encoded on the audio
    /// lane's queue and written at this writer's next video append or `finish` (audio only: at the
    /// next append), before what that call writes, so an encoding or write failure of theirs is
    /// thrown there. At most `audioBuffersAhead` wait, so a camera that stops sending frames
    /// cannot make them pile up.
    public func appendAudio(_ buffer: AudioPCMBuffer) throws(CaptureError) {
        guard let audio, let stream = audioStream else { throw .invalidState("this movie has no audio track") }
        guard !finished else { throw .invalidState("the movie is already finished") }
        guard let audioLane else {
            try audio.encode(buffer) { (packet) throws(CaptureError) in
                try write(packet, timeBase: audio.context.pointee.time_base, stream: stream)
            }
            audioSamplesWritten += Int64(buffer.frameLength)
            return
        }
        if videoStream == nil || audioLane.pendingCount >= Self.audioBuffersAhead { try writeEncodedAudio() }
        audioLane.encode(buffer)
        audioSamplesWritten += Int64(buffer.frameLength)
    }

    /// Bytes the file holds so far, counting packets the muxer still buffers (a fragment is
    /// written whole), so size limits see data as soon as it is encoded — audio once the writer
    /// takes it from `AudioEncodingLane` (at most `audioBuffersAhead` buffers behind).
    public var bytesWritten: Int64 {
        guard let pb = formatContext?.pointee.pb else { return 0 }
        return max(avio_tell(pb), headerBytes + packetBytes)
    }
    private var headerBytes: Int64 = 0
    private var packetBytes: Int64 = 0
    private var fragmentInterval: Double?
    /// Whether the fragments are ours, not the caller's (an unfragmented MP4/MOV/M4A): cut only at
    /// the encoder's own keyframes and always defragmented at the end.
    private var hiddenFragments = false
    /// The grid of hidden fragments (seconds): a cut at the first keyframe at or past each point.
    static let hiddenFragmentInterval = 2.0
    private var lastFragmentStart: Double?
    private var videoPackets = 0
    private var audioPackets = 0
    /// Fragments flushed to disk so far (hidden ones included; 0 for WAV and unfragmented MKV).
    public private(set) var fragmentsWritten = 0
    /// The next point of the fragment grid (multiples of the interval from the file's start) at
    /// or after which the encoder is made to start a keyframe, and the next at which a fragment is cut.
    private var nextForcedKeyframe: Double?
    private var nextCut: Double?
    /// Why a finished fragmented movie stayed fragmented (it is complete and playable either way).
    public private(set) var defragmentationFailure: CaptureError?
    /// The file written (then its defragmented copy): finishing touches the path only while it names it.
    public private(set) var fileIdentity: FileIdentity?
    /// The encoder's latency in frames: how many frames after a frame went in its packet came out,
    /// at most (x264's look-ahead, B-frames and frame threads). A fragment can be cut only once its
    /// keyframe has left the encoder, so a crash loses up to this many frames more than the interval.
    public var videoEncoderLatencyFrames: Int { max(0, (video?.maximumFramesHeld ?? 1) - 1) }

    /// Whether a frame at `seconds` from the file's start must be a keyframe: the first frame at or
    /// past each point of the fragment grid, so fragments (cut only before keyframes) come on the
    /// requested cadence whatever the encoder's own keyframe interval (`ffmpeg -force_key_frames`).
    private func keyframeDue(at seconds: Double) -> Bool {
        guard let interval = fragmentInterval, !hiddenFragments else { return false }
        guard let due = nextForcedKeyframe else {
            nextForcedKeyframe = Self.gridPoint(after: seconds, interval: interval)
            return false  // the first frame is a keyframe anyway
        }
        guard seconds >= due - 1e-6 else { return false }
        nextForcedKeyframe = Self.gridPoint(after: seconds, interval: interval)
        return true
    }

    /// The first multiple of `interval` strictly after `seconds` (with a microsecond of slack).
    private static func gridPoint(after seconds: Double, interval: Double) -> Double {
        ((seconds + 1e-6) / interval).rounded(.down) * interval + interval
    }

    /// Flushes the encoders and writes the trailer; the file is complete and playable afterwards.
    public func finish() throws(CaptureError) {
        guard !finished, let fc = formatContext else { return }
        finished = true
        if let writeFailure { throw keepCompleteFragments(after: writeFailure) }
        var failure: CaptureError?
        do { try writeEncodedAudio() } catch { failure = error }
        do {
            if let video, let stream = videoStream {
                try video.finish { (packet) throws(CaptureError) in
                    try write(packet, timeBase: video.context.pointee.time_base, stream: stream)
                }
            }
            // The last frame keeps its nominal duration.
            if isHoldingVideo, let stream = videoStream {
                isHoldingVideo = false
                try writeNow(heldVideo.packet, timeBase: heldVideoTimeBase, stream: stream)
            }
            if let audio, let stream = audioStream {
                try audio.finish { (packet) throws(CaptureError) in
                    try write(packet, timeBase: audio.context.pointee.time_base, stream: stream)
                }
            }
        } catch {
            failure = failure ?? error
        }
        // Always write the trailer: a file with a trailer is playable even if a flush failed.
        let trailer = av_write_trailer(fc)
        video?.releaseCodec()
        // An I/O failure is in pb->error (av_write_trailer returns it too), or only the device knows
        // it (syncToDevice); another failure stays codecFailure.
        avio_flush(fc.pointee.pb)
        if writeFailure == nil, ioError(0) == nil { try? syncToDevice() }
        if let ioFailure = writeFailure ?? ioError(0) { throw keepCompleteFragments(after: ioFailure) }
        close(deleteFile: false)
        if let failure { throw failure }
        try FFmpeg.check(trailer, "writing the \(fileType.rawValue) trailer")
        CaptureLogging.logger(.media).info("finished \(fileType.rawValue) file", metadata: ["path": "\(path)"])
        if fragmentInterval != nil, fileType != .mkv, options.defragmentsOnFinish || hiddenFragments {
            do {
                fileIdentity = try MovieDefragmenter.defragment(path: path, fileType: fileType, audioSampleCount: audio?.encodedSampleCount,
                                                                recording: fileIdentity) ?? fileIdentity
            } catch {
                defragmentationFailure = error
            }
        }
    }

    /// Writes audio packets at once; holds each video packet until the next (see `heldVideo`).
    /// Takes the packet's data (it is left blank).
    private func write(_ packet: UnsafeMutablePointer<AVPacket>, timeBase: AVRational,
                       stream: UnsafeMutablePointer<AVStream>) throws(CaptureError) {
        guard formatContext != nil else { return }
        // Matroska: FFmpeg 5.1's muxer states an encoder delay (CodecDelay) for Opus only, and would
        // shift every track by the AAC priming to avoid its negative timestamps, moving the first
        // video frame to 21 ms. Leaving the priming packet out keeps both tracks at 0 and every sample
        // at its own time; the first 21 ms of audio then decode without the encoder's pre-roll.
        if fileType == .mkv, stream == audioStream, packet.pointee.pts != FFmpeg.noPTS, packet.pointee.pts < 0 {
            av_packet_unref(packet)
            return
        }
        // Counted on arrival, so size limits see a held frame too.
        packetBytes += Int64(packet.pointee.size)
        guard stream == videoStream else { return try writeNow(packet, timeBase: timeBase, stream: stream) }
        if isHoldingVideo {
            let held = heldVideo.packet
            let gap = packet.pointee.dts - held.pointee.dts
            if packet.pointee.dts != FFmpeg.noPTS, held.pointee.dts != FFmpeg.noPTS, gap > 0 { held.pointee.duration = gap }
            isHoldingVideo = false
            try writeNow(held, timeBase: heldVideoTimeBase, stream: stream)
        }
        av_packet_move_ref(heldVideo.packet, packet)
        heldVideoTimeBase = timeBase
        isHoldingVideo = true
    }

    private func writeNow(_ packet: UnsafeMutablePointer<AVPacket>, timeBase: AVRational,
                          stream: UnsafeMutablePointer<AVStream>) throws(CaptureError) {
        guard let fc = formatContext else { return }
        defer { av_packet_unref(packet) }
        if let writeFailure { throw writeFailure }
        packet.pointee.stream_index = stream.pointee.index
        // Fragments start at video keyframes; without video, at any audio packet (every AAC
        // packet is a sync sample).
        if stream == videoStream || videoStream == nil, lastFragmentStart != nil {
            let seconds = Double(packet.pointee.pts) * Double(timeBase.num) / Double(timeBase.den)
            try cutFragmentIfDue(before: seconds, isKeyframe: stream != videoStream || packet.pointee.flags & AV_PKT_FLAG_KEY != 0)
        }
        if stream == videoStream { videoPackets += 1 } else { audioPackets += 1 }
        let end = Double(packet.pointee.pts + max(0, packet.pointee.duration)) * Double(timeBase.num) / Double(timeBase.den)
        if stream == videoStream { videoEnd = max(videoEnd, end) } else { audioEnd = max(audioEnd, end) }
        defer {
            // The first fragment is cut as soon as every track has a packet, so the moov is on disk early.
            if fragmentInterval != nil, lastFragmentStart == nil, videoStream == nil || videoPackets > 0,
               audioStream == nil || audioPackets > 0 {
                try? cutFragment(at: 0)
            }
        }
        // The muxer may have changed the stream's time base in write_header: rescale to it.
        av_packet_rescale_ts(packet, timeBase, stream.pointee.time_base)
        // An injected slow disk: every packet write stalls.
        let stall = options.faults.diskStall(at: max(videoEnd, audioEnd))
        if stall > 0 { usleep(useconds_t(stall) * 1000) }
        let pts = packet.pointee.pts, base = stream.pointee.time_base, isVideo = stream == videoStream
        try checkWrite(av_interleaved_write_frame(fc, packet), "writing a packet to \(path)")
        if isVideo, let videoPacketWritten, pts != FFmpeg.noPTS { videoPacketWritten(Double(pts) * Double(base.num) / Double(base.den)) }
    }

    /// Cuts a fragment before the first video keyframe (audio packet, in a file without video) at
    /// or past the next point of the fragment grid (the same grid `keyframeDue` forces keyframes on).
    private func cutFragmentIfDue(before seconds: Double, isKeyframe: Bool) throws(CaptureError) {
        guard let interval = fragmentInterval, lastFragmentStart != nil, isKeyframe else { return }
        let due = nextCut ?? interval
        guard seconds >= due - 1e-6 else { return }
        try cutFragment(at: seconds)
        nextCut = Self.gridPoint(after: seconds, interval: interval)
    }

    private func cutFragment(at seconds: Double) throws(CaptureError) {
        guard let fc = formatContext else { return }
        if let writeFailure { throw writeFailure }
        // Drain the interleaving queue, then a NULL packet makes the muxer write the fragment it holds (frag_custom).
        try checkWrite(av_interleaved_write_frame(fc, nil), "flushing interleaved packets")
        let moovPending = fragmentsWritten == 0 && fileType != .mkv
        try checkWrite(av_write_frame(fc, nil), "writing a fragment to \(path)")
        // With delay_moov the first flush writes only the moov; flush again for the samples.
        if moovPending { try checkWrite(av_write_frame(fc, nil), "writing the first fragment to \(path)") }
        avio_flush(fc.pointee.pb)
        // The OS has taken every byte up to here (a failed write sets pb->error), and the device
        // has them (syncToDevice): this fragment is whole.
        try checkWrite(0, "flushing a fragment to \(path)")
        try syncToDevice()
        fragmentsWritten += 1
        lastFragmentStart = seconds
        completePart = CompletePart(bytes: avio_tell(fc.pointee.pb), seconds: audioStream != nil && videoStream == nil ? audioEnd : videoEnd,
                                    videoFrames: videoPackets, fragments: fragmentsWritten)
    }

    // MARK: Write errors

    /// What the file holds in complete fragments: the bytes up to the end of the last fragment the
    /// OS took whole, the media in them, and how many fragments. All zero until the first fragment
    /// is on disk (and always, for WAV and unfragmented MKV).
    public struct CompletePart: Sendable, Equatable {
        public var bytes: Int64 = 0
        public var seconds: Double = 0
        public var videoFrames = 0
        public var fragments = 0
    }

    /// See `CompletePart`; after a write failure, what the file was cut back to.
    public private(set) var completePart = CompletePart()
    /// The first write the OS refused (`diskFull`/`writeFailed`); nothing more is written after it.
    public private(set) var writeFailure: CaptureError?
    /// End (seconds) of the media handed to the muxer, per track.
    private var videoEnd = 0.0
    private var audioEnd = 0.0

    /// libavformat keeps a failed write in `pb->error` and carries on, so a full disk goes unseen
    /// unless it is looked at: checks it after every call that writes, then the call's own result.
    /// An I/O error becomes `diskFull`/`writeFailed` (remembered: the writer writes nothing more).
    private func checkWrite(_ code: Int32, _ operation: @autoclosure () -> String) throws(CaptureError) {
        if let writeFailure { throw writeFailure }
        // An injected full disk: past its byte limit the file's writes fail as a full disk's do
        // (the AVIOContext's error, ENOSPC), so everything below treats it as the real thing.
        if let limit = options.faults.byteLimit(at: max(videoEnd, audioEnd)), let pb = formatContext?.pointee.pb,
           pb.pointee.error == 0, avio_tell(pb) > limit {
            pb.pointee.error = -ENOSPC
        }
        // Without an AVIOContext (opening failed) the call's own result is open(2)'s errno.
        if let failure = ioError(formatContext?.pointee.pb == nil ? code : 0) {
            writeFailure = failure
            throw failure
        }
        try FFmpeg.check(code, operation())
    }

    /// The typed error for the AVIOContext's error, else for `code` taken as an I/O result
    /// (`AVERROR(errno)`), promising what will be kept; nil if neither is one.
    private func ioError(_ code: Int32) -> CaptureError? {
        let pbError = formatContext?.pointee.pb?.pointee.error ?? 0
        let value = pbError < 0 ? pbError : code
        guard value < 0, -value < 4096 else { return nil }
        return .writeError(path: path, errno: -value, bytesKept: completePart.bytes, secondsKept: completePart.seconds)
    }

    /// After a refused write: closes the file and cuts it back to the end of its last complete
    /// fragment (no trailer fits on a full disk, and a cut fragment would stop players with an
    /// error), so it plays to that fragment's last frame. An unfragmented MP4/MOV/M4A was written in
    /// hidden fragments, so the same holds for it; an MKV without clusters cut by us is left as it
    /// is (its clusters play to the cut). Returns the error with what was kept.
    private func keepCompleteFragments(after failure: CaptureError) -> CaptureError {
        writeFailure = failure
        // Closing flushes what avio still buffers; on a full disk those writes fail too, harmlessly.
        close(deleteFile: false)
        let code: Int32
        switch failure {
        case .writeFailed(_, let e, _, _): code = e
        default: code = ENOSPC
        }
        if fileType == .wav, let kept = WAVRepair.keepWholeSamples(path: path) {
            // PCM needs no index: every whole sample frame on disk plays once the sizes are right.
            completePart = CompletePart(bytes: kept.bytes, seconds: kept.seconds, videoFrames: 0, fragments: 0)
            let failureWithKept = CaptureError.writeError(path: path, errno: code, bytesKept: kept.bytes, secondsKept: kept.seconds)
            writeFailure = failureWithKept
            return failureWithKept
        }
        if fragmentInterval != nil {
            if completePart.fragments > 0 {
                // A read-only or failing disk may refuse this too: then the partial fragment stays.
                _ = truncate(path, off_t(completePart.bytes))
            } else {
                // Not one fragment reached the disk whole: nothing in the file would play.
                unlink(path)
            }
        }
        var info = stat()
        let size = stat(path, &info) == 0 ? Int64(info.st_size) : 0
        if fragmentInterval == nil || completePart.fragments == 0 { completePart = CompletePart() }
        completePart.bytes = size
        let failureWithKept = CaptureError.writeError(path: path, errno: code, bytesKept: size, secondsKept: completePart.seconds)
        writeFailure = failureWithKept
        return failureWithKept
    }

    /// Asks the OS whether everything written so far is on the device, and fails the writer if not.
    /// write(2) only hands data to the page cache: a device that fails its I/O (EIO) is reported
    /// by `fdatasync` alone, and a filesystem forced read-only (an emergency remount, or ext4's
    /// errors=remount-ro) may drop delayed-allocation data without any call failing — its
    /// read-only flag is the only sign, so that counts as EROFS. Called once per fragment and at
    /// the end, so what `completePart` promises has reached the device.
    private func syncToDevice() throws(CaptureError) {
        guard syncDescriptor >= 0 else { return }
        var code: Int32 = 0
        if fdatasync(syncDescriptor) != 0, errno != EINVAL { code = errno }
        var info = statvfs()
        if code == 0, fstatvfs(syncDescriptor, &info) == 0, info.f_flag & UInt(ST_RDONLY) != 0 { code = EROFS }
        guard code != 0 else { return }
        let failure = CaptureError.writeError(path: path, errno: code, bytesKept: completePart.bytes, secondsKept: completePart.seconds)
        writeFailure = failure
        throw failure
    }

    private var claimedFile = false
    /// The descriptor `OutputPath.claimKeepingOpen` created the file with, kept for `syncToDevice`.
    private var syncDescriptor: Int32 = -1

    private func close(deleteFile: Bool) {
        if syncDescriptor >= 0 {
            _ = Glibc.close(syncDescriptor)
            syncDescriptor = -1
        }
        guard let fc = formatContext else { return }
        if fc.pointee.pb != nil { avio_closep(&fc.pointee.pb) }
        avformat_free_context(fc)
        formatContext = nil
        // Only a file this writer created: a failed claim means someone else's file is there.
        if deleteFile, claimedFile { OutputPath.removeRegularFile(path) }
    }
}

/// Makes a WAV file cut short by a failed write playable: keeps only whole sample frames and writes
/// the RIFF and data sizes libavformat would have written at the end (an 8-byte overwrite in place,
/// which needs no new space).
enum WAVRepair {
    static func keepWholeSamples(path: String) -> (bytes: Int64, seconds: Double)? {
        let fd = open(path, O_RDWR)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let size = Int64(info.st_size)
        var header = [UInt8](repeating: 0, count: 4096)
        let count = pread(fd, &header, header.count, 0)
        guard count >= 44 else { return nil }
        func u32(_ at: Int) -> UInt32 {
            UInt32(header[at]) | UInt32(header[at + 1]) << 8 | UInt32(header[at + 2]) << 16 | UInt32(header[at + 3]) << 24
        }
        func tag(_ at: Int) -> String { String(decoding: header[at..<at + 4], as: UTF8.self) }
        guard tag(0) == "RIFF", tag(8) == "WAVE" else { return nil }
        var offset = 12
        var byteRate: UInt32 = 0
        var blockAlign = 0
        while offset + 8 <= count {
            let id = tag(offset)
            let length = Int(u32(offset + 4))
            if id == "fmt ", offset + 8 + 16 <= count {
                byteRate = u32(offset + 8 + 8)
                blockAlign = Int(header[offset + 8 + 12]) | Int(header[offset + 8 + 13]) << 8
            }
            if id == "data" {
                guard byteRate > 0, blockAlign > 0 else { return nil }
                let dataStart = Int64(offset + 8)
                let dataBytes = max(0, size - dataStart) / Int64(blockAlign) * Int64(blockAlign)
                let end = dataStart + dataBytes
                if end < size { guard ftruncate(fd, off_t(end)) == 0 else { return nil } }
                func put(_ value: UInt32, at position: Int64) -> Bool {
                    var le = value.littleEndian
                    return pwrite(fd, &le, 4, off_t(position)) == 4
                }
                guard put(UInt32(clamping: end - 8), at: 4), put(UInt32(clamping: dataBytes), at: Int64(offset + 4)) else { return nil }
                return (end, Double(dataBytes) / Double(byteRate))
            }
            offset += 8 + length + (length & 1)
        }
        return nil
    }
}

/// Presents a compressed pixel buffer's bytes to libavformat as a packet without copying: the
/// packet's buffer reference retains the PixelBuffer, which returns to its pool when libav* lets go.
enum PixelBufferPackets {
    static func wrap(_ buffer: PixelBuffer, length: Int, into packet: UnsafeMutablePointer<AVPacket>) throws(CaptureError) {
        // A compressed buffer has no planes: its bytes start at the storage (valid while retained).
        guard let start = buffer.withCompressedData({ $0.baseAddress }) else {
            throw .invalidCompressedFrame("the frame holds no bytes")
        }
        let base = UnsafeMutablePointer(mutating: start.assumingMemoryBound(to: UInt8.self))
        let opaque = Unmanaged.passRetained(buffer).toOpaque()
        guard let reference = av_buffer_create(base, buffer.allocationSize, { opaque, _ in
            if let opaque { Unmanaged<PixelBuffer>.fromOpaque(opaque).release() }
        }, opaque, Int32(AV_BUFFER_FLAG_READONLY)) else {
            Unmanaged<PixelBuffer>.fromOpaque(opaque).release()
            throw .codecFailure(operation: "av_buffer_create", code: -12, message: "out of memory")
        }
        packet.pointee.buf = reference
        packet.pointee.data = base
        packet.pointee.size = Int32(length)
    }
}
