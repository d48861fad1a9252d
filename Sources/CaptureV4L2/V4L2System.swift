import CCaptureShims
import CV4L2
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What `V4L2System.poll` saw.
public enum V4L2PollResult: Sendable, Equatable {
    /// A buffer can be dequeued.
    case readable
    /// The device reported an error or hang-up (unplugged, fatal streaming error).
    case failed
    /// The stream's wake-up descriptor fired (stop was requested).
    case woken
    case timedOut
}

/// The kernel calls the V4L2 backend makes, behind one protocol so host tests can stand a fake
/// camera in for the kernel. Conventions follow the syscalls: `open` returns a descriptor or
/// −errno, `ioctl` returns 0 or errno.
public protocol V4L2System: Sendable {
    /// Candidate nodes (`/dev/video0`, `/dev/video1`, …) in numeric order.
    func deviceNodes() -> [String]
    func open(_ path: String) -> Int32
    func close(_ fd: Int32)
    func ioctl(_ fd: Int32, _ request: UInt, _ argument: UnsafeMutableRawPointer) -> Int32
    func map(_ fd: Int32, length: Int, offset: Int) -> UnsafeMutableRawPointer?
    func unmap(_ address: UnsafeMutableRawPointer, length: Int)
    /// Waits until `fd` has a buffer or an error, or `wakeFD` is readable, for at most `timeoutMilliseconds`.
    func poll(_ fd: Int32, wakeFD: Int32, timeoutMilliseconds: Int32) -> V4L2PollResult
    /// Writes one frame to an output node (read/write I/O); bytes written or −errno.
    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int
    /// Whether a node is still there (`access(path, F_OK)`): a failed call on a gone node is an unplug.
    func nodeExists(_ path: String) -> Bool
    /// A non-blocking, close-on-exec pipe whose read end `poll` watches as `wakeFD`; nil if none can be made.
    func makeWakePipe() -> V4L2WakePipe?
    /// Makes a `poll` on the pipe return `.woken` (one byte into its write end).
    func signalWake(_ pipe: V4L2WakePipe)
    func closeWakePipe(_ pipe: V4L2WakePipe)
}

/// The two ends of a stream's wake-up pipe.
public struct V4L2WakePipe: Sendable, Hashable {
    public var read: Int32
    public var write: Int32
    public init(read: Int32, write: Int32) {
        self.read = read
        self.write = write
    }
}

extension V4L2System {
    /// Fakes without output nodes need not implement writing.
    public func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int { -Int(ENOSYS) }

    // The wake-up pipe and the node check default to the real system calls: a fake's `poll` can
    // watch a real pipe, and one that models unplugging overrides `nodeExists`.
    public func nodeExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    public func makeWakePipe() -> V4L2WakePipe? {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for f in fds { _ = fcntl(f, F_SETFL, O_NONBLOCK); _ = fcntl(f, F_SETFD, FD_CLOEXEC) }
        return V4L2WakePipe(read: fds[0], write: fds[1])
    }

    public func signalWake(_ pipe: V4L2WakePipe) {
        var one: UInt8 = 1
        _ = Glibc.write(pipe.write, &one, 1)
    }

    public func closeWakePipe(_ pipe: V4L2WakePipe) {
        _ = Glibc.close(pipe.read)
        _ = Glibc.close(pipe.write)
    }
}

/// The real kernel, through plain syscalls (not libv4l2: no hidden format conversion).
public struct LinuxV4L2System: V4L2System {
    public let directory: String

    public init(directory: String = "/dev") { self.directory = directory }

    public func deviceNodes() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name -> (Int, String)? in
            guard name.hasPrefix("video"), let n = Int(name.dropFirst(5)) else { return nil }
            return (n, directory + "/" + name)
        }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    public func open(_ path: String) -> Int32 {
        let fd = Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        return fd >= 0 ? fd : -errno
    }

    public func close(_ fd: Int32) { _ = Glibc.close(fd) }

    public func ioctl(_ fd: Int32, _ request: UInt, _ argument: UnsafeMutableRawPointer) -> Int32 {
        while true {
            if Glibc.ioctl(fd, request, argument) == 0 { return 0 }
            let e = errno
            if e != EINTR { return e }
        }
    }

    public func map(_ fd: Int32, length: Int, offset: Int) -> UnsafeMutableRawPointer? {
        let p = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset))
        return p == MAP_FAILED ? nil : p
    }

    public func unmap(_ address: UnsafeMutableRawPointer, length: Int) { _ = munmap(address, length) }

    public func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        while true {
            let n = Glibc.write(fd, base, bytes.count)
            if n >= 0 { return n }
            let e = errno
            if e == EINTR { continue }
            guard e == EAGAIN else { return -Int(e) }
            // Non-blocking descriptor and a full queue: wait up to 1 s for room, once per frame.
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if Glibc.poll(&p, 1, 1000) <= 0 { return -Int(EAGAIN) }
        }
    }

    public func poll(_ fd: Int32, wakeFD: Int32, timeoutMilliseconds: Int32) -> V4L2PollResult {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        let n = Glibc.poll(&fds, 2, timeoutMilliseconds)
        if n < 0 { return errno == EINTR ? .timedOut : .failed }
        if n == 0 { return .timedOut }
        if fds[1].revents & Int16(POLLIN) != 0 { return .woken }
        if fds[0].revents & Int16(POLLIN) != 0 { return .readable }
        if fds[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return .failed }
        return .timedOut
    }
}

/// The ioctl request numbers (macros Swift cannot import, from CCaptureShims).
public enum V4L2Request {
    public static let querycap = ck_vidioc_querycap()
    public static let enumFormat = ck_vidioc_enum_fmt()
    public static let enumFrameSizes = ck_vidioc_enum_framesizes()
    public static let enumFrameIntervals = ck_vidioc_enum_frameintervals()
    public static let setFormat = ck_vidioc_s_fmt()
    public static let getFormat = ck_vidioc_g_fmt()
    public static let setParameters = ck_vidioc_s_parm()
    public static let getParameters = ck_vidioc_g_parm()
    public static let requestBuffers = ck_vidioc_reqbufs()
    public static let queryBuffer = ck_vidioc_querybuf()
    public static let queueBuffer = ck_vidioc_qbuf()
    public static let dequeueBuffer = ck_vidioc_dqbuf()
    public static let streamOn = ck_vidioc_streamon()
    public static let streamOff = ck_vidioc_streamoff()
    public static let queryControl = ck_vidioc_queryctrl()
    public static let getControl = ck_vidioc_g_ctrl()
    public static let setControl = ck_vidioc_s_ctrl()
    public static let setPriority = ck_vidioc_s_priority()
    public static let getPriority = ck_vidioc_g_priority()
    public static let queryMenu = ck_vidioc_querymenu()
}

/// Calls an ioctl with a struct argument; 0 or errno.
@inline(__always)
func xioctl<T>(_ system: any V4L2System, _ fd: Int32, _ request: UInt, _ value: inout T) -> Int32 {
    withUnsafeMutablePointer(to: &value) { system.ioctl(fd, request, UnsafeMutableRawPointer($0)) }
}

/// A C fixed-size char array (imported as a tuple) as a Swift string.
func cString<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
        let bytes = raw.prefix { $0 != 0 }
        return String(decoding: bytes, as: UTF8.self)
    }
}

func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }
