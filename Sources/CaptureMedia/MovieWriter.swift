import CFFmpeg
import CaptureCore
import Foundation
import Logging

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
    var formatContext: UnsafeMutablePointer<AVFormatContext>?
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
    var videoStream: UnsafeMutablePointer<AVStream>?
    var audioStream: UnsafeMutablePointer<AVStream>?
    private var finished = false
    public private(set) var videoFramesWritten = 0
    public private(set) var audioSamplesWritten: Int64 = 0
    /// Called on the writing thread after each video packet is handed to the muxer
    /// (`av_interleaved_write_frame` returned), with its PTS in seconds of file time: what a latency
    /// measurement from capture to file needs (capture-bench's latency (b)).
    public var videoPacketWritten: ((_ fileSeconds: Double) -> Void)?

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
        // Through the claimed descriptor, never by name again: a link put at the path meanwhile is not followed.
        try checkWrite(avio_open(&fc.pointee.pb, OutputPath.openPath(syncDescriptor), AVIO_FLAG_WRITE), "opening \(path) for writing")
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
    var fragmentInterval: Double?
    /// Whether the fragments are ours, not the caller's (an unfragmented MP4/MOV/M4A): cut only at
    /// the encoder's own keyframes and always defragmented at the end.
    private var hiddenFragments = false
    /// The grid of hidden fragments (seconds): a cut at the first keyframe at or past each point.
    static let hiddenFragmentInterval = 2.0
    var lastFragmentStart: Double?
    var videoPackets = 0
    private var audioPackets = 0
    /// Fragments flushed to disk so far (hidden ones included; 0 for WAV and unfragmented MKV).
    public internal(set) var fragmentsWritten = 0
    /// The next point of the fragment grid (multiples of the interval from the file's start) at
    /// or after which the encoder is made to start a keyframe, and the next at which a fragment is cut.
    private var nextForcedKeyframe: Double?
    var nextCut: Double?
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
    static func gridPoint(after seconds: Double, interval: Double) -> Double {
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

    // MARK: Write errors

    /// See `CompletePart`; after a write failure, what the file was cut back to.
    public internal(set) var completePart = CompletePart()
    /// The first write the OS refused (`diskFull`/`writeFailed`); nothing more is written after it.
    public internal(set) var writeFailure: CaptureError?
    /// End (seconds) of the media handed to the muxer, per track.
    var videoEnd = 0.0
    var audioEnd = 0.0

    private var claimedFile = false
    /// The descriptor `OutputPath.claimKeepingOpen` created the file with, kept for `syncToDevice`.
    var syncDescriptor: Int32 = -1

    func close(deleteFile: Bool) {
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
