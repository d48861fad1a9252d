import CV4L2
import CaptureCore
import Foundation
@testable import CaptureV4L2

/// The calls a fake V4L2 kernel answers, as its trace names them (the ioctl names without
/// `VIDIOC_`, and the system calls by name).
enum V4L2Call: String, Hashable, Sendable, CustomStringConvertible {
    case open, close, poll, write, mmap, munmap
    case querycap = "QUERYCAP", enumFormat = "ENUM_FMT", enumFrameSizes = "ENUM_FRAMESIZES"
    case enumFrameIntervals = "ENUM_FRAMEINTERVALS", getFormat = "G_FMT", setFormat = "S_FMT"
    case getParameters = "G_PARM", setParameters = "S_PARM", requestBuffers = "REQBUFS", queryBuffer = "QUERYBUF"
    case queueBuffer = "QBUF", dequeueBuffer = "DQBUF", streamOn = "STREAMON", streamOff = "STREAMOFF"
    case queryControl = "QUERYCTRL", queryMenu = "QUERYMENU", getControl = "G_CTRL", setControl = "S_CTRL"
    case setPriority = "S_PRIORITY"

    var description: String { rawValue }
}

/// One call a fake kernel answered: what, on which descriptor, with what argument, and how it ended.
struct V4L2TraceEntry: Hashable, Sendable, CustomStringConvertible {
    var call: V4L2Call
    var fd: Int32?
    /// The argument that matters, briefly (`YUYV 640x480`, `count 8`, `index 3`).
    var detail: String
    /// The errno it failed with; nil when it succeeded.
    var error: V4L2Errno?

    var description: String {
        [call.rawValue, fd.map { "fd \($0)" }, detail.isEmpty ? nil : detail].compactMap { $0 }.joined(separator: " ")
            + (error.map { " → \(V4L2Trace.name($0))" } ?? "")
    }
}

/// A fake kernel's call trace and the errors injected into it (swift-system's `Mocking`): each
/// call is recorded with its outcome; an injected error makes a call fail before the fake runs it.
struct V4L2Trace {
    /// When an injected error strikes.
    enum When: Sendable, Hashable {
        /// The next call of that kind, once.
        case next
        /// The n-th call of that kind from now (1 is the next one), once.
        case nth(Int)
        /// Every call of that kind from now on.
        case always
    }

    private struct Fault {
        var call: V4L2Call
        var error: V4L2Errno
        /// Calls of that kind to let through first.
        var skip: Int
        var persistent: Bool
    }

    private(set) var entries: [V4L2TraceEntry] = []
    private var faults: [Fault] = []

    mutating func inject(_ call: V4L2Call, _ error: V4L2Errno, _ when: When) {
        switch when {
        case .next: faults.append(Fault(call: call, error: error, skip: 0, persistent: false))
        case .nth(let n): faults.append(Fault(call: call, error: error, skip: max(0, n - 1), persistent: false))
        case .always: faults.append(Fault(call: call, error: error, skip: 0, persistent: true))
        }
    }

    /// Removes every injected error for a call (all calls when nil).
    mutating func clearFaults(_ call: V4L2Call? = nil) { faults.removeAll { call == nil || $0.call == call } }

    mutating func clear() { entries.removeAll() }

    /// The error injected for this call now, if any (consuming a one-shot fault, counting down an n-th one).
    mutating func injected(_ call: V4L2Call) -> V4L2Errno? {
        var hit: V4L2Errno?
        for i in faults.indices where faults[i].call == call {
            if faults[i].skip > 0 {
                faults[i].skip -= 1
            } else if hit == nil {
                hit = faults[i].error
                if !faults[i].persistent { faults[i].skip = -1 }
            }
        }
        faults.removeAll { $0.skip < 0 }
        return hit
    }

    mutating func record(_ call: V4L2Call, _ fd: V4L2FileDescriptor?, _ detail: String, _ error: V4L2Errno?) {
        entries.append(V4L2TraceEntry(call: call, fd: fd?.rawValue, detail: detail, error: error))
    }

    static func name(_ e: V4L2Errno) -> String {
        let names: [Int32: String] = [EBUSY: "EBUSY", EINVAL: "EINVAL", ENODEV: "ENODEV", ENXIO: "ENXIO", ENOENT: "ENOENT",
                                      EAGAIN: "EAGAIN", EIO: "EIO", EACCES: "EACCES", EPERM: "EPERM", EBADF: "EBADF",
                                      ENOTTY: "ENOTTY", EINTR: "EINTR", ENOSYS: "ENOSYS"]
        return names[e.rawValue] ?? "errno \(e.rawValue)"
    }
}

