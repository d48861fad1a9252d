import CaptureCore
import CaptureMedia
import Foundation

/// Writes frames to a V4L2 video output node — a v4l2loopback device — so any V4L2 client
/// (CaptureKit's own backend, ffmpeg, a browser) reads them as a camera.
///
/// `init` opens the node, checks it is a video output (QUERYCAP), sets the format (S_FMT on the
/// output queue, read back: the driver may answer with another one) and the frame interval
/// (S_PARM: readers see it as the camera's rate). `write(_:)` takes raw frames of any format and
/// size: they are converted and scaled to the sink's format with libswscale when they differ,
/// compressed with libturbojpeg for MJPG, packed at the driver's line pitch and handed over with
/// one write() per frame (read/write I/O, which v4l2loopback 0.12 handles without the buffer-queue
/// quirks of its mmap output path; the module stamps each frame with its arrival time). The output
/// queue is also turned on (STREAMON), which is what makes v4l2loopback release the node properly
/// on close. Pacing is the caller's: write frames when they are due (`VideoLoopbackOutput` does so
/// from a session).
///
/// Formats: YUYV, YU12 (I420), NV12 and MJPG; raw formats need an even width and height.
///
/// Concurrency rule: every mutable field lives in `state` and is touched only under its lock, so
/// `write` and `close` may be called from any thread.
public final class V4L2LoopbackSink: Sendable {
    /// The formats the sink writes (v4l2loopback accepts all four).
    public static let supportedPixelFormats: [PixelFormat] = [.yuyv, .yuv420, .nv12, .mjpeg]

    public let path: String
    public let pixelFormat: PixelFormat
    public let dimensions: Dimensions
    public let frameDuration: MediaTime
    /// The node's card name (v4l2loopback's `card_label`) and driver, as QUERYCAP reported them.
    public let cardName: String
    public let driverName: String
    /// JPEG quality (0…1) for MJPG.
    public let jpegQuality: Double

    private let system: any V4L2System
    /// Bytes per line of each plane as the driver lays frames out, and the driver's frame size.
    private let pitches: [Int]
    private let imageSize: Int

    private let state: Locked<State>

    private struct State {
        /// Nil once closed.
        var fd: V4L2FileDescriptor?
        var staging: [UInt8]
        var converter: PixelConverter?
        var scratch: PixelBuffer?
        var jpeg: JPEGCodec?
        var written = 0
    }

    /// Opens `path` as a video output and sets its format and frame interval.
    /// - Throws: `videoOutputFailed` (not found, access denied, not an output, busy, format refused,
    ///   disconnected), `formatNotSupported` for a pixel format the sink does not write,
    ///   `invalidArgument` for an odd or empty size, a duration that is not positive or a quality outside 0…1.
    public convenience init(path: String, pixelFormat: PixelFormat, dimensions: Dimensions, frameDuration: MediaTime,
                            jpegQuality: Double = 0.9) throws(CaptureError) {
        try self.init(path: path, pixelFormat: pixelFormat, dimensions: dimensions, frameDuration: frameDuration,
                      jpegQuality: jpegQuality, system: LinuxV4L2System())
    }

    /// A sink over another `V4L2System` (host tests stand a fake v4l2loopback node in).
    init(path: String, pixelFormat: PixelFormat, dimensions: Dimensions, frameDuration: MediaTime,
         jpegQuality: Double = 0.9, system: any V4L2System) throws(CaptureError) {
        guard Self.supportedPixelFormats.contains(pixelFormat) else {
            throw .formatNotSupported("a video output sink writes \(Self.supportedPixelFormats.map(\.fourcc).joined(separator: ", ")), not \(pixelFormat)")
        }
        guard dimensions.width > 0, dimensions.height > 0,
              pixelFormat == .mjpeg || (dimensions.width % 2 == 0 && dimensions.height % 2 == 0) else {
            throw .invalidArgument("a \(pixelFormat) video output needs an even, non-zero width and height, not \(dimensions)")
        }
        guard frameDuration.isValid, frameDuration.seconds > 0 else {
            throw .invalidArgument("the frame duration of a video output must be positive, not \(frameDuration)")
        }
        guard (0...1).contains(jpegQuality) else { throw .invalidArgument("JPEG quality \(jpegQuality) is outside 0.0–1.0") }

        let fd: V4L2FileDescriptor
        do { fd = try system.open(path) } catch {
            switch error {
            case .noSuchFile, .noSuchDeviceOrAddress, .noDevice: throw .videoOutputFailed(path: path, problem: .notFound)
            case .accessDenied, .notPermitted: throw .videoOutputFailed(path: path, problem: .accessDenied)
            case .busy: throw .videoOutputFailed(path: path, problem: .busy(detail: "open() said EBUSY"))
            default: throw .videoOutputFailed(path: path, problem: .notAVideoOutput(what: "open() failed: \(error)"))
            }
        }
        do throws(CaptureError) {
            let (card, driver) = try Self.checkOutput(system, fd: fd, path: path)
            let (pitches, imageSize) = try Self.setFormat(system, fd: fd, path: path, pixelFormat: pixelFormat, dimensions: dimensions)
            try Self.setInterval(system, fd: fd, path: path, frameDuration: frameDuration)
            Self.declareWriter(system, fd: fd)
            self.cardName = card
            self.driverName = driver
            self.pitches = pitches
            self.imageSize = imageSize
        } catch {
            system.close(fd)
            throw error
        }
        self.path = path
        self.pixelFormat = pixelFormat
        self.dimensions = dimensions
        self.frameDuration = frameDuration
        self.jpegQuality = jpegQuality
        self.system = system
        let rows = pixelFormat.planes(width: dimensions.width, height: dimensions.height).map(\.rows)
        state = Locked(State(fd: fd, staging: [UInt8](repeating: 0, count: zip(pitches, rows).map { $0 * $1 }.reduce(0, +))))
    }

    deinit { close() }

    /// QUERYCAP: a video output node, or why not. A v4l2loopback node with exclusive_caps that
    /// announces capture only has another writer.
    private static func checkOutput(_ system: any V4L2System, fd: V4L2FileDescriptor, path: String) throws(CaptureError) -> (String, String) {
        let cap: V4L2Capability
        do { cap = try system.queryCapability(fd) } catch {
            if error == .noDevice { throw .videoOutputFailed(path: path, problem: .disconnected) }
            throw .videoOutputFailed(path: path, problem: .notAVideoOutput(what: "not a V4L2 device"))
        }
        let caps = cap.effective
        let card = cap.card, driver = cap.driver
        if !caps.contains(.videoOutput) {
            if driver == "v4l2 loopback" && caps.contains(.videoCapture) {
                throw .videoOutputFailed(path: path, problem: .busy(detail: "another program is writing to '\(card)' (it offers only capture now)"))
            }
            let kind = caps.contains(.videoCapture) ? "a capture node" : "a node without video output"
            throw .videoOutputFailed(path: path, problem: .notAVideoOutput(what: "\(kind) of driver '\(driver)', card '\(card)'"))
        }
        guard caps.contains(.readWrite) else {
            throw .videoOutputFailed(path: path, problem: .notAVideoOutput(what: "driver '\(driver)' does not take frames through write()"))
        }
        return (card, driver)
    }

    /// S_FMT on the output queue, read back; the driver's line pitch per plane and frame size.
    private static func setFormat(_ system: any V4L2System, fd: V4L2FileDescriptor, path: String, pixelFormat: PixelFormat,
                                  dimensions: Dimensions) throws(CaptureError) -> ([Int], Int) {
        var f = V4L2ImageFormat(pixelFormat: pixelFormat, size: dimensions)
        let requested = "\(pixelFormat) \(dimensions)"
        do { try system.setFormat(fd, type: .videoOutput, &f) } catch {
            if error.meansDeviceGone { throw .videoOutputFailed(path: path, problem: .disconnected) }
            if error == .busy { throw .videoOutputFailed(path: path, problem: .busy(detail: "VIDIOC_S_FMT said EBUSY (a stream is running)")) }
            throw .videoOutputFailed(path: path, problem: .formatRefused(requested: requested, granted: "an error (\(error))"))
        }
        let granted = f.pixelFormat
        guard granted == pixelFormat, f.dimensions == dimensions else {
            throw .videoOutputFailed(path: path, problem: .formatRefused(requested: requested, granted: "\(granted) \(f.width)x\(f.height)"))
        }
        let imageSize = Int(f.imageSize)
        let geometry = pixelFormat.planes(width: dimensions.width, height: dimensions.height)
        let line = max(Int(f.bytesPerLine), geometry.first?.bytesPerRow ?? 0)
        // Planes follow each other at the luma pitch (halved for I420's chroma), as V4L2 lays out
        // single-planar formats.
        let pitches = geometry.enumerated().map { plane, g in
            pixelFormat == .yuv420 && plane > 0 ? max(line / 2, g.bytesPerRow) : max(line, g.bytesPerRow)
        }
        let frameBytes = zip(pitches, geometry).map { $0 * $1.rows }.reduce(0, +)
        if !pixelFormat.isCompressed, imageSize > 0, frameBytes > imageSize {
            throw .videoOutputFailed(path: path, problem: .formatRefused(
                requested: requested, granted: "frames of \(imageSize) bytes where \(frameBytes) are needed"))
        }
        return (pitches, imageSize)
    }

    /// S_PARM on the output queue: the interval readers see. Drivers without it (ENOTTY) are fine.
    private static func setInterval(_ system: any V4L2System, fd: V4L2FileDescriptor, path: String, frameDuration: MediaTime) throws(CaptureError) {
        var parameters = V4L2StreamParameters(canSetTimePerFrame: true, timePerFrame: V4L2Formats.fraction(frameDuration))
        do { try system.setParameters(fd, type: .videoOutput, &parameters) } catch {
            switch error {
            case .inappropriateIoctl, .invalidArgument: return
            case .noDevice, .noSuchDeviceOrAddress: throw .videoOutputFailed(path: path, problem: .disconnected)
            default: throw .videoOutputFailed(path: path, problem: .formatRefused(requested: "a frame duration of \(frameDuration)",
                                                                                   granted: "an error (\(error))"))
            }
        }
    }

    /// STREAMON on the output queue, though frames go through write(): v4l2loopback 0.12 counts an
    /// opener as its writer only after it, and only a writer's close turns an exclusive_caps node
    /// back into an output (after a write()-only writer the node would stay capture-only, refusing
    /// the next writer). Drivers whose read/write I/O wants no STREAMON refuse it; that is fine.
    private static func declareWriter(_ system: any V4L2System, fd: V4L2FileDescriptor) {
        try? system.streamOn(fd, type: .videoOutput)
    }

    /// Frames written so far.
    public var framesWritten: Int { state.withLock { $0.written } }

    /// Writes one frame: a raw frame of any format the converter knows and any size (converted and
    /// scaled to the sink's format), or an MJPEG frame of the sink's size when the sink writes MJPG.
    /// - Throws: `videoOutputFailed` (`.disconnected` when the node went away, `.writeFailed`),
    ///   `formatNotSupported` for a compressed frame the sink cannot pass on, `invalidState` after `close()`.
    public func write(_ frame: PixelBuffer) throws(CaptureError) {
        try state.withLock { (s) throws(CaptureError) in try write(frame, &s) }
    }

    private func write(_ frame: PixelBuffer, _ s: inout State) throws(CaptureError) {
        guard let fd = s.fd else { throw .invalidState("the video output \(path) is closed") }
        if frame.format.isCompressed {
            guard frame.format == pixelFormat, frame.width == dimensions.width, frame.height == dimensions.height else {
                throw .formatNotSupported("a \(frame.format) \(frame.width)x\(frame.height) frame cannot be written to a \(pixelFormat) \(dimensions) output; deliver raw frames")
            }
            try frame.withCompressedData { (bytes: UnsafeRawBufferPointer) throws(CaptureError) in try put(bytes, to: fd, &s) }
            return
        }
        let target: PixelFormat = pixelFormat == .mjpeg ? (frame.format == .nv12 || frame.format == .yuyv ? frame.format : .yuv420) : pixelFormat
        let source = try converted(frame, to: target, &s)
        if pixelFormat == .mjpeg {
            if s.jpeg == nil { s.jpeg = try JPEGCodec() }
            let bytes = try s.jpeg!.encode(source, quality: jpegQuality)
            try put(bytes, to: fd, &s)
            return
        }
        pack(source, into: &s.staging)
        let staging = s.staging
        try put(staging, to: fd, &s)
    }

    /// `frame` itself when it already has the sink's size and `format`, else a converted copy.
    private func converted(_ frame: PixelBuffer, to format: PixelFormat, _ s: inout State) throws(CaptureError) -> PixelBuffer {
        let size = Dimensions(width: frame.width, height: frame.height)
        if frame.format == format && size == dimensions { return frame }
        if s.converter?.source.format != frame.format || s.converter?.source.dimensions != size || s.converter?.destination.format != format {
            s.converter = try PixelConverter(from: frame.format, size, to: format, dimensions)
            s.scratch = PixelBuffer(format: format, width: dimensions.width, height: dimensions.height)
        }
        try s.converter!.convert(frame, into: s.scratch!)
        return s.scratch!
    }

    /// Copies the planes into `staging` at the driver's pitches.
    private func pack(_ buffer: PixelBuffer, into staging: inout [UInt8]) {
        let geometry = pixelFormat.planes(width: dimensions.width, height: dimensions.height)
        staging.withUnsafeMutableBytes { out in
            guard let base = out.baseAddress else { return }
            var offset = 0
            for (plane, g) in geometry.enumerated() {
                let source = buffer.baseAddress(ofPlane: plane), stride = buffer.bytesPerRow[plane]
                for row in 0..<g.rows {
                    (base + offset + row * pitches[plane]).copyMemory(from: source + row * stride, byteCount: g.bytesPerRow)
                }
                offset += pitches[plane] * g.rows
            }
        }
    }

    /// `put` for an array (whose `withUnsafeBytes` rethrows untyped errors).
    private func put(_ bytes: [UInt8], to fd: V4L2FileDescriptor, _ s: inout State) throws(CaptureError) {
        let failure: CaptureError? = bytes.withUnsafeBytes { raw in
            do throws(CaptureError) { try put(raw, to: fd, &s); return nil } catch { return error }
        }
        if let failure { throw failure }
    }

    /// One write() of a whole frame.
    private func put(_ bytes: UnsafeRawBufferPointer, to fd: V4L2FileDescriptor, _ s: inout State) throws(CaptureError) {
        if imageSize > 0, bytes.count > imageSize {
            throw .videoOutputFailed(path: path, problem: .writeFailed("a frame of \(bytes.count) bytes does not fit the driver's \(imageSize)-byte buffers"))
        }
        let n: Int
        do { n = try system.write(fd, bytes) } catch {
            if error.meansDeviceGone || (error == .ioError && !system.nodeExists(path)) {
                throw .videoOutputFailed(path: path, problem: .disconnected)
            }
            throw .videoOutputFailed(path: path, problem: .writeFailed(error.description))
        }
        guard n == bytes.count else {
            throw .videoOutputFailed(path: path, problem: .writeFailed("the driver took \(n) of \(bytes.count) bytes"))
        }
        s.written += 1
    }

    /// Closes the node (readers then see the stream end once no writer remains). Idempotent.
    public func close() {
        state.withLock { s in
            if let fd = s.fd { system.close(fd) }
            s.fd = nil
        }
    }
}
