import CaptureKit
import Foundation
import Testing

/// Frames above 1920x1080 are encoded with x264's sliced threads (a frame in flight per thread
/// cost about 23 MB at 4K); smaller frames keep frame threads, so their output does not move.
/// The choice is read back from the file: x264 writes its options into the stream (an SEI).
@Suite struct LargeFrameEncodingTests {
    static func encode(_ width: Int, _ height: Int, frames: Int, to path: String) throws -> VideoEncoderSettings {
        let settings = VideoEncoderSettings(dimensions: Dimensions(width: width, height: height), inputPixelFormat: .nv12,
                                            frameDuration: MediaTime(value: 1, timescale: 30), preset: .ultrafast)
        let writer = try MovieWriter(path: path, fileType: .mp4, video: settings, audio: nil)
        for n in 0..<frames {
            let buffer = PixelBuffer(format: .nv12, width: width, height: height)
            // A moving gradient, so every frame is coded.
            let rowBytes = buffer.bytesPerRow[0]
            try buffer.withMutablePlane(0) { bytes in
                for y in 0..<height { for x in 0..<width { bytes[y * rowBytes + x] = UInt8(truncatingIfNeeded: x + y + 8 * n) } }
            }
            try buffer.withMutablePlane(1) { bytes in
                for i in 0..<bytes.count { bytes[i] = 128 }
            }
            try writer.appendVideo(buffer, frameIndex: Int64(n))
        }
        try writer.finish()
        return settings
    }

    static func x264Options(_ path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let text = String(decoding: data.prefix(1 << 20), as: UTF8.self)
        guard let range = text.range(of: "options: ") else { return "" }
        return String(text[range.upperBound...].prefix(while: { $0 != "\u{0}" && $0 != "\u{80}" }))
    }

    @Test func framesAbove1080pUseSlicedThreadsAndStillDecodeWhole() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let large = try Self.encode(3840, 2160, frames: 4, to: dir + "/4k.mp4")
        let full = try Self.encode(1920, 1080, frames: 4, to: dir + "/1080.mp4")
        #expect(large.slicedThreads && !full.slicedThreads)
        let largeOptions = try Self.x264Options(dir + "/4k.mp4"), fullOptions = try Self.x264Options(dir + "/1080.mp4")
        #expect(largeOptions.contains("sliced_threads=1") && largeOptions.contains("threads=2"), "\(largeOptions)")
        #expect(fullOptions.contains("sliced_threads=0") && fullOptions.contains("threads=2"), "\(fullOptions)")
        for (path, width) in [(dir + "/4k.mp4", 3840), (dir + "/1080.mp4", 1920)] {
            var widths: [Int] = []
            try MediaFileReader(path: path).decode(video: { widths.append($0.width) }, audio: nil)
            #expect(widths == [width, width, width, width], "\(path)")
        }
    }
}
