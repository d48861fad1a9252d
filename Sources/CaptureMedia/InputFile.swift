import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Which file a descriptor or a path refers to: its device and inode. Two equal identities are the
/// same file, whatever its name now; a finishing step compares the file at a path with the one it
/// created before it replaces or removes anything there.
public struct FileIdentity: Sendable, Hashable {
    public let device: UInt64
    public let inode: UInt64

    /// The file `descriptor` is open on (`fstat`); nil when the descriptor is not open.
    public init?(descriptor: Int32) {
        var info = stat()
        guard descriptor >= 0, fstat(descriptor, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// What `path` names now, without following a symbolic link (`lstat`); nil when nothing is there.
    public init?(path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// Removes `path` only when it still names this file; returns whether it did.
    @discardableResult
    public func unlink(_ path: String) -> Bool {
        guard FileIdentity(path: path) == self else { return false }
        return Glibc.unlink(path) == 0
    }
}

/// The rule for files read as input (media files, fixtures, scenarios): only a regular file is
/// read. A FIFO, a device node, a socket or a folder is refused at once with a clear error, because
/// reading one can wait for ever (a FIFO without a writer, a terminal) or never end (`/dev/zero`).
public enum InputFile {
    /// What is at `path` when it is not a regular file ("a FIFO (named pipe)", "a folder", …), or
    /// nil when it is one. Looked at with `stat` first (nothing else is opened: opening a device
    /// can act on it), then through a descriptor opened with `O_NONBLOCK` (a FIFO swapped in since
    /// does not block the look). A path that cannot be looked at is left to the reader, which
    /// reports its own error (no such file, permission denied).
    public static func nonRegularKind(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        if let kind = kind(info.st_mode) { return kind }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard fstat(fd, &info) == 0 else { return nil }
        return kind(info.st_mode)
    }

    private static func kind(_ mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFIFO: return "a FIFO (named pipe)"
        case S_IFDIR: return "a folder"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "a special file"
        }
    }

    /// Throws when `path` is not a regular file: `what` names what was expected ("a media file").
    public static func requireRegular(_ path: String, what: String) throws(CaptureError) {
        guard let kind = nonRegularKind(path) else { return }
        throw .fileOperationFailed(path: path, reason: "it is \(kind), not a regular file; reading it could wait for ever or never end, so give \(what)")
    }
}
