import CaptureCore
import CaptureMedia
import Foundation
import Logging

/// Streaming from a capture node with mmap buffers.
///
/// `start` sets the format (S_FMT, read back), the frame interval (S_PARM, read back), requests
/// and maps the buffers, queues them and turns the stream on. `nextSample` runs on the session's
/// per-input thread: poll → DQBUF → the frame → QBUF. A raw frame borrows the driver's buffer (no
/// copy; QBUF once its last holder lets it go) where the driver lays it out as a `PixelBuffer`
/// would, keeps mappings past REQBUFS(0) and still has half its buffers queued; otherwise it is
/// one copy into a pooled buffer and the buffer goes straight back. MJPEG frames stay
/// compressed (as the simulator's webcam delivers them): a movie output can copy them into MOV/MKV
/// untouched, and the encoder decodes them when it re-encodes.
/// PTS are the driver's CLOCK_MONOTONIC timestamps (start of frame), the clock `HostClock` reads.
///
/// Concurrency rule (why `@unchecked Sendable`): every mutable field is touched only while
/// holding `lock`; `stop()` may run on any thread and wakes a blocked poll through a pipe.
final class V4L2Stream: ReconfigurableStream, @unchecked Sendable {  // unchecked: mutable fields only under `lock` (see above)
    private let device: V4L2Device
    private var pixelFormat: PixelFormat
    private var size: Dimensions
    private var frameDuration: MediaTime
    private let lock = NSLock()
    /// Held by the stream thread around each `poll` of the node, and taken by `stop` before it frees
    /// the buffers: a poll on a capture queue without buffers starts vb2's read() emulation (it
    /// allocates and streams buffers of its own, so the next S_FMT fails with EBUSY — vivid's
    /// "device busy", which `stop` then `start` of a session hit in the VM). So no poll may follow
    /// the REQBUFS(0) of a stop; the stream thread checks `isStopped` under this lock first.
    private let pollLock = NSLock()
    private let wakePipe: V4L2WakePipe?

    // Guarded by `lock`.
    private var buffers: [V4L2Mapping] = []
    /// Whether frames may borrow the driver's buffers (`lend`): the queue keeps orphaned mappings.
    private var lendsBuffers = false
    /// Buffers of this generation a frame holds (not queued with the driver).
    private var lent = 0
    /// Counts buffer allocations, so a buffer given back after a restart is not queued by its old index.
    private var generation = 0
    /// Buffers their frames gave back (any thread, under its own lock: a frame may be released
    /// while this stream's lock is held); queued again at the next dequeue.
    private let givenBack = Locked<[(generation: Int, index: UInt32)]>([])
    private var bytesPerLine = 0
    /// The driver's planes for the current format (line pitch, start), set with the buffers.
    private var driverPitches: [Int] = []
    private var driverOffsets: [Int] = []
    private var isStreaming = false
    private var isStopped = false
    private var lastSequence: UInt32?
    /// Frames lost since the last delivered one (sequence gaps, corrupt buffers): the next sample
    /// carries them as its `discontinuity`, so outputs' `didDrop` hears of them.
    private var pendingLoss: Discontinuity?
    private var pool: PixelBufferPool?
    /// Live reconfiguration: the change asked for (applied by the stream thread at its next
    /// dequeue), the handlers waiting for the first frame with it, and where a restart's gap began.
    private var pending: (pixelFormat: PixelFormat, size: Dimensions, duration: MediaTime, applied: [@Sendable (MediaTime) -> Void])?
    private var waitingForFirstFrame: [@Sendable (MediaTime) -> Void] = []
    private var restartedAfter: MediaTime?
    private var lastPTS: MediaTime?
    /// Sample sequence numbers continue across a restart (the driver's restart at 0).
    private var sequenceOffset: Int64 = 0
    private var lastSequenceNumber: Int64 = -1

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
    private var fd: V4L2FileDescriptor { device.node.fd }
    private var id: String { device.uniqueID }

    func start(at hostTime: MediaTime) throws(CaptureError) {
        lock.lock(); defer { lock.unlock() }
        guard !isStreaming, !isStopped else { throw .invalidState("a V4L2 stream starts once") }
        try device.beginStreaming()
        do throws(CaptureError) {
            try configure()
            try allocateAndStream()
            CaptureLogging.logger(.v4l2).info("streaming", metadata: ["device": "\(id)"])
        } catch {
            CaptureLogging.logger(.v4l2).debug("start failed: \(error)", metadata: ["device": "\(id)"])
            teardownLocked()
            throw error
        }
    }

    private func configure() throws(CaptureError) {
        var f = V4L2ImageFormat(pixelFormat: pixelFormat, size: size)
        do { try system.setFormat(fd, type: .videoCapture, &f) } catch {
            // EINVAL: the driver refuses the format outright (most adjust it instead; checked below).
            if error == .invalidArgument { throw .formatNotSupported("\(id) refused \(pixelFormat) \(size) (VIDIOC_S_FMT: \(error))") }
            throw device.failure(error, "VIDIOC_S_FMT \(pixelFormat) \(size)")
        }
        guard f.pixelFormat == pixelFormat, f.dimensions == size else {
            throw .formatNotSupported("\(id) gave \(f.pixelFormat) \(f.width)x\(f.height) when asked for \(pixelFormat) \(size)")
        }
        let minimumLine = pixelFormat.planes(width: size.width, height: size.height).first?.bytesPerRow ?? 0
        bytesPerLine = max(Int(f.bytesPerLine), minimumLine)

        // The interval after S_FMT (a new format can change it), then the one asked for.
        let parameters = try? system.getParameters(fd, type: .videoCapture)
        let canSetInterval = parameters?.canSetTimePerFrame ?? false
        let current = parameters.flatMap { V4L2Formats.duration($0.timePerFrame) }
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
        var asked = V4L2StreamParameters(canSetTimePerFrame: true, timePerFrame: V4L2Formats.fraction(frameDuration))
        do { try system.setParameters(fd, type: .videoCapture, &asked) } catch {
            throw device.failure(error, "VIDIOC_S_PARM \(frameDuration)")
        }
        guard let granted = V4L2Formats.duration(asked.timePerFrame), granted == frameDuration else {
            throw .formatNotSupported("\(id) gave frame duration \(V4L2Formats.duration(asked.timePerFrame).map { "\($0)" } ?? "?") when asked for \(frameDuration)")
        }
    }

    /// A failed streaming-setup call as the error the user can act on: gone → disconnected,
    /// EBUSY (another process streams from the node) → in use, anything else → start failed.
    private func startFailure(_ error: V4L2Errno, _ call: String) -> CaptureError {
        if error.meansDeviceGone { return device.disconnected() }
        if error == .busy { return .deviceInUse(id) }
        return .deviceStartFailed(device: id, reason: "\(call): \(error)")
    }

    private func allocateAndStream() throws(CaptureError) {
        setDriverPlanes()
        lendsBuffers = pixelFormat != .mjpeg && system.supportsOrphanedBuffers(fd, type: .videoCapture)
        generation += 1
        lent = 0
        let count: UInt32
        do { count = try system.requestBuffers(fd, type: .videoCapture, count: Self.bufferCount) } catch {
            throw startFailure(error, "VIDIOC_REQBUFS (mmap)")
        }
        guard count > 0 else { throw .deviceStartFailed(device: id, reason: "VIDIOC_REQBUFS (mmap): no buffers") }
        for index in 0..<count {
            let location: V4L2BufferLocation
            do { location = try system.queryBuffer(fd, type: .videoCapture, index: index) } catch {
                throw startFailure(error, "VIDIOC_QUERYBUF")
            }
            do { buffers.append(V4L2Mapping(try system.map(fd, location), system: system)) } catch {
                throw .deviceStartFailed(device: id, reason: "mmap of buffer \(index) failed: \(error)")
            }
            do { try system.queueBuffer(fd, type: .videoCapture, index: index) } catch {
                throw startFailure(error, "VIDIOC_QBUF")
            }
        }
        do { try system.streamOn(fd, type: .videoCapture) } catch {
            throw startFailure(error, "VIDIOC_STREAMON")
        }
        isStreaming = true
        pool = PixelBufferPool(format: pixelFormat, width: size.width, height: size.height)
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        while true {
            if stoppedFlag() { return nil }
            lock.lock()
            do throws(CaptureError) { try applyPendingLocked() } catch {
                lock.unlock()
                throw error
            }
            lock.unlock()
            pollLock.lock()
            if stoppedFlag() {
                pollLock.unlock()
                return nil
            }
            let polled = system.poll(fd, wake: wakePipe, timeoutMilliseconds: 250)
            pollLock.unlock()
            switch polled {
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
            case .sample(let s, let applied):
                for handler in applied { handler(s.presentationTime) }
                return s
            case .stopped: return nil
            case .again: continue
            }
        }
    }

    private enum Outcome { case sample(SampleBuffer, applied: [@Sendable (MediaTime) -> Void]), stopped, again }

    /// Takes a format or frame-duration change from its next frame (see `applyPendingLocked`).
    func reconfigure(_ change: StreamReconfiguration) throws(CaptureError) {
        guard let format = change.format.pixelFormat, let dimensions = change.format.dimensions else {
            throw .formatNotSupported("a V4L2 capture stream needs a video format, not \(change.format.formatDescription)")
        }
        lock.lock(); defer { lock.unlock() }
        guard !isStopped else { throw .invalidState("the V4L2 stream of \(id) has stopped") }
        pending = (format, dimensions, change.frameDuration, (pending?.applied ?? []) + [change.applied])
    }

    /// On the stream thread, between two dequeues: a rate change goes through VIDIOC_S_PARM while
    /// streaming where the driver takes it; anything else (a size or pixel format, or a driver that
    /// refuses S_PARM while streaming) restarts the queue in place — STREAMOFF → unmap →
    /// REQBUFS(0) → S_FMT/S_PARM → REQBUFS → mmap/QBUF → STREAMON — and the first frame after it
    /// reports the frames the gap lost as a discontinuity.
    private func applyPendingLocked() throws(CaptureError) {
        guard let change = pending, isStreaming, !isStopped else { return }
        pending = nil
        if change.pixelFormat == pixelFormat, change.size == size {
            if change.duration == frameDuration {
                waitingForFirstFrame += change.applied
                return
            }
            var asked = V4L2StreamParameters(canSetTimePerFrame: true, timePerFrame: V4L2Formats.fraction(change.duration))
            if (try? system.setParameters(fd, type: .videoCapture, &asked)) != nil,
               let granted = V4L2Formats.duration(asked.timePerFrame), granted == change.duration {
                frameDuration = granted
                waitingForFirstFrame += change.applied
                return
            }
        }
        try? system.streamOff(fd, type: .videoCapture)
        isStreaming = false
        buffers.removeAll()   // unmapped as the last frame borrowing each lets go (V4L2Mapping)
        _ = try? system.requestBuffers(fd, type: .videoCapture, count: 0)
        pixelFormat = change.pixelFormat
        size = change.size
        frameDuration = change.duration
        try configure()
        try allocateAndStream()
        lastSequence = nil
        restartedAfter = lastPTS
        sequenceOffset = lastSequenceNumber + 1
        waitingForFirstFrame += change.applied
    }

    private func stoppedFlag() -> Bool { lock.lock(); defer { lock.unlock() }; return isStopped }

    private func dequeueLocked() throws(CaptureError) -> Outcome {
        guard !isStopped, isStreaming else { return .stopped }
        queueGivenBackLocked()
        let b: V4L2DequeuedBuffer
        do { b = try system.dequeueBuffer(fd, type: .videoCapture) } catch {
            if error == .wouldBlock { return .again }
            // ENODEV: unplugged. EIO with the node gone is the same; otherwise a fatal stream error.
            if error.meansDeviceGone || !system.nodeExists(id) { throw device.disconnected() }
            throw .deviceStartFailed(device: id, reason: "streaming failed: VIDIOC_DQBUF: \(error)")
        }
        var requeue = true
        defer {
            if requeue { queueLocked(b.index) }
        }
        let pts = timestamp(of: b)
        let sequence = counted(b.sequence, at: pts)
        if let last = lastSequence, sequence > last &+ 1 {
            let count = Int(sequence &- last &- 1)
            noteLoss(count, .discontinuity)
            device.events.post(.samplesDropped(deviceID: id, reason: .discontinuity, count: count, presentationTime: pts))
        }
        lastSequence = sequence
        let used = b.bytesUsed == 0 ? b.length : b.bytesUsed
        let usable = Int(b.index) < buffers.count && !b.flags.contains(.error)
        let borrowed = usable ? lend(b.index, used: used) : nil
        if borrowed != nil { requeue = false }
        guard usable, let pixels = borrowed ?? convert(buffers[Int(b.index)].mapped.address, used: used) else {
            // Outputs see a lost frame (AVFoundation's reasons have no "corrupt"); the event says why.
            noteLoss(1, .discontinuity)
            device.events.post(.samplesDropped(deviceID: id, reason: .corruptData, count: 1, presentationTime: pts))
            return .again
        }
        if let before = restartedAfter {
            // The frames a restart lost: the gap in frame periods, less the one it would have taken anyway.
            let missed = Int(((pts - before).seconds / frameDuration.seconds).rounded()) - 1
            if missed > 0 {
                sequenceOffset += Int64(missed)
                noteLoss(missed, .discontinuity)
                device.events.post(.samplesDropped(deviceID: id, reason: .discontinuity, count: missed, presentationTime: pts))
            }
            restartedAfter = nil
        }
        lastPTS = pts
        lastSequenceNumber = sequenceOffset + Int64(sequence)
        let applied = waitingForFirstFrame
        waitingForFirstFrame = []
        defer { pendingLoss = nil }
        return .sample(SampleBuffer(payload: .pixels(pixels),
                                    formatDescription: .video(pixelFormat: pixels.format, dimensions: size),
                                    presentationTime: pts, duration: frameDuration, sequenceNumber: lastSequenceNumber,
                                    discontinuity: pendingLoss), applied: applied)
    }

    /// The frame's number as counted. A driver that repeats the last number on a frame with a later
    /// timestamp delivered a new frame, so it counts as the next number and the jump that follows is
    /// no loss: v4l2loopback 0.12 does this to a reader of a node an earlier writer used (seen in the
    /// VM: numbers 0, 0, 2, 3 … on frames whose stamps are consecutive). The same number with the
    /// same timestamp is the same frame again; a smaller number is a count that started over.
    private func counted(_ sequence: UInt32, at pts: MediaTime) -> UInt32 {
        guard let last = lastSequence, sequence == last, let before = lastPTS, pts > before else { return sequence }
        return last &+ 1
    }

    /// Adds lost frames to what the next sample reports.
    private func noteLoss(_ count: Int, _ reason: DropReason) {
        pendingLoss = Discontinuity(count: (pendingLoss?.count ?? 0) + count, reason: pendingLoss?.reason ?? reason)
    }

    /// The start of the frame on CLOCK_MONOTONIC: the driver's stamp when it is monotonic (minus
    /// one frame when it marks the end of the frame), otherwise the time we dequeued it.
    private func timestamp(of b: V4L2DequeuedBuffer) -> MediaTime {
        guard b.flags.isMonotonic else { return HostClock.now() - frameDuration }
        let stamp = MediaTime(value: b.timestampNanoseconds, timescale: 1_000_000_000)
        return b.flags.marksEndOfFrame ? stamp - frameDuration : stamp
    }

    private func queueLocked(_ index: UInt32) {
        do { try system.queueBuffer(fd, type: .videoCapture, index: index) } catch {
            if error.meansDeviceGone { device.markDisconnected() }
        }
    }

    /// Queues again the buffers frames gave back since the last dequeue (those of this generation:
    /// an older one's index names another buffer now, and its queue was freed).
    private func queueGivenBackLocked() {
        let back = givenBack.withLock { list in
            defer { list.removeAll() }
            return list
        }
        for entry in back where entry.generation == generation {
            lent -= 1
            queueLocked(entry.index)
        }
    }

    /// Each of the current format's planes in the driver's buffer: its line pitch and where it
    /// starts (once per format, not per frame).
    private func setDriverPlanes() {
        driverPitches.removeAll()
        driverOffsets.removeAll()
        var offset = 0
        for (plane, g) in pixelFormat.planes(width: size.width, height: size.height).enumerated() {
            let pitch: Int
            switch (pixelFormat, plane) {
            case (.yuv420, 1), (.yuv420, 2): pitch = bytesPerLine / 2
            default: pitch = bytesPerLine
            }
            driverPitches.append(pitch)
            driverOffsets.append(offset)
            offset += pitch * g.rows
        }
    }

    /// The frame over the driver's own buffer, or nil (copy it) when borrowing is off, the
    /// driver's layout is not a `PixelBuffer`'s, or half the buffers are already out: the driver
    /// always keeps the other half to fill, so a holder that keeps frames costs copies, not frames.
    private func lend(_ index: UInt32, used: Int) -> PixelBuffer? {
        guard lendsBuffers, lent < buffers.count / 2 else { return nil }
        let mapping = buffers[Int(index)]
        let generation = self.generation, givenBack = self.givenBack
        guard let pixels = PixelBuffer.borrowing(mapping.mapped.address, length: min(used, mapping.mapped.length),
                                                 format: pixelFormat, width: size.width, height: size.height,
                                                 bytesPerRow: driverPitches, planeOffsets: driverOffsets,
                                                 giveBack: {
                                                     // The mapping lives until its last frame is gone.
                                                     withExtendedLifetime(mapping) {}
                                                     givenBack.withLock { $0.append((generation, index)) }
                                                 }) else { return nil }
        lent += 1
        return pixels
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
        let geometry = pixelFormat.planes(width: size.width, height: size.height)
        for (plane, g) in geometry.enumerated() {
            let pitch = driverPitches[plane], start = source + driverOffsets[plane]
            guard driverOffsets[plane] + pitch * (g.rows - 1) + g.bytesPerRow <= used else { return nil }
            let destination = out.producerBaseAddress(ofPlane: plane)
            let stride = out.bytesPerRow[plane]
            for row in 0..<g.rows {
                (destination + row * stride).copyMemory(from: start + row * pitch, byteCount: g.bytesPerRow)
            }
        }
        return out
    }

    func stop() {
        lock.lock()
        let wasStopped = isStopped
        isStopped = true
        lock.unlock()
        if !wasStopped, let wakePipe { system.signalWake(wakePipe) }
        // A poll in progress returns at the wake-up; none starts after this (see `pollLock`).
        pollLock.lock()
        pollLock.unlock()
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
            try? system.streamOff(fd, type: .videoCapture)
            isStreaming = false
        }
        buffers.removeAll()   // unmapped as the last frame borrowing each lets go (V4L2Mapping)
        if hadResources { _ = try? system.requestBuffers(fd, type: .videoCapture, count: 0) }
        device.endStreaming()
    }
}

/// One driver buffer's mapping, unmapped when the last holder lets it go: the stream, and any frame
/// still borrowing it after a restart or stop (the queue keeps orphaned buffers' memory).
final class V4L2Mapping: @unchecked Sendable {  // unchecked: immutable mmap address after init; munmap once, in deinit
    let mapped: V4L2MappedBuffer
    private let system: any V4L2System

    init(_ mapped: V4L2MappedBuffer, system: any V4L2System) {
        self.mapped = mapped
        self.system = system
    }

    deinit { system.unmap(mapped) }
}
