import CFFmpeg
import CaptureCore

/// What the packets of one stream say without decoding: counts, sizes and keyframe positions.
public struct StreamPacketSummary: Sendable, Codable, Equatable {
    public var index: Int
    public var packetCount: Int
    public var byteCount: Int64
    /// Packet numbers (0-based, in file order) that are keyframes.
    public var keyframePositions: [Int]

    /// The largest distance in packets between keyframes (to the end for the last one).
    public var maximumKeyframeInterval: Int? {
        guard !keyframePositions.isEmpty else { return nil }
        return zip(keyframePositions, keyframePositions.dropFirst() + [packetCount]).map { $1 - $0 }.max()
    }
}

extension MediaFileReader {
    /// Reads every packet once (no decoding). Leaves the reader at the end of the file: use a
    /// fresh reader to decode afterwards. `stopAtReadError`: a damaged file's packets up to the
    /// first one the demuxer cannot read, instead of an error.
    public func scanPackets(stopAtReadError: Bool = false) throws(CaptureError) -> [StreamPacketSummary] {
        guard let fc = formatContext else { return [] }
        var summaries = streams.map { StreamPacketSummary(index: Int($0.pointee.index), packetCount: 0, byteCount: 0, keyframePositions: []) }
        let packet = try PacketOwner()
        while true {
            let r = av_read_frame(fc, packet.packet)
            if r == FFmpeg.eof || (r < 0 && stopAtReadError) { break }
            try FFmpeg.check(r, "reading \(path)")
            let i = Int(packet.packet.pointee.stream_index)
            if summaries.indices.contains(i) {
                if packet.packet.pointee.flags & AV_PKT_FLAG_KEY != 0 { summaries[i].keyframePositions.append(summaries[i].packetCount) }
                summaries[i].packetCount += 1
                summaries[i].byteCount += Int64(packet.packet.pointee.size)
            }
            av_packet_unref(packet.packet)
        }
        return summaries
    }
}
