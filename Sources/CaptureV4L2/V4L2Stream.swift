import CaptureCore
import CaptureMedia
import CV4L2
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Streaming from a capture node with mmap buffers.
///
/// `start` sets the format (S_FMT, read back), the frame interval (S_PARM, read back), requests
/// and maps the buffers, queues them and turns the stream on. `nextSample` runs on the session's
/// per-input thread: poll → DQBUF → one copy into a pooled buffer → QBUF. MJPEG frames stay
/// compressed (as the simulator's webcam delivers them): a movie output can copy them into MOV/MKV
/// untouched, and the encoder decodes them when it re-encodes.
/// PTS are the driver's CLOCK_MONOTONIC timestamps (start of frame), the clock `HostClock` reads.
///
/// Concurrency rule (why `@unchecked Sendable`): every mutable field is touched only while
/// holding `lock`; `stop()` may run on any thread and wakes a blocked poll through a pipe.
final class V4L2Stream: DriverStream, @unchecked Sendable {
    private let device: V4L2Device
    private let pixelFormat: PixelFormat
    private let size: Dimensions
    private var frameDuration: MediaTime
    private let lock = NSLock()
    private let wakePipe: V4L2WakePipe?

    // Guarded by `lock`.
    private var buffers: [(address: UnsafeMutableRawPointer, length: Int)] = []
    private var bytesPerLine = 0
    private var isStreaming = false
    private var isStopped = false
    private var lastSequence: UInt32?
    /// Frames lost since the last delivered one (sequence gaps, corrupt buffers): the next sample
    /// carries them as its `discontinuity`, so outputs' `didDrop` hears of them.
    private var pendingLoss: Discontinuity?
    private var pool: PixelBufferPool?

    static let bufferCount: UInt32 = 8

    init(device: V4L2Device, pixelFormat: PixelFormat, size: Dimensions, frameDuration: MediaTime) {
        self.device = device
        self.pixelFormat = pixelFormat
        self.size = size
        self.frameDuration = frameDuration
        wakePipe = device.node.system.makeWakePipe()
    }

    deinit {
        teardown()
        if let wakePipe { system.closeWakePipe(wakePipe) }
    }

    private var system: any V4L2System { device.node.system }
    private var fd: Int32 { device.node.fd }
    private var id: String { device.uniqueID }

    func start(at hostTime: MediaTime) throws(CaptureError) {
        lock.lock(); defer { lock.unlock() }
        guard !isStreaming, !isStopped else { throw .invalidState("a V4L2 stream starts once") }
        try device.beginStreaming()
        do throws(CaptureError) {
            try configure()
            try allocateAndStream()
        } catch {
            teardownLocked()
            throw error
        }
    }

    private func configure() throws(CaptureError) {
        var f = v4l2_format()
        f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        f.fmt.pix.width = UInt32(size.width)
        f.fmt.pix.height = UInt32(size.height)
        f.fmt.pix.pixelformat = pixelFormat.rawValue
        f.fmt.pix.field = V4L2_FIELD_NONE.rawValue
        var e = xioctl(system, fd, V4L2Request.setFormat, &f)
        guard e == 0 else { throw device.failure(e, "VIDIOC_S_FMT \(pixelFormat) \(size)") }
        guard f.fmt.pix.pixelformat == pixelFormat.rawValue, Int(f.fmt.pix.width) == size.width, Int(f.fmt.pix.height) == size.height else {
            throw .formatNotSupported("\(id) gave \(PixelFormat(rawValue: f.fmt.pix.pixelformat)) \(f.fmt.pix.width)x\(f.fmt.pix.height) when asked for \(pixelFormat) \(size)")
        }
        let minimumLine = pixelFormat.planes(width: size.width, height: size.height).first?.bytesPerRow ?? 0
        bytesPerLine = max(Int(f.fmt.pix.bytesperline), minimumLine)

        // The interval after S_FMT (a new format can change it), then the one asked for.
        var parm = v4l2_streamparm()
        parm.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        e = xioctl(system, fd, V4L2Request.getParameters, &parm)
        let canSetInterval = e == 0 && parm.parm.capture.capability & UInt32(V4L2_CAP_TIMEPERFRAME) != 0
        let current = V4L2Formats.duration(parm.parm.capture.timeperframe)
        guard frameDuration.isValid else {
            if let current { frameDuration = current }
            return
        }
        if !canSetInterval {
            guard let current, current == frameDuration else {
                throw .formatNotSupported("\(id) cannot set its frame duration (no V4L2_CAP_TIMEPERFRAME); it runs at \(current.map { "\($0)" } ?? "an unknown interval")")
            }
            return
        }
        let (num, den) = Self.fraction(frameDuration)
        parm.parm.capture.timeperframe = v4l2_fract(numerator: num, denominator: den)
        e = xioctl(system, fd, V4L2Request.setParameters, &parm)
        guard e == 0 else { throw device.failure(e, "VIDIOC_S_PARM \(frameDuration)") }
        guard let granted = V4L2Formats.duration(parm.parm.capture.timeperframe), granted == frameDuration else {
            throw .formatNotSupported("\(id) gave frame duration \(V4L2Formats.duration(parm.parm.capture.timeperframe).map { "\($0)" } ?? "?") when asked for \(frameDuration)")
        }
    }

    /// A frame duration as a V4L2 fraction (both fit in UInt32 for any sane rate).
    static func fraction(_ t: MediaTime) -> (UInt32, UInt32) {
        var num = t.value, den = Int64(t.timescale)
        func gcd(_ a: Int64, _ b: Int64) -> Int64 { b == 0 ? a : gcd(b, a % b) }
        let g = max(1, gcd(abs(num), abs(den)))
        num /= g; den /= g
        while num > Int64(UInt32.max) || den > Int64(UInt32.max) { num /= 2; den /= 2 }
        return (UInt32(max(1, num)), UInt32(max(1, den)))
    }

    private func allocateAndStream() throws(CaptureError) {
        var req = v4l2_requestbuffers()
        req.count = Self.bufferCount
        req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        req.memory = V4L2_MEMORY_MMAP.rawValue
        var e = xioctl(system, fd, V4L2Request.requestBuffers, &req)
        guard e == 0, req.count > 0 else {
            if e == ENODEV { device.markDisconnected(); throw .deviceDisconnected(id) }
            throw .deviceStartFailed(device: id, reason: "VIDIOC_REQBUFS (mmap): \(e == 0 ? "no buffers" : errnoText(e))")
        }
        for index in 0..<req.count {
            var b = v4l2_buffer()
            b.index = index
            b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            b.memory = V4L2_MEMORY_MMAP.rawValue
            e = xioctl(system, fd, V4L2Request.queryBuffer, &b)
            guard e == 0 else { throw .deviceStartFailed(device: id, reason: "VIDIOC_QUERYBUF: \(errnoText(e))") }
            guard let address = system.map(fd, length: Int(b.length), offset: Int(b.m.offset)) else {
                throw .deviceStartFailed(device: id, reason: "mmap of buffer \(index) failed")
            }
            buffers.append((address, Int(b.length)))
            e = xioctl(system, fd, V4L2Request.queueBuffer, &b)
            guard e == 0 else { throw .deviceStartFailed(device: id, reason: "VIDIOC_QBUF: \(errnoText(e))") }
        }
        var type = Int32(V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue)
        e = xioctl(system, fd, V4L2Request.streamOn, &type)
        guard e == 0 else {
            if e == ENODEV { device.markDisconnected(); throw .deviceDisconnected(id) }
            throw .deviceStartFailed(device: id, reason: "VIDIOC_STREAMON: \(errnoText(e))")
        }
        isStreaming = true
        pool = PixelBufferPool(format: pixelFormat, width: size.width, height: size.height)
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        while true {
            if stoppedFlag() { return nil }
            switch system.poll(fd, wakeFD: wakePipe?.read ?? -1, timeoutMilliseconds: 250) {
            case .woken: return nil
            case .timedOut: continue
            case .readable, .failed: break
            }
            lock.lock()
            let outcome: Outcome
            do throws(CaptureError) { outcome = try dequeueLocked() } catch {
                lock.unlock()
                throw error
            }
            lock.unlock()
            switch outcome {
            case .sample(let s): return s
            case .stopped: return nil
            case .again: continue
            }
        }
    }

    private enum Outcome { case sample(SampleBuffer), stopped, again }

    private func stoppedFlag() -> Bool { lock.lock(); defer { lock.unlock() }; return isStopped }

    private func dequeueLocked() throws(CaptureError) -> Outcome {
        guard !isStopped, isStreaming else { return .stopped }
        var b = v4l2_buffer()
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        let e = xioctl(system, fd, V4L2Request.dequeueBuffer, &b)
        if e == EAGAIN { return .again }
        if e != 0 {
            // ENODEV: unplugged. EIO with the node gone is the same; otherwise a fatal stream error.
            if e == ENODEV || e == ENXIO || !system.nodeExists(id) {
                device.markDisconnected()
                throw .deviceDisconnected(id)
            }
            throw .deviceStartFailed(device: id, reason: "streaming failed: VIDIOC_DQBUF: \(errnoText(e))")
        }
        defer {
            var q = b
            if xioctl(system, fd, V4L2Request.queueBuffer, &q) == ENODEV { device.markDisconnected() }
        }
        let pts = timestamp(of: b)
        if let last = lastSequence, b.sequence > last &+ 1 {
            let count = Int(b.sequence &- last &- 1)
            noteLoss(count, .discontinuity)
            DeviceEventCenter.shared.post(.samplesDropped(deviceID: id, reason: .discontinuity, count: count, presentationTime: pts))
        }
        lastSequence = b.sequence
        guard Int(b.index) < buffers.count, b.flags & UInt32(V4L2_BUF_FLAG_ERROR) == 0,
              let pixels = convert(buffers[Int(b.index)].address, used: Int(b.bytesused == 0 ? b.length : b.bytesused)) else {
            // Outputs see a lost frame (AVFoundation's reasons have no "corrupt"); the event says why.
            noteLoss(1, .discontinuity)
            DeviceEventCenter.shared.post(.samplesDropped(deviceID: id, reason: .corruptData, count: 1, presentationTime: pts))
            return .again
        }
        defer { pendingLoss = nil }
        return .sample(SampleBuffer(payload: .pixels(pixels),
                                    formatDescription: .video(pixelFormat: pixels.format, dimensions: size),
                                    presentationTime: pts, duration: frameDuration, sequenceNumber: Int64(b.sequence),
                                    discontinuity: pendingLoss))
    }

    /// Adds lost frames to what the next sample reports.
    private func noteLoss(_ count: Int, _ reason: DropReason) {
        pendingLoss = Discontinuity(count: (pendingLoss?.count ?? 0) + count, reason: pendingLoss?.reason ?? reason)
    }

    /// The start of the frame on CLOCK_MONOTONIC: the driver's stamp when it is monotonic (minus
    /// one frame when it marks the end of the frame), otherwise the time we dequeued it.
    private func timestamp(of b: v4l2_buffer) -> MediaTime {
        let mask = UInt32(V4L2_BUF_FLAG_TIMESTAMP_MASK)
        guard b.flags & mask == UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC) else { return HostClock.now() - frameDuration }
        let ns = Int64(b.timestamp.tv_sec) * 1_000_000_000 + Int64(b.timestamp.tv_usec) * 1000
        let stamp = MediaTime(value: ns, timescale: 1_000_000_000)
        let endOfFrame = b.flags & UInt32(V4L2_BUF_FLAG_TSTAMP_SRC_MASK) == UInt32(V4L2_BUF_FLAG_TSTAMP_SRC_EOF)
        return endOfFrame ? stamp - frameDuration : stamp
    }

    /// One copy from the driver's buffer (its line pitch) into a pooled buffer (64-byte rows);
    /// MJPEG bytes are copied as they are into a compressed pooled buffer. Nil means the frame is
    /// unusable (short or corrupt, or not starting with a JPEG start-of-image marker).
    private func convert(_ source: UnsafeMutableRawPointer, used: Int) -> PixelBuffer? {
        if pixelFormat == .mjpeg {
            let bytes = UnsafeRawBufferPointer(start: source, count: used)
            guard used >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8, let out = pool?.makeBuffer() else { return nil }
            do throws(CaptureError) { try out.setCompressedData(bytes) } catch { return nil }
            return out
        }
        guard let out = pool?.makeBuffer() else { return nil }
        // Source planes: luma (or packed) at the driver's pitch, chroma after it.
        var offset = 0
        let geometry = pixelFormat.planes(width: size.width, height: size.height)
        for (plane, g) in geometry.enumerated() {
            let pitch: Int
            switch (pixelFormat, plane) {
            case (.yuv420, 1), (.yuv420, 2): pitch = bytesPerLine / 2
            default: pitch = bytesPerLine
            }
            guard offset + pitch * (g.rows - 1) + g.bytesPerRow <= used else { return nil }
            let destination = out.producerBaseAddress(ofPlane: plane)
            let stride = out.bytesPerRow[plane]
            for row in 0..<g.rows {
                (destination + row * stride).copyMemory(from: source + offset + row * pitch, byteCount: g.bytesPerRow)
            }
            offset += pitch * g.rows
        }
        return out
    }

    func stop() {
        lock.lock()
        let wasStopped = isStopped
        isStopped = true
        lock.unlock()
        if !wasStopped, let wakePipe { system.signalWake(wakePipe) }
        teardown()
    }

    private func teardown() {
        lock.lock(); defer { lock.unlock() }
        teardownLocked()
    }

    /// STREAMOFF, unmap, free the buffers; idempotent.
    private func teardownLocked() {
        let hadResources = isStreaming || !buffers.isEmpty
        if isStreaming {
            var type = Int32(V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue)
            _ = xioctl(system, fd, V4L2Request.streamOff, &type)
            isStreaming = false
        }
        for b in buffers { system.unmap(b.address, length: b.length) }
        buffers.removeAll()
        if hadResources {
            var req = v4l2_requestbuffers()
            req.count = 0
            req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            req.memory = V4L2_MEMORY_MMAP.rawValue
            _ = xioctl(system, fd, V4L2Request.requestBuffers, &req)
        }
        device.endStreaming()
    }
}
