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
    /// Rewrites `path` in place (through a hidden temporary file in the same folder). On any failure
    /// the original stays as it was (it is complete and playable) and the error says why.
    /// `audioSampleCount`: the samples the audio encoder was given; fragments round the last audio
    /// packet up to a whole codec frame, and this trims it back to the real end.
    public static func defragment(path: String, fileType: MediaFileType, audioSampleCount: Int64? = nil) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).defragmenting").path
        try? FileManager.default.removeItem(atPath: temporary)
        do {
            try copyPackets(from: path, to: temporary, fileType: fileType, audioSampleCount: audioSampleCount)
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        // rename(2) replaces the original atomically: a crash leaves either file whole.
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: temporary)
            throw .fileOperationFailed(path: path, reason: "replacing the fragmented movie with its defragmented copy: \(reason)")
        }
    }

    private static func copyPackets(from source: String, to destination: String, fileType: MediaFileType,
                                    audioSampleCount: Int64?) throws(CaptureError) {
        var input: UnsafeMutablePointer<AVFormatContext>? = nil
        try FFmpeg.check(FFmpeg.openLocalInput(&input, source), "opening \(source) to defragment it")
        defer { avformat_close_input(&input) }
        guard let inContext = input else { return }
        // As `ffmpeg -c copy` does: without it the last packet of each track comes back without its duration.
        try FFmpeg.check(FFmpeg.findStreamInfo(inContext), "reading the stream parameters of \(source)")

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

        try OutputPath.claim(destination)
        try FFmpeg.check(avio_open(&outContext.pointee.pb, destination, AVIO_FLAG_WRITE), "opening \(destination) for writing")
        // faststart: the index goes before the media (movenc moves it there in the trailer), so a
        // copy cut short — a partial download, `head -c` — still has its index and plays to the cut.
        let options = OptionsDictionary(fileType == .wav ? [] : [("movflags", "+faststart")])
        try FFmpeg.check(avformat_write_header(outContext, &options.pointer), "writing the defragmented \(fileType.rawValue) header")
        try FFmpeg.rejectLeftovers(options.pointer, "the \(fileType.rawValue) muxer")

        guard let packet = av_packet_alloc() else {
            throw .codecFailure(operation: "av_packet_alloc", code: -12, message: "out of memory")
        }
        var packetPointer: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&packetPointer) }
        while true {
            let read = av_read_frame(inContext, packet)
            if read == FFmpeg.eof { break }
            try FFmpeg.check(read, "reading a packet of \(source)")
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
            try FFmpeg.check(written, "writing a packet to \(destination)")
        }
        try FFmpeg.check(av_write_trailer(outContext), "writing the defragmented \(fileType.rawValue) trailer")
        avio_flush(outContext.pointee.pb)
        if let pb = outContext.pointee.pb, pb.pointee.error < 0 {
            try FFmpeg.check(pb.pointee.error, "writing \(destination)")
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
