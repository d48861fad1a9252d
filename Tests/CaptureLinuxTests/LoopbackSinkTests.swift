import CV4L2
import CaptureCore
import CaptureMedia
import Foundation
import Testing
@testable import CaptureV4L2

/// A fake v4l2loopback node for the sink: QUERYCAP, S_FMT/S_PARM on the output queue (as 0.12.7
/// answers them: packed pitch, planar pitch = width, an unknown fourcc becomes the first format,
/// a running stream keeps its format) and write(), which records every frame.
final class FakeLoopback: V4L2System, @unchecked Sendable {
    enum Mode { case output, outputWithoutReadWrite, capturingWithAnotherWriter, camera }
    struct State {
        var mode: Mode = .output
        var open: Set<Int32> = []
        var lockedFormat: (pixel: UInt32, width: UInt32, height: UInt32)?
        var interval: (UInt32, UInt32)?
        var frames: [[UInt8]] = []
        var streaming = false
        var writeError: Int32?
    }
    let state = Locked(State())

    init(mode: Mode = .output) { state.withLock { $0.mode = mode } }

    func deviceNodes() -> [String] { ["/dev/video10"] }
    func open(_ path: String) -> Int32 {
        guard path == "/dev/video10" else { return -ENOENT }
        return state.withLock { s in s.open.insert(42); return 42 }
    }
    func close(_ fd: Int32) { _ = state.withLock { $0.open.remove(fd) } }
    func map(_ fd: Int32, length: Int, offset: Int) -> UnsafeMutableRawPointer? { nil }
    func unmap(_ address: UnsafeMutableRawPointer, length: Int) {}
    func poll(_ fd: Int32, wakeFD: Int32, timeoutMilliseconds: Int32) -> V4L2PollResult { .timedOut }

    func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        state.withLock { s -> Int32 in
            guard s.open.contains(fd) else { return EBADF }
            switch request {
            case V4L2Request.querycap:
                let cap = arg.assumingMemoryBound(to: v4l2_capability.self)
                cap.pointee = v4l2_capability()
                let driver = s.mode == .camera ? "vivid" : "v4l2 loopback"
                withUnsafeMutableBytes(of: &cap.pointee.driver) { copy(driver, into: $0) }
                withUnsafeMutableBytes(of: &cap.pointee.card) { copy("CaptureKitLoopback", into: $0) }
                let streaming = UInt32(V4L2_CAP_STREAMING)
                let caps: UInt32
                switch s.mode {
                case .output: caps = UInt32(V4L2_CAP_VIDEO_OUTPUT) | UInt32(V4L2_CAP_READWRITE) | streaming
                case .outputWithoutReadWrite: caps = UInt32(V4L2_CAP_VIDEO_OUTPUT) | streaming
                case .capturingWithAnotherWriter, .camera: caps = UInt32(V4L2_CAP_VIDEO_CAPTURE) | UInt32(V4L2_CAP_READWRITE) | streaming
                }
                cap.pointee.capabilities = caps | UInt32(V4L2_CAP_DEVICE_CAPS)
                cap.pointee.device_caps = caps
                return 0
            case V4L2Request.setFormat:
                let f = arg.assumingMemoryBound(to: v4l2_format.self)
                guard f.pointee.type == V4L2_BUF_TYPE_VIDEO_OUTPUT.rawValue else { return EINVAL }
                if let locked = s.lockedFormat {
                    f.pointee.fmt.pix.pixelformat = locked.pixel
                    f.pointee.fmt.pix.width = locked.width
                    f.pointee.fmt.pix.height = locked.height
                }
                let w = f.pointee.fmt.pix.width, h = f.pointee.fmt.pix.height
                switch PixelFormat(rawValue: f.pointee.fmt.pix.pixelformat) {
                case .yuyv: f.pointee.fmt.pix.bytesperline = w * 2; f.pointee.fmt.pix.sizeimage = w * h * 2
                case .yuv420, .nv12: f.pointee.fmt.pix.bytesperline = w; f.pointee.fmt.pix.sizeimage = w * h * 3 / 2
                case .mjpeg: f.pointee.fmt.pix.bytesperline = 0; f.pointee.fmt.pix.sizeimage = w * h * 4
                default:  // v4l2loopback falls back to its first format, BGR4
                    f.pointee.fmt.pix.pixelformat = PixelFormat(fourcc: "BGR4").rawValue
                    f.pointee.fmt.pix.bytesperline = w * 4; f.pointee.fmt.pix.sizeimage = w * h * 4
                }
                return 0
            case V4L2Request.setParameters:
                let p = arg.assumingMemoryBound(to: v4l2_streamparm.self)
                guard p.pointee.type == V4L2_BUF_TYPE_VIDEO_OUTPUT.rawValue else { return EINVAL }
                s.interval = (p.pointee.parm.output.timeperframe.numerator, p.pointee.parm.output.timeperframe.denominator)
                return 0
            case V4L2Request.streamOn:
                guard arg.load(as: Int32.self) == Int32(V4L2_BUF_TYPE_VIDEO_OUTPUT.rawValue) else { return EINVAL }
                s.streaming = true
                return 0
            default:
                return ENOTTY
            }
        }
    }

    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        state.withLock { s in
            if let e = s.writeError { return -Int(e) }
            s.frames.append(Array(bytes))
            return bytes.count
        }
    }

    private func copy(_ text: String, into buffer: UnsafeMutableRawBufferPointer) {
        for (i, byte) in text.utf8.prefix(buffer.count - 1).enumerated() { buffer[i] = byte }
    }
}

@Suite struct LoopbackSinkTests {
    let size = Dimensions(width: 64, height: 48)
    let thirtieth = MediaTime(value: 1, timescale: 30)

    /// A frame whose luma is the row number and whose chroma planes are constant.
    func frame(_ format: PixelFormat) -> PixelBuffer {
        let buffer = PixelBuffer(format: format, width: size.width, height: size.height)
        for plane in 0..<buffer.planeCount {
            buffer.withProducerPlane(plane) { bytes in
                for row in 0..<buffer.planeRows[plane] {
                    for x in 0..<buffer.bytesPerRow[plane] {
                        bytes[row * buffer.bytesPerRow[plane] + x] = plane == 0 ? UInt8(row) : UInt8(100 + plane)
                    }
                }
            }
        }
        return buffer
    }

    @Test func writesI420FramesPackedAtTheDriversPitchAndSetsTheRate() throws {
        let fake = FakeLoopback()
        let sink = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .yuv420, dimensions: size, frameDuration: thirtieth, system: fake)
        #expect(sink.cardName == "CaptureKitLoopback" && sink.driverName == "v4l2 loopback")
        try sink.write(frame(.yuv420))
        try sink.write(frame(.yuv420))
        #expect(sink.framesWritten == 2)
        let frames = fake.state.withLock { $0.frames }
        #expect(frames.count == 2)
        let bytes = try #require(frames.first)
        #expect(bytes.count == 64 * 48 * 3 / 2)
        // Luma rows are tightly packed (64 bytes, the 64-byte row padding of PixelBuffer removed).
        #expect(bytes[0] == 0 && bytes[63] == 0 && bytes[64] == 1 && bytes[64 * 47] == 47)
        #expect(bytes[64 * 48] == 101 && bytes[64 * 48 + 32 * 24] == 102 && bytes.last == 102)
        #expect(fake.state.withLock { $0.interval! } == (1, 30))
        #expect(fake.state.withLock { $0.streaming })   // v4l2loopback's writer marker
    }

    @Test func convertsFramesOfAnotherFormatAndSize() throws {
        let fake = FakeLoopback()
        let sink = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .yuyv, dimensions: Dimensions(width: 32, height: 24),
                                        frameDuration: thirtieth, system: fake)
        try sink.write(frame(.nv12))
        let bytes = try #require(fake.state.withLock { $0.frames.first })
        #expect(bytes.count == 32 * 24 * 2)
        // YUYV: Y0 U Y1 V; the scaled luma of row r is about 2r, chroma 101/102 from NV12's UV plane.
        #expect(abs(Int(bytes[1]) - 101) <= 1 && abs(Int(bytes[3]) - 102) <= 1)
        #expect(abs(Int(bytes[10 * 64]) - 20) <= 2)
    }

    @Test func writesMJPEGThatDecodesToTheFrame() throws {
        let fake = FakeLoopback()
        let sink = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .mjpeg, dimensions: size, frameDuration: thirtieth, system: fake)
        try sink.write(frame(.nv12))
        let bytes = try #require(fake.state.withLock { $0.frames.first })
        #expect(bytes.prefix(2) == [0xFF, 0xD8])
        let decoded = try JPEGCodec().decode(bytes)
        #expect(decoded.width == 64 && decoded.height == 48)
        decoded.withPlane(0) { luma in
            #expect(abs(Int(luma[40 * decoded.bytesPerRow[0] + 10]) - 40) <= 3)
        }
    }

    @Test func refusesWhatIsNotAVideoOutput() {
        #expect {
            _ = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .yuyv, dimensions: size, frameDuration: thirtieth, system: FakeLoopback(mode: .camera))
        } throws: { error in
            guard case .videoOutputFailed("/dev/video10", .notAVideoOutput(let what)) = error as? CaptureError else { return false }
            return what.contains("capture node") && what.contains("vivid")
        }
        #expect {
            _ = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .yuyv, dimensions: size, frameDuration: thirtieth, system: FakeLoopback(mode: .outputWithoutReadWrite))
        } throws: { error in
            guard case .videoOutputFailed(_, .notAVideoOutput) = error as? CaptureError else { return false }
            return true
        }
        #expect(throws: CaptureError.videoOutputFailed(path: "/dev/video11", problem: .notFound)) {
            _ = try V4L2LoopbackSink(path: "/dev/video11", pixelFormat: .yuyv, dimensions: size, frameDuration: thirtieth, system: FakeLoopback())
        }
    }

    @Test func anotherWriterMakesTheNodeBusy() {
        let fake = FakeLoopback(mode: .capturingWithAnotherWriter)
        #expect {
            _ = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .yuyv, dimensions: size, frameDuration: thirtieth, system: fake)
        } throws: { error in
            guard case .videoOutputFailed(_, .busy(let detail)) = error as? CaptureError else { return false }
            return detail.contains("another program is writing")
        }
        #expect(fake.state.withLock { $0.open.isEmpty })   // the descriptor was closed
    }

    @Test func aFormatTheDriverAnswersDifferentlyIsRefused() {
        let fake = FakeLoopback()
        fake.state.withLock { $0.lockedFormat = (PixelFormat.yuyv.rawValue, 320, 240) }
        #expect(throws: CaptureError.videoOutputFailed(path: "/dev/video10", problem: .formatRefused(requested: "NV12 64x48", granted: "YUYV 320x240"))) {
            _ = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .nv12, dimensions: size, frameDuration: thirtieth, system: fake)
        }
        #expect(throws: CaptureError.self) {
            _ = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .rgb24, dimensions: size, frameDuration: thirtieth, system: FakeLoopback())
        }
        #expect(throws: CaptureError.self) {
            _ = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .yuv420, dimensions: Dimensions(width: 63, height: 48),
                                     frameDuration: thirtieth, system: FakeLoopback())
        }
    }

    @Test func aVanishedNodeIsDisconnectedAndAClosedSinkRefusesFrames() throws {
        let fake = FakeLoopback()
        let sink = try V4L2LoopbackSink(path: "/dev/video10", pixelFormat: .yuyv, dimensions: size, frameDuration: thirtieth, system: fake)
        fake.state.withLock { $0.writeError = ENODEV }
        #expect(throws: CaptureError.videoOutputFailed(path: "/dev/video10", problem: .disconnected)) { try sink.write(frame(.yuyv)) }
        fake.state.withLock { $0.writeError = nil }
        sink.close()
        #expect(fake.state.withLock { $0.open.isEmpty })
        #expect(throws: CaptureError.self) { try sink.write(frame(.yuyv)) }
        #expect(sink.framesWritten == 0)
    }
}
