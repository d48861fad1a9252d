import CFFmpeg
import CaptureCore
import Foundation
import Logging

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
