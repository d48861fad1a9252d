import CCaptureShims
import CFFmpeg
import CaptureCore
import Foundation

/// Turns a finished fragmented MP4/MOV into a regular movie — one `moov` indexing every sample,
/// placed before the media (`+faststart`) — by copying its packets through libavformat
/// (`ffmpeg -c copy -movflags +faststart`), then renaming the copy over the original. AVFoundation does the same when a fragmented recording ends ("defragmented").
///
/// Why: in a fragmented file the AAC priming (1024 samples) can only be stated by an edit list that
/// FFmpeg 5.1's demuxer does not apply to fragments, so every FFmpeg-based reader sees the audio
/// start at −21.3 ms (ffmpeg's own fragmented files behave the same) and re-encoding duplicates a
/// video frame. In a regular movie the same edit list hides the priming for every reader.
/// Packets keep their exact timestamps and durations; only the index changes.
public enum MovieDefragmenter {
    /// Rewrites `path` in place (through a hidden temporary file in the same folder, created
    /// exclusively) and returns the identity of the movie now at `path`. On any failure the original
    /// stays as it was (it is complete and playable) and the error says why.
    ///
    /// `recording`: the file the writer created. The movie is read through a descriptor checked to
    /// be that file, and the final step swaps the copy in only while `path` still names it
    /// (`renameat2(RENAME_EXCHANGE)`, checked after the swap and undone if something else was put
    /// there meanwhile), so a file put at the path by someone else is never read, rewritten or removed.
    /// `audioSampleCount`: the samples the audio encoder was given; fragments round the last audio
    /// packet up to a whole codec frame, and this trims it back to the real end.
    @discardableResult
    public static func defragment(path: String, fileType: MediaFileType, audioSampleCount: Int64? = nil,
                                  recording: FileIdentity? = nil) throws(CaptureError) -> FileIdentity? {
        _ = FFmpeg.quietLogs
        // The recording, by descriptor: whatever is at the path must be the file we wrote.
        let source = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard source >= 0 else {
            throw .fileOperationFailed(path: path, reason: "not defragmented: cannot open the recording again (\(String(cString: strerror(errno))))")
        }
        defer { close(source) }
        guard let identity = FileIdentity(descriptor: source), recording == nil || identity == recording else {
            throw replaced(path)
        }
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        // Never removes anything already there: a leftover of another run keeps its name, and this
        // copy takes the first free one.
        var temporary = ""
        var claimed: FileIdentity?
        for attempt in 0..<100 where claimed == nil {
            temporary = (folder as NSString).appendingPathComponent(".\(url.lastPathComponent).defragmenting" + (attempt == 0 ? "" : "-\(getpid())-\(attempt)"))
            do {
                let fd = try OutputPath.claimKeepingOpen(temporary)
                claimed = FileIdentity(descriptor: fd)
                close(fd)
            } catch .outputFileExists {
                continue
            }
        }
        guard let copy = claimed else {
            throw .fileOperationFailed(path: path, reason: "not defragmented: no free name for the temporary copy beside it")
        }
        do {
            try copyPackets(from: "/proc/self/fd/\(source)", named: path, to: temporary, fileType: fileType, audioSampleCount: audioSampleCount)
            try swapIn(copy: temporary, copyIdentity: copy, over: path, recording: identity)
        } catch {
            copy.unlink(temporary)
            if case .diskFull = error {
                let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? 0
                throw .fileOperationFailed(path: path, reason: "not defragmented: the disk has no room for the defragmented copy (it needs about \(size) bytes free, as much as the recording); the recording keeps its fragments and plays")
            }
            if case .writeFailed(_, let code, _, _) = error {
                throw .fileOperationFailed(path: path, reason: "not defragmented: writing the defragmented copy failed (\(String(cString: strerror(code)))); the recording keeps its fragments and plays")
            }
            throw error
        }
        return copy
    }

    /// The error for a path that no longer names the recording.
    public static func replaced(_ path: String) -> CaptureError {
        .fileOperationFailed(path: path, reason: "not defragmented: the file at the path is no longer this recording (it was replaced or moved while recording); it was left untouched")
    }

    /// Puts the finished copy at `path` only while `path` names `recording`; the recording's old
    /// (fragmented) file is removed afterwards.
    private static func swapIn(copy temporary: String, copyIdentity: FileIdentity, over path: String,
                               recording: FileIdentity) throws(CaptureError) {
        guard FileIdentity(path: temporary) == copyIdentity else {
            throw .fileOperationFailed(path: path, reason: "not defragmented: the temporary copy \(temporary) was replaced while it was written")
        }
        if ck_rename_exchange(temporary, path) == 0 {
            // `temporary` now names what was at `path`: the recording, or someone else's file.
            guard FileIdentity(path: temporary) == recording else {
                _ = ck_rename_exchange(temporary, path)  // give the path back to that file
                throw replaced(path)
            }
            recording.unlink(temporary)
            return
        }
        let code = errno
        guard code == EINVAL || code == ENOSYS || code == EOPNOTSUPP else {
            throw .fileOperationFailed(path: path, reason: "not defragmented: replacing the fragmented movie with its copy failed: \(String(cString: strerror(code)))")
        }
        // A filesystem that cannot exchange names: check, then rename(2) (atomic: a crash leaves
        // either file whole).
        guard FileIdentity(path: path) == recording else { throw replaced(path) }
        guard rename(temporary, path) == 0 else {
            throw .fileOperationFailed(path: path, reason: "not defragmented: replacing the fragmented movie with its copy failed: \(String(cString: strerror(errno)))")
        }
    }

    /// `source` is read (the descriptor's `/proc/self/fd` link), `name` is how messages call it.
    private static func copyPackets(from source: String, named name: String, to destination: String, fileType: MediaFileType,
                                    audioSampleCount: Int64?) throws(CaptureError) {
        var input: UnsafeMutablePointer<AVFormatContext>? = nil
        try FFmpeg.check(FFmpeg.openLocalInput(&input, source), "opening \(name) to defragment it")
        defer { avformat_close_input(&input) }
        guard let inContext = input else { return }
        // As `ffmpeg -c copy` does: without it the last packet of each track comes back without its duration.
        try FFmpeg.check(FFmpeg.findStreamInfo(inContext), "reading the stream parameters of \(name)")

        var output: UnsafeMutablePointer<AVFormatContext>? = nil
        try FFmpeg.check(avformat_alloc_output_context2(&output, nil, fileType.muxerName, destination),
                         "creating a \(fileType.rawValue) muxer")
        guard let outContext = output else { return }
        defer {
            if outContext.pointee.pb != nil { avio_closep(&outContext.pointee.pb) }
            avformat_free_context(outContext)
        }
        outContext.pointee.flags |= AVFMT_FLAG_BITEXACT

        for index in 0..<Int(inContext.pointee.nb_streams) {
            guard let inStream = inContext.pointee.streams[index],
                  let outStream = avformat_new_stream(outContext, nil) else {
                throw .codecFailure(operation: "avformat_new_stream", code: -12, message: "out of memory")
            }
            try FFmpeg.check(avcodec_parameters_copy(outStream.pointee.codecpar, inStream.pointee.codecpar),
                             "copying stream parameters")
            outStream.pointee.codecpar.pointee.codec_tag = 0  // the muxer's own tag for the codec
            outStream.pointee.time_base = inStream.pointee.time_base
            outStream.pointee.avg_frame_rate = inStream.pointee.avg_frame_rate
            outStream.pointee.r_frame_rate = inStream.pointee.r_frame_rate
            outStream.pointee.disposition = inStream.pointee.disposition
            try copySideData(from: inStream, to: outStream)
        }

        try FFmpeg.checkWrite(avio_open(&outContext.pointee.pb, destination, AVIO_FLAG_WRITE), outContext, path: destination, "opening \(destination) for writing")
        // faststart: the index goes before the media (movenc moves it there in the trailer), so a
        // copy cut short — a partial download, `head -c` — still has its index and plays to the cut.
        let options = OptionsDictionary(fileType == .wav ? [] : [("movflags", "+faststart")])
        try FFmpeg.checkWrite(avformat_write_header(outContext, &options.pointer), outContext, path: destination, "writing the defragmented \(fileType.rawValue) header")
        try FFmpeg.rejectLeftovers(options.pointer, "the \(fileType.rawValue) muxer")

        guard let packet = av_packet_alloc() else {
            throw .codecFailure(operation: "av_packet_alloc", code: -12, message: "out of memory")
        }
        var packetPointer: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&packetPointer) }
        while true {
            let read = av_read_frame(inContext, packet)
            if read == FFmpeg.eof { break }
            try FFmpeg.check(read, "reading a packet of \(name)")
            let index = Int(packet.pointee.stream_index)
            guard index < Int(outContext.pointee.nb_streams), let inStream = inContext.pointee.streams[index],
                  let outStream = outContext.pointee.streams[index] else {
                av_packet_unref(packet)
                continue
            }
            if let audioSampleCount, inStream.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO,
               inStream.pointee.time_base.num == 1, inStream.pointee.time_base.den == inStream.pointee.codecpar.pointee.sample_rate,
               packet.pointee.pts != FFmpeg.noPTS, packet.pointee.pts + packet.pointee.duration > audioSampleCount {
                packet.pointee.duration = max(0, audioSampleCount - packet.pointee.pts)
            }
            av_packet_rescale_ts(packet, inStream.pointee.time_base, outStream.pointee.time_base)
            packet.pointee.pos = -1
            let written = av_interleaved_write_frame(outContext, packet)
            av_packet_unref(packet)
            try FFmpeg.checkWrite(written, outContext, path: destination, "writing a packet to \(destination)")
        }
        try FFmpeg.checkWrite(av_write_trailer(outContext), outContext, path: destination, "writing the defragmented \(fileType.rawValue) trailer")
        avio_flush(outContext.pointee.pb)
        if let pb = outContext.pointee.pb, pb.pointee.error < 0 {
            try FFmpeg.checkWrite(pb.pointee.error, outContext, path: destination, "writing \(destination)")
        }
    }

    /// Stream side data (the display matrix that carries rotation and mirroring).
    private static func copySideData(from inStream: UnsafeMutablePointer<AVStream>,
                                     to outStream: UnsafeMutablePointer<AVStream>) throws(CaptureError) {
        guard let sideData = inStream.pointee.side_data else { return }
        for i in 0..<Int(inStream.pointee.nb_side_data) {
            let item = sideData[i]
            guard let copy = av_stream_new_side_data(outStream, item.type, item.size) else {
                throw .codecFailure(operation: "av_stream_new_side_data", code: -12, message: "out of memory")
            }
            copy.update(from: item.data, count: item.size)
        }
    }
}
