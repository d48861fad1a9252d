import CV4L2
import CaptureCore
import Foundation
@testable import CaptureV4L2

/// A fake kernel for the V4L2 backend: one capture node (`/dev/video0`, YUYV and NV12 plus a Bayer
/// format the pipeline cannot take) and one output-only node (`/dev/video1`), with controls,
/// priorities, mmap buffers and a scripted sequence of frames (gaps, error flags, failures).
final class FakeCamera: V4L2System, @unchecked Sendable {
    // All mutable state lives in `state`; buffers are allocated once and freed in deinit.
    struct Frame { var sequence: UInt32; var timestampNs: Int64; var error = false; var fill: UInt8 }
    struct State {
        var fds: [Int32: String] = [:]
        var nextFD: Int32 = 10
        var priorityOwner: Int32?
        var format = (width: UInt32(640), height: UInt32(480), pixel: PixelFormat.yuyv.rawValue)
        var interval = (num: UInt32(1), den: UInt32(30))
        var controls: [UInt32: Int32] = [:]
        var queued: [UInt32] = []
        var frames: [Frame] = []
        var streaming = false
        var failStreamOn = false
        /// The next DQBUF fails with this errno (once).
        var failDequeue: Int32?
        var disconnected = false
        /// Live mode: an endless camera whose frame n ends at `start + (n + 1) × period` on
        /// CLOCK_MONOTONIC (set at STREAMON), like a real device, instead of the scripted `frames`.
        var live: (periodNs: Int64, startNs: Int64, next: UInt32)?
    }
    let state = Locked(State())
    static let bytesPerLine = 1344   // padded pitch for 640-wide YUYV (1280 visible bytes)
    static let bufferLength = 1344 * 480
    private let memory: [UnsafeMutableRawPointer]

    init(frames: [Frame] = []) {
        memory = (0..<4).map { _ in UnsafeMutableRawPointer.allocate(byteCount: FakeCamera.bufferLength, alignment: 64) }
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

    func disconnect() { state.withLock { $0.disconnected = true } }

    func deviceNodes() -> [String] { ["/dev/video0", "/dev/video1"] }

    /// The fake's nodes exist until it is unplugged (the host has no /dev/video0).
    func nodeExists(_ path: String) -> Bool { state.withLock { !$0.disconnected } && deviceNodes().contains(path) }

    func open(_ path: String) -> Int32 {
        state.withLock { s in
            guard deviceNodes().contains(path) else { return -ENOENT }
            s.nextFD += 1
            s.fds[s.nextFD] = path
            return s.nextFD
        }
    }

    func close(_ fd: Int32) {
        state.withLock { s in
            s.fds[fd] = nil
            if s.priorityOwner == fd { s.priorityOwner = nil }
        }
    }

    func map(_ fd: Int32, length: Int, offset: Int) -> UnsafeMutableRawPointer? {
        offset / FakeCamera.bufferLength < memory.count ? memory[offset / FakeCamera.bufferLength] : nil
    }

    func unmap(_ address: UnsafeMutableRawPointer, length: Int) {}

    func poll(_ fd: Int32, wakeFD: Int32, timeoutMilliseconds: Int32) -> V4L2PollResult {
        var one: UInt8 = 0
        if read(wakeFD, &one, 1) == 1 { return .woken }
        let liveWait = state.withLock { s -> Int64? in
            guard let live = s.live, s.streaming, !s.disconnected else { return nil }
            return live.startNs + Int64(live.next + 1) * live.periodNs - FakeCamera.monotonicNanoseconds()
        }
        if let liveWait {
            // Wait for the next frame's end the way the kernel would: on the stream's wake-up pipe.
            let wait = Int32(clamping: max(0, liveWait) / 1_000_000)
            var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            if Glibc.poll(&fds, 1, min(wait, timeoutMilliseconds)) > 0 { _ = read(wakeFD, &one, 1); return .woken }
            return wait <= timeoutMilliseconds ? .readable : .timedOut
        }
        return state.withLock { s in
            if s.disconnected { return .failed }
            return s.frames.isEmpty ? .timedOut : .readable
        }
    }

    // swiftlint:disable:next cyclomatic_complexity
    func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        state.withLock { s -> Int32 in
            guard let path = s.fds[fd] else { return EBADF }
            if s.disconnected { return ENODEV }
            let capture = path == "/dev/video0"
            switch request {
            case V4L2Request.querycap:
                let cap = arg.assumingMemoryBound(to: v4l2_capability.self)
                cap.pointee = v4l2_capability()
                withUnsafeMutableBytes(of: &cap.pointee.card) { copyString("Fake Camera", into: $0) }
                withUnsafeMutableBytes(of: &cap.pointee.driver) { copyString("fakecam", into: $0) }
                withUnsafeMutableBytes(of: &cap.pointee.bus_info) { copyString("usb-0000:00:14.0-1", into: $0) }
                cap.pointee.capabilities = UInt32(V4L2_CAP_DEVICE_CAPS) | UInt32(V4L2_CAP_VIDEO_CAPTURE) | UInt32(V4L2_CAP_VIDEO_OUTPUT)
                cap.pointee.device_caps = capture ? UInt32(V4L2_CAP_VIDEO_CAPTURE) | UInt32(V4L2_CAP_STREAMING)
                                                  : UInt32(V4L2_CAP_VIDEO_OUTPUT) | UInt32(V4L2_CAP_STREAMING)
                return 0
            case V4L2Request.enumFormat:
                let d = arg.assumingMemoryBound(to: v4l2_fmtdesc.self)
                let list = [PixelFormat.yuyv, PixelFormat(fourcc: "BA81"), PixelFormat.nv12]
                guard Int(d.pointee.index) < list.count else { return EINVAL }
                d.pointee.pixelformat = list[Int(d.pointee.index)].rawValue
                return 0
            case V4L2Request.enumFrameSizes:
                let f = arg.assumingMemoryBound(to: v4l2_frmsizeenum.self)
                if f.pointee.pixel_format == PixelFormat.nv12.rawValue {
                    guard f.pointee.index == 0 else { return EINVAL }
                    f.pointee.type = V4L2_FRMSIZE_TYPE_STEPWISE.rawValue
                    f.pointee.stepwise = v4l2_frmsize_stepwise(min_width: 320, max_width: 1280, step_width: 16,
                                                                 min_height: 240, max_height: 720, step_height: 8)
                    return 0
                }
                let sizes: [(UInt32, UInt32)] = [(640, 480), (320, 240)]
                guard Int(f.pointee.index) < sizes.count else { return EINVAL }
                f.pointee.type = V4L2_FRMSIZE_TYPE_DISCRETE.rawValue
                f.pointee.discrete = v4l2_frmsize_discrete(width: sizes[Int(f.pointee.index)].0, height: sizes[Int(f.pointee.index)].1)
                return 0
            case V4L2Request.enumFrameIntervals:
                let f = arg.assumingMemoryBound(to: v4l2_frmivalenum.self)
                if f.pointee.pixel_format == PixelFormat.nv12.rawValue {
                    guard f.pointee.index == 0 else { return EINVAL }
                    f.pointee.type = V4L2_FRMIVAL_TYPE_CONTINUOUS.rawValue
                    f.pointee.stepwise = v4l2_frmival_stepwise(min: v4l2_fract(numerator: 1, denominator: 60),
                                                               max: v4l2_fract(numerator: 1, denominator: 1),
                                                               step: v4l2_fract(numerator: 1, denominator: 1))
                    return 0
                }
                let rates: [UInt32] = [30, 15]
                guard Int(f.pointee.index) < rates.count else { return EINVAL }
                f.pointee.type = V4L2_FRMIVAL_TYPE_DISCRETE.rawValue
                f.pointee.discrete = v4l2_fract(numerator: 1, denominator: rates[Int(f.pointee.index)])
                return 0
            case V4L2Request.getFormat, V4L2Request.setFormat:
                let f = arg.assumingMemoryBound(to: v4l2_format.self)
                if request == V4L2Request.setFormat {
                    if let owner = s.priorityOwner, owner != fd { return EBUSY }
                    s.format = (f.pointee.fmt.pix.width, f.pointee.fmt.pix.height, f.pointee.fmt.pix.pixelformat)
                }
                f.pointee.fmt.pix.width = s.format.width
                f.pointee.fmt.pix.height = s.format.height
                f.pointee.fmt.pix.pixelformat = s.format.pixel
                f.pointee.fmt.pix.bytesperline = UInt32(FakeCamera.bytesPerLine)
                f.pointee.fmt.pix.sizeimage = UInt32(FakeCamera.bufferLength)
                return 0
            case V4L2Request.getParameters, V4L2Request.setParameters:
                let p = arg.assumingMemoryBound(to: v4l2_streamparm.self)
                if request == V4L2Request.setParameters {
                    s.interval = (p.pointee.parm.capture.timeperframe.numerator, p.pointee.parm.capture.timeperframe.denominator)
                }
                p.pointee.parm.capture.capability = UInt32(V4L2_CAP_TIMEPERFRAME)
                p.pointee.parm.capture.timeperframe = v4l2_fract(numerator: s.interval.num, denominator: s.interval.den)
                return 0
            case V4L2Request.queryControl:
                let q = arg.assumingMemoryBound(to: v4l2_queryctrl.self)
                let wanted = q.pointee.id & ~UInt32(V4L2_CTRL_FLAG_NEXT_CTRL)
                let next = q.pointee.id & UInt32(V4L2_CTRL_FLAG_NEXT_CTRL) != 0
                let sorted = FakeCamera.controlTable.sorted { $0.id < $1.id }
                guard let c = next ? sorted.first(where: { $0.id > wanted }) : sorted.first(where: { $0.id == wanted }) else { return EINVAL }
                q.pointee = v4l2_queryctrl()
                q.pointee.id = c.id
                q.pointee.type = c.type.rawValue
                withUnsafeMutableBytes(of: &q.pointee.name) { copyString(c.name, into: $0) }
                q.pointee.minimum = c.min
                q.pointee.maximum = c.max
                q.pointee.step = c.step
                q.pointee.default_value = c.def
                return 0
            case V4L2Request.queryMenu:
                let m = arg.assumingMemoryBound(to: v4l2_querymenu.self)
                guard m.pointee.id == UInt32(V4L2_CID_EXPOSURE_AUTO), let name = FakeCamera.exposureMenu[m.pointee.index] else { return EINVAL }
                withUnsafeMutableBytes(of: &m.pointee.name) { copyString(name, into: $0) }
                return 0
            case V4L2Request.getControl, V4L2Request.setControl:
                let c = arg.assumingMemoryBound(to: v4l2_control.self)
                guard let entry = FakeCamera.controlTable.first(where: { $0.id == c.pointee.id }) else { return EINVAL }
                if request == V4L2Request.setControl {
                    if let owner = s.priorityOwner, owner != fd { return EBUSY }
                    s.controls[c.pointee.id] = c.pointee.value
                } else {
                    c.pointee.value = s.controls[c.pointee.id] ?? entry.def
                }
                return 0
            case V4L2Request.setPriority:
                let p = arg.assumingMemoryBound(to: UInt32.self).pointee
                if p == V4L2_PRIORITY_RECORD.rawValue {
                    if let owner = s.priorityOwner, owner != fd { return EBUSY }
                    s.priorityOwner = fd
                } else if s.priorityOwner == fd {
                    s.priorityOwner = nil
                }
                return 0
            case V4L2Request.requestBuffers:
                let r = arg.assumingMemoryBound(to: v4l2_requestbuffers.self)
                r.pointee.count = min(r.pointee.count, 4)
                return 0
            case V4L2Request.queryBuffer:
                let b = arg.assumingMemoryBound(to: v4l2_buffer.self)
                b.pointee.length = UInt32(FakeCamera.bufferLength)
                b.pointee.m.offset = b.pointee.index * UInt32(FakeCamera.bufferLength)
                return 0
            case V4L2Request.queueBuffer:
                s.queued.append(arg.assumingMemoryBound(to: v4l2_buffer.self).pointee.index)
                return 0
            case V4L2Request.streamOn:
                if s.failStreamOn { return EIO }
                s.streaming = true
                if let live = s.live { s.live = (live.periodNs, FakeCamera.monotonicNanoseconds(), 0) }
                return 0
            case V4L2Request.streamOff:
                s.streaming = false
                s.queued.removeAll()
                return 0
            case V4L2Request.dequeueBuffer:
                if let e = s.failDequeue {
                    s.failDequeue = nil
                    return e
                }
                if let live = s.live, s.streaming {
                    let end = live.startNs + Int64(live.next + 1) * live.periodNs
                    guard end <= FakeCamera.monotonicNanoseconds() else { return EAGAIN }
                    s.frames = [Frame(sequence: live.next, timestampNs: end, fill: UInt8(truncatingIfNeeded: 16 + live.next))]
                    s.live = (live.periodNs, live.startNs, live.next + 1)
                }
                guard s.streaming, !s.frames.isEmpty, !s.queued.isEmpty else { return EAGAIN }
                let frame = s.frames.removeFirst()
                let index = s.queued.removeFirst()
                memset(memory[Int(index)], Int32(frame.fill), FakeCamera.bufferLength)
                let b = arg.assumingMemoryBound(to: v4l2_buffer.self)
                b.pointee.index = index
                b.pointee.sequence = frame.sequence
                b.pointee.bytesused = UInt32(FakeCamera.bufferLength)
                b.pointee.flags = UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC) | UInt32(V4L2_BUF_FLAG_TSTAMP_SRC_EOF)
                    | (frame.error ? UInt32(V4L2_BUF_FLAG_ERROR) : 0)
                b.pointee.timestamp = timeval(tv_sec: Int(frame.timestampNs / 1_000_000_000),
                                              tv_usec: Int(frame.timestampNs % 1_000_000_000 / 1000))
                return 0
            default:
                return ENOTTY
            }
        }
    }
}

private func copyString(_ text: String, into raw: UnsafeMutableRawBufferPointer) {
    let bytes = Array(text.utf8.prefix(raw.count - 1))
    raw.copyBytes(from: bytes + [0])
}
