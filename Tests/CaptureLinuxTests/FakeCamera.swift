import CV4L2
import CaptureCore
import Foundation
@testable import CaptureV4L2

/// A fake kernel for the V4L2 backend: one capture node (`/dev/video0`, YUYV and NV12 plus a Bayer
/// format the pipeline cannot take) and one output-only node (`/dev/video1`), with controls,
/// priorities, mmap buffers and a scripted sequence of frames (gaps, error flags) or a live one.
/// It records every call in a trace and fails any call with an injected errno (`inject`).
final class FakeCamera: V4L2System, @unchecked Sendable {
    // All mutable state lives in `state`; buffers are allocated once and freed in deinit.
    struct Frame { var sequence: UInt32; var timestampNs: Int64; var error = false; var fill: UInt8 }
    struct State {
        var fds: [Int32: String] = [:]
        var nextFD: Int32 = 10
        var priorityOwner: Int32?
        var format = (width: UInt32(640), height: UInt32(480), pixel: PixelFormat.yuyv)
        var interval = V4L2Fraction(numerator: 1, denominator: 30)
        var controls: [UInt32: Int32] = [:]
        var queued: [UInt32] = []
        var frames: [Frame] = []
        var streaming = false
        var disconnected = false
        /// Live mode: an endless camera whose frame n ends at `start + (n + 1) × period` on
        /// CLOCK_MONOTONIC (set at STREAMON), like a real device, instead of the scripted `frames`.
        var live: (periodNs: Int64, startNs: Int64, next: UInt32)?
        /// Buffers REQBUFS allocated (0 after REQBUFS(0)).
        var allocated: UInt32 = 0
        /// vb2's read() emulation, which a poll on a capture queue without buffers starts (as the
        /// kernel's vb2_poll does): its own buffers stream, so S_FMT and REQBUFS fail with EBUSY
        /// until the descriptor is closed.
        var fileIO = false
        var log = V4L2Trace()
    }
    /// Runs at the start of each poll, outside the fake's lock (a test holds a poll there).
    let beforePoll = Locked<(@Sendable () -> Void)?>(nil)
    /// Signalled by each REQBUFS(0).
    let buffersFreed = DispatchSemaphore(value: 0)
    let state = Locked(State())
    static let bytesPerLine = 1344   // padded pitch for 640-wide YUYV (1280 visible bytes)
    static let bufferLength = 1344 * 480
    private let memory: [UnsafeMutableRawPointer]
    /// The line pitch S_FMT reports (`bytesPerLine` unless a test asks for unpadded rows).
    let pitch: Int
    /// Whether REQBUFS reports V4L2_BUF_CAP_SUPPORTS_ORPHANED_BUFS (frames may borrow buffers).
    let keepsOrphanedBuffers: Bool

    init(frames: [Frame] = [], pitch: Int = FakeCamera.bytesPerLine, keepsOrphanedBuffers: Bool = false) {
        memory = (0..<4).map { _ in UnsafeMutableRawPointer.allocate(byteCount: FakeCamera.bufferLength, alignment: 64) }
        self.pitch = pitch
        self.keepsOrphanedBuffers = keepsOrphanedBuffers
        state.withLock { $0.frames = frames }
    }

    /// An endless camera delivering a frame every `1 / fps` s of real time once streaming.
    static func live(fps: Int64 = 30) -> FakeCamera {
        let camera = FakeCamera()
        camera.state.withLock { $0.live = (1_000_000_000 / fps, 0, 0) }
        return camera
    }

    static func monotonicNanoseconds() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
    }

    deinit { memory.forEach { $0.deallocate() } }

    static let cidDropped: UInt32 = 0x00f0_f000
    static let controlTable: [(id: UInt32, name: String, type: v4l2_ctrl_type, min: Int32, max: Int32, step: Int32, def: Int32)] = [
        (UInt32(V4L2_CID_BRIGHTNESS), "Brightness", V4L2_CTRL_TYPE_INTEGER, 0, 255, 1, 128),
        (UInt32(V4L2_CID_EXPOSURE_AUTO), "Auto Exposure", V4L2_CTRL_TYPE_MENU, 0, 3, 1, 3),
        (UInt32(V4L2_CID_EXPOSURE_ABSOLUTE), "Exposure Time, Absolute", V4L2_CTRL_TYPE_INTEGER, 3, 2047, 1, 250),
        (UInt32(V4L2_CID_FOCUS_ABSOLUTE), "Focus, Absolute", V4L2_CTRL_TYPE_INTEGER, 0, 250, 5, 0),
        (UInt32(V4L2_CID_ZOOM_ABSOLUTE), "Zoom, Absolute", V4L2_CTRL_TYPE_INTEGER, 100, 500, 1, 100),
        (cidDropped, "Percentage of Dropped Buffers", V4L2_CTRL_TYPE_INTEGER, 0, 100, 1, 0),
    ]
    static let exposureMenu: [UInt32: String] = [1: "Manual Mode", 3: "Aperture Priority Mode"]

    // MARK: Test controls

    /// The device goes away: its nodes vanish, calls on open descriptors fail with ENODEV and poll
    /// reports an error.
    func disconnect() { state.withLock { $0.disconnected = true } }

    /// Makes a call fail with `error`: the next one, the n-th from now, or every one from now on.
    func inject(_ call: V4L2Call, _ error: V4L2Errno, _ when: V4L2Trace.When = .next) {
        state.withLock { $0.log.inject(call, error, when) }
    }

    /// Lets calls of that kind (all kinds when nil) succeed again.
    func clearInjections(_ call: V4L2Call? = nil) { state.withLock { $0.log.clearFaults(call) } }

    /// Every call so far, in order, with its outcome.
    var trace: [V4L2TraceEntry] { state.withLock { $0.log.entries } }
    /// The trace without polling and without DQBUFs that found nothing (EAGAIN): the calls that
    /// configure, start and stop.
    var controlTrace: [V4L2TraceEntry] {
        trace.filter { $0.call != .poll && !($0.call == .dequeueBuffer && $0.error == .wouldBlock) }
    }
    func clearTrace() { state.withLock { $0.log.clear() } }
    /// How many calls of a kind succeeded (all outcomes when `succeeded` is false).
    func count(_ call: V4L2Call, succeeded: Bool = true) -> Int {
        trace.filter { $0.call == call && (!succeeded || $0.error == nil) }.count
    }
    var openDescriptors: Int { state.withLock { $0.fds.count } }

    /// Runs one call: records it, fails it with an injected error, or runs `body` on the state and
    /// records its outcome.
    private func enter<T: Sendable>(_ call: V4L2Call, _ fd: V4L2FileDescriptor?, _ detail: String = "",
                                    _ body: (inout State) throws(V4L2Errno) -> T) throws(V4L2Errno) -> T {
        try state.withLock { (s: inout State) throws(V4L2Errno) -> T in
            if let injected = s.log.injected(call) {
                s.log.record(call, fd, detail, injected)
                throw injected
            }
            do throws(V4L2Errno) {
                let result = try body(&s)
                s.log.record(call, fd, detail, nil)
                return result
            } catch {
                s.log.record(call, fd, detail, error)
                throw error
            }
        }
    }

    /// The node an open descriptor is on, or the errno a call on it fails with.
    private func node(_ s: State, _ fd: V4L2FileDescriptor) throws(V4L2Errno) -> String {
        guard let path = s.fds[fd.rawValue] else { throw .badDescriptor }
        if s.disconnected { throw .noDevice }
        return path
    }

    private func ownsPriority(_ s: State, _ fd: V4L2FileDescriptor) -> Bool {
        s.priorityOwner == nil || s.priorityOwner == fd.rawValue
    }

    // MARK: V4L2System

    func deviceNodes() -> [String] { ["/dev/video0", "/dev/video1"] }

    /// The fake's nodes exist until it is unplugged (the host has no /dev/video0).
    func nodeExists(_ path: String) -> Bool { state.withLock { !$0.disconnected } && deviceNodes().contains(path) }

    func open(_ path: String) throws(V4L2Errno) -> V4L2FileDescriptor {
        try enter(.open, nil, path) { s throws(V4L2Errno) in
            guard deviceNodes().contains(path), !s.disconnected else { throw .noSuchFile }
            s.nextFD += 1
            s.fds[s.nextFD] = path
            return V4L2FileDescriptor(rawValue: s.nextFD)
        }
    }

    func close(_ fd: V4L2FileDescriptor) {
        try? enter(.close, fd) { s throws(V4L2Errno) in
            guard s.fds.removeValue(forKey: fd.rawValue) != nil else { throw .badDescriptor }
            if s.priorityOwner == fd.rawValue { s.priorityOwner = nil }
            s.fileIO = false
        }
    }

    func queryCapability(_ fd: V4L2FileDescriptor) throws(V4L2Errno) -> V4L2Capability {
        try enter(.querycap, fd) { s throws(V4L2Errno) in
            let capture = try node(s, fd) == "/dev/video0"
            return V4L2Capability(driver: "fakecam", card: "Fake Camera", busInfo: "usb-0000:00:14.0-1",
                                  capabilities: [.deviceCapabilities, .videoCapture, .videoOutput],
                                  deviceCapabilities: capture ? [.videoCapture, .streaming] : [.videoOutput, .streaming])
        }
    }

    func enumerateFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> PixelFormat {
        try enter(.enumFormat, fd, "index \(index)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            let list = [PixelFormat.yuyv, PixelFormat(fourcc: "BA81"), PixelFormat.nv12]
            guard Int(index) < list.count else { throw .invalidArgument }
            return list[Int(index)]
        }
    }

    func enumerateFrameSize(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, index: UInt32) throws(V4L2Errno) -> V4L2FrameSize {
        try enter(.enumFrameSizes, fd, "\(pixelFormat) index \(index)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            if pixelFormat == .nv12 {
                guard index == 0 else { throw .invalidArgument }
                return .stepwise(minimum: Dimensions(width: 320, height: 240), maximum: Dimensions(width: 1280, height: 720),
                                 stepWidth: 16, stepHeight: 8)
            }
            let sizes = [Dimensions(width: 640, height: 480), Dimensions(width: 320, height: 240)]
            guard Int(index) < sizes.count else { throw .invalidArgument }
            return .discrete(sizes[Int(index)])
        }
    }

    func enumerateFrameInterval(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, size: Dimensions,
                                index: UInt32) throws(V4L2Errno) -> V4L2FrameInterval {
        try enter(.enumFrameIntervals, fd, "\(pixelFormat) \(size) index \(index)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            if pixelFormat == .nv12 {
                guard index == 0 else { throw .invalidArgument }
                return .stepwise(minimum: V4L2Fraction(numerator: 1, denominator: 60), maximum: V4L2Fraction(numerator: 1, denominator: 1),
                                 step: V4L2Fraction(numerator: 1, denominator: 1))
            }
            let rates: [UInt32] = [30, 15]
            guard Int(index) < rates.count else { throw .invalidArgument }
            return .discrete(V4L2Fraction(numerator: 1, denominator: rates[Int(index)]))
        }
    }

    private func current(_ s: State) -> V4L2ImageFormat {
        V4L2ImageFormat(width: s.format.width, height: s.format.height, pixelFormat: s.format.pixel,
                        bytesPerLine: UInt32(pitch), imageSize: UInt32(FakeCamera.bufferLength))
    }

    func getFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2ImageFormat {
        try enter(.getFormat, fd) { s throws(V4L2Errno) in
            _ = try node(s, fd)
            return current(s)
        }
    }

    func setFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ format: inout V4L2ImageFormat) throws(V4L2Errno) {
        let asked = format
        format = try enter(.setFormat, fd, "\(asked.pixelFormat) \(asked.width)x\(asked.height)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            guard ownsPriority(s, fd) else { throw .busy }
            guard !s.fileIO else { throw .busy }   // vivid: "vivid_s_fmt_vid_cap device busy"
            s.format = (asked.width, asked.height, asked.pixelFormat)
            return current(s)
        }
    }

    func getParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2StreamParameters {
        try enter(.getParameters, fd) { s throws(V4L2Errno) in
            _ = try node(s, fd)
            return V4L2StreamParameters(canSetTimePerFrame: true, timePerFrame: s.interval)
        }
    }

    func setParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ parameters: inout V4L2StreamParameters) throws(V4L2Errno) {
        let asked = parameters.timePerFrame
        parameters = try enter(.setParameters, fd, "\(asked.numerator)/\(asked.denominator)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            s.interval = asked
            // A live camera takes a new interval while streaming from the end of its last frame on.
            if let live = s.live, s.streaming, asked.numerator > 0, asked.denominator > 0 {
                let period = Int64(asked.numerator) * 1_000_000_000 / Int64(asked.denominator)
                let lastEnd = live.startNs + Int64(live.next) * live.periodNs
                s.live = (period, lastEnd - Int64(live.next) * period, live.next)
            }
            return V4L2StreamParameters(canSetTimePerFrame: true, timePerFrame: s.interval)
        }
    }

    func requestBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType, count: UInt32) throws(V4L2Errno) -> UInt32 {
        let granted = try enter(.requestBuffers, fd, "count \(count)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            guard !s.fileIO else { throw .busy }   // vb2: "file io in progress"
            s.allocated = min(count, UInt32(memory.count))
            return s.allocated
        }
        if count == 0 { buffersFreed.signal() }
        return granted
    }

    func supportsOrphanedBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType) -> Bool { keepsOrphanedBuffers }

    func queryBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> V4L2BufferLocation {
        try enter(.queryBuffer, fd, "index \(index)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            return V4L2BufferLocation(index: index, length: FakeCamera.bufferLength, offset: Int(index) * FakeCamera.bufferLength)
        }
    }

    func map(_ fd: V4L2FileDescriptor, _ location: V4L2BufferLocation) throws(V4L2Errno) -> V4L2MappedBuffer {
        let slot = try enter(.mmap, fd, "buffer \(location.index)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            let slot = location.offset / FakeCamera.bufferLength
            guard slot < memory.count else { throw .invalidArgument }
            return slot
        }
        return V4L2MappedBuffer(address: memory[slot], length: location.length)
    }

    func unmap(_ buffer: V4L2MappedBuffer) {
        let slot = memory.firstIndex(of: buffer.address)
        try? enter(.munmap, nil, slot.map { "buffer \($0)" } ?? "unknown") { _ throws(V4L2Errno) in
            guard slot != nil else { throw .invalidArgument }
        }
    }

    func queueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) {
        try enter(.queueBuffer, fd, "index \(index)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            s.queued.append(index)
        }
    }

    func streamOn(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) {
        try enter(.streamOn, fd) { s throws(V4L2Errno) in
            _ = try node(s, fd)
            s.streaming = true
            if let live = s.live {
                let period = s.interval.denominator > 0 ? Int64(s.interval.numerator) * 1_000_000_000 / Int64(s.interval.denominator) : live.periodNs
                s.live = (period, FakeCamera.monotonicNanoseconds(), 0)
            }
        }
    }

    func streamOff(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) {
        try enter(.streamOff, fd) { s throws(V4L2Errno) in
            _ = try node(s, fd)
            s.streaming = false
            s.queued.removeAll()
        }
    }

    func dequeueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2DequeuedBuffer {
        let (buffer, fill) = try enter(.dequeueBuffer, fd) { s throws(V4L2Errno) -> (V4L2DequeuedBuffer, UInt8) in
            _ = try node(s, fd)
            if let live = s.live, s.streaming {
                let end = live.startNs + Int64(live.next + 1) * live.periodNs
                guard end <= FakeCamera.monotonicNanoseconds() else { throw .wouldBlock }
                s.frames = [Frame(sequence: live.next, timestampNs: end, fill: UInt8(truncatingIfNeeded: 16 + live.next))]
                s.live = (live.periodNs, live.startNs, live.next + 1)
            }
            guard s.streaming, !s.frames.isEmpty, !s.queued.isEmpty else { throw .wouldBlock }
            let frame = s.frames.removeFirst()
            let index = s.queued.removeFirst()
            let flags: V4L2BufferFlags = [.timestampMonotonic, .timestampEndOfFrame]
            return (V4L2DequeuedBuffer(index: index, sequence: frame.sequence, bytesUsed: FakeCamera.bufferLength,
                                       length: FakeCamera.bufferLength, flags: frame.error ? flags.union(.error) : flags,
                                       timestampNanoseconds: frame.timestampNs / 1000 * 1000), frame.fill)
        }
        // Dequeued buffers belong to the caller until QBUF: filling it outside the lock is safe.
        memset(memory[Int(buffer.index)], Int32(fill), FakeCamera.bufferLength)
        return buffer
    }

    func queryControl(_ fd: V4L2FileDescriptor, id: UInt32, next: Bool) throws(V4L2Errno) -> V4L2ControlQuery {
        try enter(.queryControl, fd, next ? "after \(id)" : "\(id)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            let sorted = FakeCamera.controlTable.sorted { $0.id < $1.id }
            guard let c = next ? sorted.first(where: { $0.id > id }) : sorted.first(where: { $0.id == id }) else { throw .invalidArgument }
            return V4L2ControlQuery(id: c.id, type: c.type.rawValue, name: c.name, minimum: c.min, maximum: c.max, step: c.step,
                                    defaultValue: c.def, flags: 0)
        }
    }

    func queryMenu(_ fd: V4L2FileDescriptor, control: UInt32, index: UInt32) throws(V4L2Errno) -> V4L2MenuEntry {
        try enter(.queryMenu, fd, "\(control) index \(index)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            guard control == UInt32(V4L2_CID_EXPOSURE_AUTO), let name = FakeCamera.exposureMenu[index] else { throw .invalidArgument }
            return V4L2MenuEntry(name: name, value: 0)
        }
    }

    func getControl(_ fd: V4L2FileDescriptor, id: UInt32) throws(V4L2Errno) -> Int32 {
        try enter(.getControl, fd, "\(id)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            guard let entry = FakeCamera.controlTable.first(where: { $0.id == id }) else { throw .invalidArgument }
            return s.controls[id] ?? entry.def
        }
    }

    func setControl(_ fd: V4L2FileDescriptor, id: UInt32, value: Int32) throws(V4L2Errno) {
        try enter(.setControl, fd, "\(id) = \(value)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            guard FakeCamera.controlTable.contains(where: { $0.id == id }) else { throw .invalidArgument }
            guard ownsPriority(s, fd) else { throw .busy }
            s.controls[id] = value
        }
    }

    func setPriority(_ fd: V4L2FileDescriptor, _ priority: V4L2Priority) throws(V4L2Errno) {
        try enter(.setPriority, fd, "\(priority)") { s throws(V4L2Errno) in
            _ = try node(s, fd)
            if priority == .record {
                guard ownsPriority(s, fd) else { throw .busy }
                s.priorityOwner = fd.rawValue
            } else if s.priorityOwner == fd.rawValue {
                s.priorityOwner = nil
            }
        }
    }

    func poll(_ fd: V4L2FileDescriptor, wake: V4L2WakePipe?, timeoutMilliseconds: Int32) -> V4L2PollResult {
        beforePoll.withLock { $0 }?()
        state.withLock { s in
            // The kernel polls every descriptor of a poll(), the wake-up pipe's readiness aside.
            if s.fds[fd.rawValue] == "/dev/video0", s.allocated == 0, !s.streaming, !s.fileIO {
                s.fileIO = true
                s.log.record(.poll, fd, "started vb2 read() emulation (no buffers)", nil)
            }
        }
        let result = waitForEvent(wake: wake, timeoutMilliseconds: timeoutMilliseconds)
        state.withLock { $0.log.record(.poll, fd, "\(result)", nil) }
        return result
    }

    /// As the kernel's poll: at once when a buffer is done or the device is gone, else waiting on
    /// the wake-up pipe until the next live frame is due or the timeout passes (no busy loop).
    private func waitForEvent(wake: V4L2WakePipe?, timeoutMilliseconds: Int32) -> V4L2PollResult {
        if let wake, V4L2Syscalls.consumeWake(wake) { return .woken }
        let (gone, ready, liveWait) = state.withLock { s -> (Bool, Bool, Int64?) in
            guard let live = s.live, s.streaming else { return (s.disconnected, !s.frames.isEmpty, nil) }
            return (s.disconnected, false, live.startNs + Int64(live.next + 1) * live.periodNs - FakeCamera.monotonicNanoseconds())
        }
        if gone { return .failed }
        if ready { return .readable }
        let due = liveWait.map { Int32(clamping: max(0, $0) / 1_000_000) }
        let wait = min(due ?? timeoutMilliseconds, timeoutMilliseconds)
        if let wake {
            if V4L2Syscalls.waitForWake(wake, timeoutMilliseconds: wait) { return .woken }
        } else {
            usleep(UInt32(wait) * 1000)
        }
        if let due, due <= timeoutMilliseconds { return .readable }
        return state.withLock { $0.disconnected } ? .failed : .timedOut
    }

    func write(_ fd: V4L2FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws(V4L2Errno) -> Int {
        try enter(.write, fd, "\(bytes.count) bytes") { _ throws(V4L2Errno) in throw .inappropriateIoctl }
    }
}
