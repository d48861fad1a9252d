import CaptureKit
import Foundation
import Testing

/// Fixture version 2 stores raw video with FFV1: the bytes read back must be exactly the bytes
/// delivered, for every raw format, and damaged FFV1 data must be a typed error.
@Suite(.serialized) struct LosslessFixtureTests {
    /// A fixture of `frames` synthetic frames (a gradient that moves per frame) of one raw format.
    static func writeSynthetic(_ format: PixelFormat, size: Dimensions, frames: Int, version: Int = FixtureFormat.version,
                               to path: String) throws -> [[UInt8]] {
        let description = DeviceDescription(
            uniqueID: "test:camera", localizedName: "Synthetic", modelID: "test", mediaType: .video, position: .unspecified,
            formats: [DeviceFormat(formatDescription: .video(pixelFormat: format, dimensions: size),
                                   frameRateRanges: [FrameRateRange(minRate: 30, maxRate: 30)])])
        let device = FixtureDevice(description: description, activeFormatIndex: 0, frameDuration: MediaTime(value: 1, timescale: 30))
        let writer = try FixtureWriter(path: path, devices: [device], formatVersion: version)
        let pool = PixelBufferPool(format: format, width: size.width, height: size.height)
        var delivered: [[UInt8]] = []
        for n in 0..<frames {
            let buffer = try #require(pool.makeBuffer())
            for (plane, g) in format.planes(width: size.width, height: size.height).enumerated() {
                try buffer.withMutablePlane(plane) { raw in
                    for row in 0..<g.rows {
                        for x in 0..<g.bytesPerRow {
                            raw[row * buffer.bytesPerRow[plane] + x] = UInt8(truncatingIfNeeded: x * 3 + row * 5 + n * 7 + plane * 50 + (x * row) % 11)
                        }
                    }
                }
            }
            let sample = SampleBuffer(payload: .pixels(buffer), formatDescription: .video(pixelFormat: format, dimensions: size),
                                      presentationTime: MediaTime(value: Int64(n), timescale: 30), duration: MediaTime(value: 1, timescale: 30),
                                      sequenceNumber: Int64(n))
            delivered.append(SampleCollector.bytes(of: sample))
            try writer.append(sample, device: 0)
        }
        try writer.finish()
        return delivered
    }

    static func codec(of path: String) throws -> String {
        let r = try TestSupport.run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,pix_fmt",
                                                "-of", "csv=p=0", path])
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(arguments: [(PixelFormat.yuyv, "ffv1,yuv422p"), (.nv12, "ffv1,yuv420p"), (.yuv420, "ffv1,yuv420p"), (.rgb24, "ffv1,bgr0")])
    func everyRawFormatRoundTripsThroughFFV1(format: PixelFormat, stored: String) throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/synthetic.nut"
        let size = Dimensions(width: 96, height: 54)
        let delivered = try Self.writeSynthetic(format, size: size, frames: 4, to: path)
        #expect(try Self.codec(of: path) == stored)
        let contents = try FixtureReader.read(path: path)
        #expect(contents.version == 2)
        #expect(contents.samples[0].map(\.data) == delivered)
    }

    @Test func oddSizesAndVersion1StayRawvideoAndStillRead() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let odd = try Self.writeSynthetic(.rgb24, size: Dimensions(width: 33, height: 17), frames: 3, to: dir + "/odd.nut")
        #expect(try Self.codec(of: dir + "/odd.nut").hasPrefix("rawvideo"))
        #expect(try FixtureReader.read(path: dir + "/odd.nut").samples[0].map(\.data) == odd)
        let v1 = try Self.writeSynthetic(.yuyv, size: Dimensions(width: 64, height: 36), frames: 3, version: 1, to: dir + "/v1.nut")
        #expect(try Self.codec(of: dir + "/v1.nut").hasPrefix("rawvideo"))
        let contents = try FixtureReader.read(path: dir + "/v1.nut")
        #expect(contents.version == 1 && contents.samples[0].map(\.data) == v1)
    }

    @Test func simulatorYUYVCompressesLosslessly() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/webcam.nut"
        let (_, seen) = try await FixtureTestSupport.record(microphone: nil, size: Dimensions(width: 640, height: 480), fps: 30,
                                                           pixelFormat: .yuyv, seconds: 0.2, to: path)
        let contents = try FixtureReader.read(path: path)
        #expect(contents.samples[0].map(\.data) == seen.video.map(\.bytes))
        let raw = contents.samples[0].reduce(0) { $0 + $1.data.count }
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size * 4 < raw, "FFV1 file \(size) bytes for \(raw) raw bytes")
    }

    /// Damaged FFV1 payloads (bytes flipped inside the file) are typed errors, never a crash or a wrong frame.
    @Test func mutatedFFV1FixturesNeverCrash() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/small.nut"
        _ = try Self.writeSynthetic(.yuyv, size: Dimensions(width: 64, height: 36), frames: 3, to: path)
        let good = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let (mutations, outcomes) = try await offPool { try FixtureTests.mutate(good, times: 800, scratch: dir + "/mutant.nut") }
        #expect(outcomes.ok + outcomes.typed == mutations)
        #expect(outcomes.typed > mutations / 2)
    }
}
