import CaptureCore
import CCaptureShims
import CV4L2
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The one file of raw calls (swift-system's `Internals/Syscalls.swift`): the only place in the V4L2
// backend that calls open/close/ioctl/mmap/munmap/poll/pipe/fcntl/read/write/access, knows an ioctl
// request number or fills a `v4l2_*` request struct. Everything above it is `V4L2System`.

/// The real kernel, through plain syscalls (not libv4l2: no hidden format conversion).
struct LinuxV4L2System: V4L2System {
    let directory: String

    init(directory: String = "/dev") { self.directory = directory }

    func deviceNodes() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name -> (Int, String)? in
            guard name.hasPrefix("video"), let n = Int(name.dropFirst(5)) else { return nil }
            return (n, directory + "/" + name)
        }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    func nodeExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    func open(_ path: String) throws(V4L2Errno) -> V4L2FileDescriptor {
        while true {
            let fd = Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            if fd >= 0 { return V4L2FileDescriptor(rawValue: fd) }
            let e = V4L2Errno(rawValue: errno)
            if e != .interrupted { throw e }
        }
    }

    func close(_ fd: V4L2FileDescriptor) { _ = Glibc.close(fd.rawValue) }

    func queryCapability(_ fd: V4L2FileDescriptor) throws(V4L2Errno) -> V4L2Capability {
        var cap = v4l2_capability()
        try V4L2Syscalls.ioctl(fd, V4L2Request.querycap, &cap)
        return V4L2Capability(driver: V4L2Syscalls.string(cap.driver), card: V4L2Syscalls.string(cap.card),
                              busInfo: V4L2Syscalls.string(cap.bus_info),
                              capabilities: V4L2CapabilityFlags(rawValue: cap.capabilities),
                              deviceCapabilities: V4L2CapabilityFlags(rawValue: cap.device_caps))
    }

    func enumerateFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> PixelFormat {
        var desc = v4l2_fmtdesc()
        desc.index = index
        desc.type = type.rawValue
        try V4L2Syscalls.ioctl(fd, V4L2Request.enumFormat, &desc)
        return PixelFormat(rawValue: desc.pixelformat)
    }

    func enumerateFrameSize(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, index: UInt32) throws(V4L2Errno) -> V4L2FrameSize {
        var fs = v4l2_frmsizeenum()
        fs.index = index
        fs.pixel_format = pixelFormat.rawValue
        try V4L2Syscalls.ioctl(fd, V4L2Request.enumFrameSizes, &fs)
        if fs.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
            return .discrete(Dimensions(width: Int(fs.discrete.width), height: Int(fs.discrete.height)))
        }
        let s = fs.stepwise
        return .stepwise(minimum: Dimensions(width: Int(s.min_width), height: Int(s.min_height)),
                         maximum: Dimensions(width: Int(s.max_width), height: Int(s.max_height)),
                         stepWidth: Int(s.step_width), stepHeight: Int(s.step_height))
    }

    func enumerateFrameInterval(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, size: Dimensions,
                                index: UInt32) throws(V4L2Errno) -> V4L2FrameInterval {
        var fi = v4l2_frmivalenum()
        fi.index = index
        fi.pixel_format = pixelFormat.rawValue
        fi.width = UInt32(size.width)
        fi.height = UInt32(size.height)
        try V4L2Syscalls.ioctl(fd, V4L2Request.enumFrameIntervals, &fi)
        if fi.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue { return .discrete(V4L2Fraction(fi.discrete)) }
        return .stepwise(minimum: V4L2Fraction(fi.stepwise.min), maximum: V4L2Fraction(fi.stepwise.max),
                         step: V4L2Fraction(fi.stepwise.step))
    }

    func getFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2ImageFormat {
        var f = v4l2_format()
        f.type = type.rawValue
        try V4L2Syscalls.ioctl(fd, V4L2Request.getFormat, &f)
        return V4L2ImageFormat(f.fmt.pix)
    }

    func setFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ format: inout V4L2ImageFormat) throws(V4L2Errno) {
        var f = v4l2_format()
        f.type = type.rawValue
        f.fmt.pix.width = format.width
        f.fmt.pix.height = format.height
        f.fmt.pix.pixelformat = format.pixelFormat.rawValue
        f.fmt.pix.field = V4L2_FIELD_NONE.rawValue
        try V4L2Syscalls.ioctl(fd, V4L2Request.setFormat, &f)
        format = V4L2ImageFormat(f.fmt.pix)
    }

    func getParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2StreamParameters {
        var parm = v4l2_streamparm()
        parm.type = type.rawValue
        try V4L2Syscalls.ioctl(fd, V4L2Request.getParameters, &parm)
        return V4L2StreamParameters(parm, type: type)
    }

    func setParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ parameters: inout V4L2StreamParameters) throws(V4L2Errno) {
        var parm = v4l2_streamparm()
        parm.type = type.rawValue
        // A capture queue keeps its other fields (capture mode, read buffers) as G_PARM has them.
        if type == .videoCapture { try? V4L2Syscalls.ioctl(fd, V4L2Request.getParameters, &parm) }
        let interval = v4l2_fract(numerator: parameters.timePerFrame.numerator, denominator: parameters.timePerFrame.denominator)
        switch type {
        case .videoCapture: parm.parm.capture.timeperframe = interval
        case .videoOutput: parm.parm.output.timeperframe = interval
        }
        try V4L2Syscalls.ioctl(fd, V4L2Request.setParameters, &parm)
        parameters = V4L2StreamParameters(parm, type: type)
    }

    func requestBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType, count: UInt32) throws(V4L2Errno) -> UInt32 {
        var req = v4l2_requestbuffers()
        req.count = count
        req.type = type.rawValue
        req.memory = V4L2_MEMORY_MMAP.rawValue
        try V4L2Syscalls.ioctl(fd, V4L2Request.requestBuffers, &req)
        return req.count
    }

    func queryBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> V4L2BufferLocation {
        var b = V4L2Syscalls.buffer(type, index: index)
        try V4L2Syscalls.ioctl(fd, V4L2Request.queryBuffer, &b)
        return V4L2BufferLocation(index: b.index, length: Int(b.length), offset: Int(b.m.offset))
    }

    func map(_ fd: V4L2FileDescriptor, _ location: V4L2BufferLocation) throws(V4L2Errno) -> V4L2MappedBuffer {
        let p = mmap(nil, location.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd.rawValue, off_t(location.offset))
        guard let p, p != MAP_FAILED else { throw V4L2Errno(rawValue: errno) }
        return V4L2MappedBuffer(address: p, length: location.length)
    }

    func unmap(_ buffer: V4L2MappedBuffer) { _ = munmap(buffer.address, buffer.length) }

    func supportsOrphanedBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType) -> Bool {
        var req = v4l2_requestbuffers()
        req.count = 0
        req.type = type.rawValue
        req.memory = V4L2_MEMORY_MMAP.rawValue
        guard (try? V4L2Syscalls.ioctl(fd, V4L2Request.requestBuffers, &req)) != nil else { return false }
        return req.capabilities & 0x10 != 0   // V4L2_BUF_CAP_SUPPORTS_ORPHANED_BUFS (1 << 4)
    }

    func queueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) {
        var b = V4L2Syscalls.buffer(type, index: index)
        try V4L2Syscalls.ioctl(fd, V4L2Request.queueBuffer, &b)
    }

    func dequeueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2DequeuedBuffer {
        var b = V4L2Syscalls.buffer(type, index: 0)
        try V4L2Syscalls.ioctl(fd, V4L2Request.dequeueBuffer, &b)
        return V4L2DequeuedBuffer(index: b.index, sequence: b.sequence, bytesUsed: Int(b.bytesused), length: Int(b.length),
                                  flags: V4L2BufferFlags(rawValue: b.flags),
                                  timestampNanoseconds: Int64(b.timestamp.tv_sec) * 1_000_000_000 + Int64(b.timestamp.tv_usec) * 1000)
    }

    func streamOn(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) {
        var t = Int32(type.rawValue)
        try V4L2Syscalls.ioctl(fd, V4L2Request.streamOn, &t)
    }

    func streamOff(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) {
        var t = Int32(type.rawValue)
        try V4L2Syscalls.ioctl(fd, V4L2Request.streamOff, &t)
    }

    func queryControl(_ fd: V4L2FileDescriptor, id: UInt32, next: Bool) throws(V4L2Errno) -> V4L2ControlQuery {
        var q = v4l2_queryctrl()
        q.id = next ? id | UInt32(V4L2_CTRL_FLAG_NEXT_CTRL) : id
        try V4L2Syscalls.ioctl(fd, V4L2Request.queryControl, &q)
        return V4L2ControlQuery(id: q.id, type: q.type, name: V4L2Syscalls.string(q.name), minimum: q.minimum, maximum: q.maximum,
                                step: q.step, defaultValue: q.default_value, flags: q.flags)
    }

    func queryMenu(_ fd: V4L2FileDescriptor, control: UInt32, index: UInt32) throws(V4L2Errno) -> V4L2MenuEntry {
        var m = v4l2_querymenu()
        m.id = control
        m.index = index
        try V4L2Syscalls.ioctl(fd, V4L2Request.queryMenu, &m)
        return V4L2MenuEntry(name: V4L2Syscalls.string(m.name), value: m.value)
    }

    func getControl(_ fd: V4L2FileDescriptor, id: UInt32) throws(V4L2Errno) -> Int32 {
        var c = v4l2_control(id: id, value: 0)
        try V4L2Syscalls.ioctl(fd, V4L2Request.getControl, &c)
        return c.value
    }

    func setControl(_ fd: V4L2FileDescriptor, id: UInt32, value: Int32) throws(V4L2Errno) {
        var c = v4l2_control(id: id, value: value)
        try V4L2Syscalls.ioctl(fd, V4L2Request.setControl, &c)
    }

    func setPriority(_ fd: V4L2FileDescriptor, _ priority: V4L2Priority) throws(V4L2Errno) {
        var p = priority.rawValue
        try V4L2Syscalls.ioctl(fd, V4L2Request.setPriority, &p)
    }

    func poll(_ fd: V4L2FileDescriptor, wake: V4L2WakePipe?, timeoutMilliseconds: Int32) -> V4L2PollResult {
        var fds = [pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wake?.read ?? -1, events: Int16(POLLIN), revents: 0)]
        let n = Glibc.poll(&fds, 2, timeoutMilliseconds)
        if n < 0 { return errno == EINTR ? .timedOut : .failed }
        if n == 0 { return .timedOut }
        if fds[1].revents & Int16(POLLIN) != 0 { return .woken }
        if fds[0].revents & Int16(POLLIN) != 0 { return .readable }
        if fds[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return .failed }
        return .timedOut
    }

    func write(_ fd: V4L2FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws(V4L2Errno) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        while true {
            let n = Glibc.write(fd.rawValue, base, bytes.count)
            if n >= 0 { return n }
            let e = V4L2Errno(rawValue: errno)
            if e == .interrupted { continue }
            guard e == .wouldBlock else { throw e }
            // Non-blocking descriptor and a full queue: wait up to 1 s for room, once per frame.
            var p = pollfd(fd: fd.rawValue, events: Int16(POLLOUT), revents: 0)
            if Glibc.poll(&p, 1, 1000) <= 0 { throw .wouldBlock }
        }
    }
}

/// The raw calls themselves, shared by `LinuxV4L2System` and the protocol's wake-pipe defaults.
enum V4L2Syscalls {
    /// One ioctl with a struct argument, retried on EINTR; throws the errno.
    @inline(__always)
    static func ioctl<T>(_ fd: V4L2FileDescriptor, _ request: UInt, _ value: inout T) throws(V4L2Errno) {
        while true {
            let r = withUnsafeMutablePointer(to: &value) { Glibc.ioctl(fd.rawValue, request, UnsafeMutableRawPointer($0)) }
            if r == 0 { return }
            let e = V4L2Errno(rawValue: errno)
            if e != .interrupted { throw e }
        }
    }

    /// A `v4l2_buffer` naming an mmap buffer of a queue.
    static func buffer(_ type: V4L2BufferType, index: UInt32) -> v4l2_buffer {
        var b = v4l2_buffer()
        b.index = index
        b.type = type.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        return b
    }

    /// A C fixed-size char array (imported as a tuple) as a Swift string.
    static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
    }

    static func makeWakePipe() -> V4L2WakePipe? {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for f in fds { _ = fcntl(f, F_SETFL, O_NONBLOCK); _ = fcntl(f, F_SETFD, FD_CLOEXEC) }
        return V4L2WakePipe(read: fds[0], write: fds[1])
    }

    static func signalWake(_ pipe: V4L2WakePipe) {
        var one: UInt8 = 1
        _ = Glibc.write(pipe.write, &one, 1)
    }

    /// Takes one pending wake-up signal off the pipe; true when there was one.
    static func consumeWake(_ pipe: V4L2WakePipe) -> Bool {
        var one: UInt8 = 0
        return Glibc.read(pipe.read, &one, 1) == 1
    }

    /// Waits up to `timeoutMilliseconds` for a wake-up signal (and takes it); true when one came.
    static func waitForWake(_ pipe: V4L2WakePipe, timeoutMilliseconds: Int32) -> Bool {
        var fds = [pollfd(fd: pipe.read, events: Int16(POLLIN), revents: 0)]
        return Glibc.poll(&fds, 1, timeoutMilliseconds) > 0 && consumeWake(pipe)
    }

    static func closeWakePipe(_ pipe: V4L2WakePipe) {
        _ = Glibc.close(pipe.read)
        _ = Glibc.close(pipe.write)
    }
}

/// The ioctl request numbers (macros Swift cannot import, from CCaptureShims).
enum V4L2Request {
    static let querycap = ck_vidioc_querycap()
    static let enumFormat = ck_vidioc_enum_fmt()
    static let enumFrameSizes = ck_vidioc_enum_framesizes()
    static let enumFrameIntervals = ck_vidioc_enum_frameintervals()
    static let setFormat = ck_vidioc_s_fmt()
    static let getFormat = ck_vidioc_g_fmt()
    static let setParameters = ck_vidioc_s_parm()
    static let getParameters = ck_vidioc_g_parm()
    static let requestBuffers = ck_vidioc_reqbufs()
    static let queryBuffer = ck_vidioc_querybuf()
    static let queueBuffer = ck_vidioc_qbuf()
    static let dequeueBuffer = ck_vidioc_dqbuf()
    static let streamOn = ck_vidioc_streamon()
    static let streamOff = ck_vidioc_streamoff()
    static let queryControl = ck_vidioc_queryctrl()
    static let getControl = ck_vidioc_g_ctrl()
    static let setControl = ck_vidioc_s_ctrl()
    static let setPriority = ck_vidioc_s_priority()
    static let queryMenu = ck_vidioc_querymenu()
}

private extension V4L2Fraction {
    init(_ f: v4l2_fract) { self.init(numerator: f.numerator, denominator: f.denominator) }
}

private extension V4L2ImageFormat {
    init(_ pix: v4l2_pix_format) {
        self.init(width: pix.width, height: pix.height, pixelFormat: PixelFormat(rawValue: pix.pixelformat),
                  bytesPerLine: pix.bytesperline, imageSize: pix.sizeimage)
    }
}

private extension V4L2StreamParameters {
    init(_ parm: v4l2_streamparm, type: V4L2BufferType) {
        switch type {
        case .videoCapture:
            self.init(canSetTimePerFrame: parm.parm.capture.capability & UInt32(V4L2_CAP_TIMEPERFRAME) != 0,
                      timePerFrame: V4L2Fraction(parm.parm.capture.timeperframe))
        case .videoOutput:
            self.init(canSetTimePerFrame: parm.parm.output.capability & UInt32(V4L2_CAP_TIMEPERFRAME) != 0,
                      timePerFrame: V4L2Fraction(parm.parm.output.timeperframe))
        }
    }
}
