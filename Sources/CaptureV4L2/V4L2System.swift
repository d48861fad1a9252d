import CaptureCore
import CV4L2
#if canImport(Glibc)
import Glibc
#endif

/// The kernel calls the V4L2 backend makes, one typed operation per system call or ioctl, so host
/// tests can stand a fake kernel in (`FakeCamera`, `FakeLoopback`) and nothing above this protocol
/// builds a request number, a `v4l2_*` request struct or a raw pointer argument (swift-system's
/// style: the raw calls live in `V4L2Syscalls.swift` alone).
///
/// Every call that can fail throws its `V4L2Errno`; retrying on EINTR is the implementation's job.
/// Operations that take a buffer type do so for the two queues the backend uses (capture for
/// cameras, output for the loopback sink); buffers are always memory-mapped (`V4L2_MEMORY_MMAP`).
protocol V4L2System: Sendable {
    /// Candidate nodes (`/dev/video0`, `/dev/video1`, …) in numeric order.
    func deviceNodes() -> [String]
    /// Whether a node is still there (`access(path, F_OK)`): a failed call on a gone node is an unplug.
    func nodeExists(_ path: String) -> Bool

    /// `open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)`
    func open(_ path: String) throws(V4L2Errno) -> V4L2FileDescriptor
    /// `close`
    func close(_ fd: V4L2FileDescriptor)

    /// `VIDIOC_QUERYCAP`
    func queryCapability(_ fd: V4L2FileDescriptor) throws(V4L2Errno) -> V4L2Capability
    /// `VIDIOC_ENUM_FMT`: the pixel format at `index` (EINVAL past the last one).
    func enumerateFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> PixelFormat
    /// `VIDIOC_ENUM_FRAMESIZES` (EINVAL past the last one).
    func enumerateFrameSize(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, index: UInt32) throws(V4L2Errno) -> V4L2FrameSize
    /// `VIDIOC_ENUM_FRAMEINTERVALS` (EINVAL past the last one).
    func enumerateFrameInterval(_ fd: V4L2FileDescriptor, pixelFormat: PixelFormat, size: Dimensions,
                                index: UInt32) throws(V4L2Errno) -> V4L2FrameInterval
    /// `VIDIOC_G_FMT` (single-planar)
    func getFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2ImageFormat
    /// `VIDIOC_S_FMT` (single-planar, progressive); `format` becomes what the driver granted.
    func setFormat(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ format: inout V4L2ImageFormat) throws(V4L2Errno)
    /// `VIDIOC_G_PARM`
    func getParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2StreamParameters
    /// `VIDIOC_S_PARM`: asks for `parameters.timePerFrame`; `parameters` becomes what the driver granted.
    func setParameters(_ fd: V4L2FileDescriptor, type: V4L2BufferType, _ parameters: inout V4L2StreamParameters) throws(V4L2Errno)
    /// `VIDIOC_REQBUFS` (mmap): the number of buffers granted (0 frees them).
    func requestBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType, count: UInt32) throws(V4L2Errno) -> UInt32
    /// `VIDIOC_QUERYBUF` (mmap): where buffer `index` is mapped from.
    func queryBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno) -> V4L2BufferLocation
    /// `mmap(PROT_READ | PROT_WRITE, MAP_SHARED)` of a buffer `queryBuffer` located.
    func map(_ fd: V4L2FileDescriptor, _ location: V4L2BufferLocation) throws(V4L2Errno) -> V4L2MappedBuffer
    /// `munmap`
    func unmap(_ buffer: V4L2MappedBuffer)
    /// Whether the queue keeps a buffer's memory mapped after `VIDIOC_REQBUFS(0)` frees the queue
    /// (`V4L2_BUF_CAP_SUPPORTS_ORPHANED_BUFS`, vb2 drivers since Linux 5.0), asked with
    /// `REQBUFS(0)` before any buffer is requested. Only then may frames borrow the driver's buffers.
    func supportsOrphanedBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType) -> Bool
    /// `VIDIOC_QBUF` (mmap)
    func queueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType, index: UInt32) throws(V4L2Errno)
    /// `VIDIOC_DQBUF` (mmap); EAGAIN when no buffer is done yet (the descriptor is non-blocking).
    func dequeueBuffer(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno) -> V4L2DequeuedBuffer
    /// `VIDIOC_STREAMON`
    func streamOn(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno)
    /// `VIDIOC_STREAMOFF`
    func streamOff(_ fd: V4L2FileDescriptor, type: V4L2BufferType) throws(V4L2Errno)
    /// `VIDIOC_QUERYCTRL`: the control `id`, or with `next` the first control after it
    /// (`V4L2_CTRL_FLAG_NEXT_CTRL`; EINVAL past the last one).
    func queryControl(_ fd: V4L2FileDescriptor, id: UInt32, next: Bool) throws(V4L2Errno) -> V4L2ControlQuery
    /// `VIDIOC_QUERYMENU`
    func queryMenu(_ fd: V4L2FileDescriptor, control: UInt32, index: UInt32) throws(V4L2Errno) -> V4L2MenuEntry
    /// `VIDIOC_G_CTRL`
    func getControl(_ fd: V4L2FileDescriptor, id: UInt32) throws(V4L2Errno) -> Int32
    /// `VIDIOC_S_CTRL`
    func setControl(_ fd: V4L2FileDescriptor, id: UInt32, value: Int32) throws(V4L2Errno)
    /// `VIDIOC_S_PRIORITY`
    func setPriority(_ fd: V4L2FileDescriptor, _ priority: V4L2Priority) throws(V4L2Errno)

    /// Waits until `fd` has a buffer or an error, or `wake` is signalled, for at most `timeoutMilliseconds`.
    func poll(_ fd: V4L2FileDescriptor, wake: V4L2WakePipe?, timeoutMilliseconds: Int32) -> V4L2PollResult
    /// One `write()` of a frame to an output node (read/write I/O): the bytes written. A full queue
    /// on the non-blocking descriptor waits up to 1 s for room, then throws EAGAIN.
    func write(_ fd: V4L2FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws(V4L2Errno) -> Int

    /// A non-blocking, close-on-exec pipe whose read end `poll` watches; nil if none can be made.
    func makeWakePipe() -> V4L2WakePipe?
    /// Makes a `poll` on the pipe return `.woken` (one byte into its write end).
    func signalWake(_ pipe: V4L2WakePipe)
    func closeWakePipe(_ pipe: V4L2WakePipe)
}

extension V4L2System {
    func supportsOrphanedBuffers(_ fd: V4L2FileDescriptor, type: V4L2BufferType) -> Bool { false }
    // The wake-up pipe defaults to the real one: a fake's `poll` can watch a real pipe.
    func makeWakePipe() -> V4L2WakePipe? { V4L2Syscalls.makeWakePipe() }
    func signalWake(_ pipe: V4L2WakePipe) { V4L2Syscalls.signalWake(pipe) }
    func closeWakePipe(_ pipe: V4L2WakePipe) { V4L2Syscalls.closeWakePipe(pipe) }
}

// MARK: Values

/// An errno from a V4L2 system call (swift-system's `Errno`, for this backend): callers above the
/// seam never see a raw `Int32` result.
struct V4L2Errno: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32
    init(rawValue: Int32) { self.rawValue = rawValue }

    /// `EBUSY`: another file handle streams, holds the priority, or owns the queue.
    static let busy = V4L2Errno(rawValue: EBUSY)
    /// `EINVAL`: a request the driver refuses (also: past the end of an enumeration).
    static let invalidArgument = V4L2Errno(rawValue: EINVAL)
    /// `ENODEV`: the device went away (unplugged, driver unbound).
    static let noDevice = V4L2Errno(rawValue: ENODEV)
    /// `ENXIO`: no such device or address (a node whose device is gone).
    static let noSuchDeviceOrAddress = V4L2Errno(rawValue: ENXIO)
    /// `ENOENT`: no such node.
    static let noSuchFile = V4L2Errno(rawValue: ENOENT)
    /// `EAGAIN`: nothing ready yet on a non-blocking descriptor.
    static let wouldBlock = V4L2Errno(rawValue: EAGAIN)
    /// `EIO`: the driver failed the operation.
    static let ioError = V4L2Errno(rawValue: EIO)
    /// `EACCES`
    static let accessDenied = V4L2Errno(rawValue: EACCES)
    /// `EPERM`
    static let notPermitted = V4L2Errno(rawValue: EPERM)
    /// `EBADF`
    static let badDescriptor = V4L2Errno(rawValue: EBADF)
    /// `ENOTTY`: the driver does not implement this ioctl.
    static let inappropriateIoctl = V4L2Errno(rawValue: ENOTTY)
    /// `EINTR`
    static let interrupted = V4L2Errno(rawValue: EINTR)
    /// `ENOSYS`
    static let noFunction = V4L2Errno(rawValue: ENOSYS)

    /// ENODEV or ENXIO: what a call on an unplugged device fails with.
    var meansDeviceGone: Bool { self == .noDevice || self == .noSuchDeviceOrAddress }

    /// The C library's text for the code (`strerror`).
    var description: String { String(cString: strerror(rawValue)) }
}

/// An open descriptor on a V4L2 node.
struct V4L2FileDescriptor: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32
    init(rawValue: Int32) { self.rawValue = rawValue }
    var description: String { "fd \(rawValue)" }
}

/// `enum v4l2_buf_type`, for the two queues the backend uses.
enum V4L2BufferType: UInt32, Sendable, Hashable {
    /// `V4L2_BUF_TYPE_VIDEO_CAPTURE`
    case videoCapture = 1
    /// `V4L2_BUF_TYPE_VIDEO_OUTPUT`
    case videoOutput = 2
}

/// `V4L2_PRIORITY_*`, for the two the backend sets.
enum V4L2Priority: UInt32, Sendable, Hashable {
    /// `V4L2_PRIORITY_DEFAULT` (interactive)
    case `default` = 2
    /// `V4L2_PRIORITY_RECORD`: no other handle may change the configuration.
    case record = 3
}

/// `V4L2_CAP_*` flags.
struct V4L2CapabilityFlags: OptionSet, Hashable, Sendable {
    let rawValue: UInt32
    init(rawValue: UInt32) { self.rawValue = rawValue }
    /// `V4L2_CAP_VIDEO_CAPTURE` (single-planar)
    static let videoCapture = V4L2CapabilityFlags(rawValue: UInt32(V4L2_CAP_VIDEO_CAPTURE))
    /// `V4L2_CAP_VIDEO_OUTPUT` (single-planar)
    static let videoOutput = V4L2CapabilityFlags(rawValue: UInt32(V4L2_CAP_VIDEO_OUTPUT))
    /// `V4L2_CAP_READWRITE`
    static let readWrite = V4L2CapabilityFlags(rawValue: UInt32(V4L2_CAP_READWRITE))
    /// `V4L2_CAP_STREAMING`
    static let streaming = V4L2CapabilityFlags(rawValue: UInt32(V4L2_CAP_STREAMING))
    /// `V4L2_CAP_DEVICE_CAPS`: `deviceCapabilities` is valid.
    static let deviceCapabilities = V4L2CapabilityFlags(rawValue: UInt32(V4L2_CAP_DEVICE_CAPS))
}

/// What `VIDIOC_QUERYCAP` says (`struct v4l2_capability`).
struct V4L2Capability: Hashable, Sendable {
    var driver: String
    var card: String
    var busInfo: String
    /// The physical device's capabilities (all its nodes).
    var capabilities: V4L2CapabilityFlags
    /// This node's own, valid when `capabilities` contains `.deviceCapabilities`.
    var deviceCapabilities: V4L2CapabilityFlags

    /// The node's effective capabilities: its own when the driver reports them.
    var effective: V4L2CapabilityFlags {
        capabilities.contains(.deviceCapabilities) ? deviceCapabilities : capabilities
    }
}

/// A V4L2 fraction (`struct v4l2_fract`): a frame interval in seconds.
struct V4L2Fraction: Hashable, Sendable {
    var numerator: UInt32
    var denominator: UInt32
}

/// One `VIDIOC_ENUM_FRAMESIZES` answer.
enum V4L2FrameSize: Hashable, Sendable {
    /// `V4L2_FRMSIZE_TYPE_DISCRETE`
    case discrete(Dimensions)
    /// `V4L2_FRMSIZE_TYPE_STEPWISE` or `CONTINUOUS` (step 1): every size on the grid.
    case stepwise(minimum: Dimensions, maximum: Dimensions, stepWidth: Int, stepHeight: Int)
}

/// One `VIDIOC_ENUM_FRAMEINTERVALS` answer.
enum V4L2FrameInterval: Hashable, Sendable {
    /// `V4L2_FRMIVAL_TYPE_DISCRETE`
    case discrete(V4L2Fraction)
    /// `V4L2_FRMIVAL_TYPE_STEPWISE` or `CONTINUOUS`
    case stepwise(minimum: V4L2Fraction, maximum: V4L2Fraction, step: V4L2Fraction)
}

/// A single-planar image format (`struct v4l2_pix_format`, progressive).
struct V4L2ImageFormat: Hashable, Sendable {
    var width: UInt32
    var height: UInt32
    var pixelFormat: PixelFormat
    /// The driver's line pitch (0 for compressed formats), read back.
    var bytesPerLine: UInt32 = 0
    /// The driver's buffer size for one frame, read back.
    var imageSize: UInt32 = 0

    init(width: UInt32, height: UInt32, pixelFormat: PixelFormat, bytesPerLine: UInt32 = 0, imageSize: UInt32 = 0) {
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.bytesPerLine = bytesPerLine
        self.imageSize = imageSize
    }

    init(pixelFormat: PixelFormat, size: Dimensions) {
        self.init(width: UInt32(size.width), height: UInt32(size.height), pixelFormat: pixelFormat)
    }

    var dimensions: Dimensions { Dimensions(width: Int(width), height: Int(height)) }
}

/// A queue's streaming parameters (`struct v4l2_captureparm` / `v4l2_outputparm`).
struct V4L2StreamParameters: Hashable, Sendable {
    /// `V4L2_CAP_TIMEPERFRAME`: the frame interval can be set.
    var canSetTimePerFrame: Bool
    var timePerFrame: V4L2Fraction
}

/// Where a buffer is mapped from (`VIDIOC_QUERYBUF`, mmap).
struct V4L2BufferLocation: Hashable, Sendable {
    var index: UInt32
    var length: Int
    var offset: Int
}

/// A buffer mapped into this process; valid until `V4L2System.unmap`.
struct V4L2MappedBuffer {
    let address: UnsafeMutableRawPointer
    let length: Int
}

/// `V4L2_BUF_FLAG_*` flags of a dequeued buffer.
struct V4L2BufferFlags: OptionSet, Hashable, Sendable {
    let rawValue: UInt32
    init(rawValue: UInt32) { self.rawValue = rawValue }
    /// `V4L2_BUF_FLAG_ERROR`: the data may be corrupt.
    static let error = V4L2BufferFlags(rawValue: UInt32(V4L2_BUF_FLAG_ERROR))
    /// `V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC` (within `V4L2_BUF_FLAG_TIMESTAMP_MASK`)
    static let timestampMonotonic = V4L2BufferFlags(rawValue: UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC))
    /// `V4L2_BUF_FLAG_TSTAMP_SRC_EOF`: the stamp marks the end of the frame.
    static let timestampEndOfFrame = V4L2BufferFlags(rawValue: UInt32(V4L2_BUF_FLAG_TSTAMP_SRC_EOF))

    /// The timestamp is on CLOCK_MONOTONIC.
    var isMonotonic: Bool { rawValue & UInt32(V4L2_BUF_FLAG_TIMESTAMP_MASK) == UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC) }
    /// The timestamp marks the end of the frame (else its start).
    var marksEndOfFrame: Bool { rawValue & UInt32(V4L2_BUF_FLAG_TSTAMP_SRC_MASK) == UInt32(V4L2_BUF_FLAG_TSTAMP_SRC_EOF) }
}

/// What `VIDIOC_DQBUF` handed back (`struct v4l2_buffer`, mmap).
struct V4L2DequeuedBuffer: Hashable, Sendable {
    var index: UInt32
    var sequence: UInt32
    var bytesUsed: Int
    var length: Int
    var flags: V4L2BufferFlags
    /// The driver's stamp (`timestamp`, a timeval) in nanoseconds.
    var timestampNanoseconds: Int64
}

/// One control as `VIDIOC_QUERYCTRL` reports it (`struct v4l2_queryctrl`).
struct V4L2ControlQuery: Hashable, Sendable {
    var id: UInt32
    /// `enum v4l2_ctrl_type`
    var type: UInt32
    var name: String
    var minimum: Int32
    var maximum: Int32
    var step: Int32
    var defaultValue: Int32
    /// `V4L2_CTRL_FLAG_*`
    var flags: UInt32
}

/// One `VIDIOC_QUERYMENU` entry: `name` for MENU controls, `value` for INTEGER_MENU ones (the
/// kernel's union, read both ways).
struct V4L2MenuEntry: Hashable, Sendable {
    var name: String
    var value: Int64
}

/// What `V4L2System.poll` saw.
enum V4L2PollResult: Sendable, Equatable {
    /// A buffer can be dequeued.
    case readable
    /// The device reported an error or hang-up (unplugged, fatal streaming error).
    case failed
    /// The stream's wake-up pipe fired (stop was requested).
    case woken
    case timedOut
}

/// The two ends of a stream's wake-up pipe.
struct V4L2WakePipe: Sendable, Hashable {
    var read: Int32
    var write: Int32
}
