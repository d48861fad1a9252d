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
    static let fd = V4L2FileDescriptor(rawValue: 42)

    init(mode: Mode = .output) { state.withLock { $0.mode = mode } }

    private func check(_ s: State, _ fd: V4L2FileDescriptor) throws(V4L2Errno) {
        guard s.open.contains(fd.rawValue) else { throw .badDescriptor }
    }

    func deviceNodes() -> [String] { ["/dev/video10"] }
    func nodeExists(_ path: String) -> Bool { path == "/dev/video10" }
    func open(_ path: String) throws(V4L2Errno) -> V4L2FileDescriptor {
        guard path == "/dev/video10" else { throw .noSuchFile }
        state.withLock { _ = $0.open.insert(Self.fd.rawValue) }
        return Self.fd
    }
    func close(_ fd: V4L2FileDescriptor) { _ = state.withLock { $0.open.remove(fd.rawValue) } }

    func queryCapability(_ fd: V4L2FileDescriptor) throws(V4L2Errno) -> V4L2Capability {
        try state.withLock { (s: inout State) throws(V4L2Errno) -> V4L2Capability in
            try check(s, fd)
            let caps: V4L2CapabilityFlags
            switch s.mode {
            case .output: caps = [.videoOutput, .readWrite, .streaming]
            case .outputWithoutReadWrite: caps = [.videoOutput, .streaming]
            case .capturingWithAnotherWriter, .camera: caps = [.videoCapture, .readWrite, .streaming]
            }
            return V4L2Capability(driver: s.mode == .camera ? "vivid" : "v4l2 loopback", card: "CaptureKitLoopback", busInfo: "",
                                  capabilities: caps.union(.deviceCapabilities), deviceCapabilities: caps)
        }
    }

    func setFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ format: inout V4L2ImageFormat) throws(V4L2Errno) {
        let asked = format
        format = try state.withLock { (s: inout State) throws(V4L2Errno) -> V4L2ImageFormat in
            try check(s, fd)
            guard type == .videoOutput else { throw .invalidArgument }
            var f = asked
            if let locked = s.lockedFormat {
                f = V4L2ImageFormat(width: locked.width, height: locked.height, pixelFormat: PixelFormat(rawValue: locked.pixel))
            }
            let w = f.width, h = f.height
            switch f.pixelFormat {
            case .yuyv: f.bytesPerLine = w * 2; f.imageSize = w * h * 2
            case .yuv420, .nv12: f.bytesPerLine = w; f.imageSize = w * h * 3 / 2
            case .mjpeg: f.bytesPerLine = 0; f.imageSize = w * h * 4
            default:  // v4l2loopback falls back to its first format, BGR4
                f.pixelFormat = PixelFormat(fourcc: "BGR4")
                f.bytesPerLine = w * 4; f.imageSize = w * h * 4
            }
            return f
        }
    }

    func setParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ parameters: inout V4L2StreamParameters) throws(V4L2Errno) {
        let asked = parameters.timePerFrame
        try state.withLock { (s: inout State) throws(V4L2Errno) in
            try check(s, fd)
            guard type == .videoOutput else { throw .invalidArgument }
            s.interval = (asked.numerator, asked.denominator)
        }
    }

    func streamOn(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) {
        try state.withLock { (s: inout State) throws(V4L2Errno) in
            try check(s, fd)
            guard type == .videoOutput else { throw .invalidArgument }
            s.streaming = true
        }
    }

    func write(_ fd: V4L2FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws(V4L2Errno) -> Int {
        try state.withLock { (s: inout State) throws(V4L2Errno) -> Int in
            if let e = s.writeError { throw V4L2Errno(rawValue: e) }
            s.frames.append(Array(bytes))
            return bytes.count
        }
    }

    // What a v4l2loopback output node does not answer (ENOTTY), or has nothing for.
    func enumerateFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> PixelFormat { throw .inappropriateIoctl }
    func enumerateFrameSize(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, index: UInt32) throws(V4L2Errno) -> V4L2FrameSize { throw .inappropriateIoctl }
    func enumerateFrameInterval(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, size: Dimensions,
                                index: UInt32) throws(V4L2Errno) -> V4L2FrameInterval { throw .inappropriateIoctl }
    func getFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2ImageFormat { throw .inappropriateIoctl }
    func getParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2StreamParameters { throw .inappropriateIoctl }
    func requestBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType, count: UInt32) throws(V4L2Errno) -> UInt32 { throw .inappropriateIoctl }
    func queryBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> V4L2BufferLocation { throw .inappropriateIoctl }
    func map(_ fd: V4L2FileDescriptor, _ location: V4L2BufferLocation) throws(V4L2Errno) -> V4L2MappedBuffer { throw .invalidArgument }
    func unmap(_ buffer: V4L2MappedBuffer) {}
    func queueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) { throw .inappropriateIoctl }
    func dequeueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2DequeuedBuffer { throw .inappropriateIoctl }
    func streamOff(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) { throw .inappropriateIoctl }
    func queryControl(_ fd: V4L2FileDescriptor, id: UInt32, next: Bool) throws(V4L2Errno) -> V4L2ControlQuery { throw .invalidArgument }
    func queryMenu(_ fd: V4L2FileDescriptor, control: UInt32, index: UInt32) throws(V4L2Errno) -> V4L2MenuEntry { throw .invalidArgument }
    func getControl(_ fd: V4L2FileDescriptor, id: UInt32) throws(V4L2Errno) -> Int32 { throw .invalidArgument }
    func setControl(_ fd: V4L2FileDescriptor, id: UInt32, value: Int32) throws(V4L2Errno) { throw .invalidArgument }
    func setPriority(_ fd: V4L2FileDescriptor, _ priority: V4L2Priority) throws(V4L2Errno) { throw .inappropriateIoctl }
    func poll(_ fd: V4L2FileDescriptor, wake: V4L2WakePipe?, timeoutMilliseconds: Int32) -> V4L2PollResult { .timedOut }
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
