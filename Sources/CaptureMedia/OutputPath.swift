import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one way CaptureKit creates an output file (movies, fixtures, stills, reports, contact
/// sheets, plots, artifacts, audio recordings).
///
/// Rules — at least as careful as `cp`: the folder must exist and be a folder; a new file is created
/// with `O_CREAT | O_EXCL | O_NOFOLLOW`, so the check and the creation are one atomic step and
/// nothing already at the path — a file, folder, FIFO, device node, or a symbolic link, dangling or
/// not — is followed, opened or replaced. Only when the caller asks (`Existing.replaceRegularFile`,
/// the CLI's `--overwrite`) may a *regular file* at the path be replaced, and then atomically: the
/// new content is written to a temporary file beside it and renamed over it, so a reader sees the
/// old file or the new one, never a mix. A directory, FIFO, device node, socket or symbolic link is
/// never replaced or removed, with or without overwrite (`outputNotReplaceable`). Names may hold any
/// bytes but `/` and NUL (spaces and newlines included).
public enum OutputPath {
    /// What to do when something is already at the path.
    public enum Existing: Sendable, Equatable {
        /// Refuse (`outputFileExists`): the default everywhere.
        case refuse
        /// Replace a regular file, atomically; still refuse anything else (`outputNotReplaceable`).
        case replaceRegularFile

        public init(overwrite: Bool) { self = overwrite ? .replaceRegularFile : .refuse }
    }

    /// What is at `path` (not following a symbolic link), in words for messages; nil when nothing is.
    public static func kind(at path: String) -> String? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return "a regular file"
        case S_IFDIR: return "a directory"
        case S_IFLNK: return "a symbolic link"
        case S_IFIFO: return "a FIFO"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "a special file"
        }
    }

    /// True when a regular file (not a link to one) is at `path`.
    public static func isRegularFile(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    /// Throws `outputDirectoryMissing`, `outputFileExists` (anything at the path, with `.refuse`) or
    /// `outputNotReplaceable` (anything but a regular file, with `.replaceRegularFile`) when `path`
    /// cannot become the output file.
    public static func checkNew(_ path: String, existing: Existing = .refuse) throws(CaptureError) {
        let folder = (path as NSString).deletingLastPathComponent
        var info = stat()
        if !folder.isEmpty, stat(folder, &info) != 0 || (info.st_mode & S_IFMT) != S_IFDIR {
            throw .outputDirectoryMissing(path: path)
        }
        if lstat(path, &info) == 0 {
            guard existing == .replaceRegularFile else { throw .outputFileExists(path: path) }
            if (info.st_mode & S_IFMT) != S_IFREG { throw .outputNotReplaceable(path: path, kind: kind(at: path) ?? "a special file") }
            return
        }
        if errno != ENOENT {
            throw .fileOperationFailed(path: path, reason: "cannot look at the path: \(String(cString: strerror(errno)))")
        }
    }

    /// Creates `path` as a new, empty regular file, atomically refusing anything already there.
    public static func claim(_ path: String) throws(CaptureError) {
        close(try claimKeepingOpen(path))
    }

    /// `claim`, returning the new file's descriptor (write-only; the caller closes it). A writer that
    /// then opens the file by name keeps it to ask the OS, through `fdatasync`, whether its data
    /// reached the device: a descriptor opened before any write sees every later write-back error.
    public static func claimKeepingOpen(_ path: String) throws(CaptureError) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case EEXIST, ELOOP: throw .outputFileExists(path: path)
            case ENOENT, ENOTDIR: throw .outputDirectoryMissing(path: path)
            default:
                throw .fileOperationFailed(path: path, reason: "cannot create the file: \(String(cString: strerror(code))) (errno \(code)); choose a folder you can write to")
            }
        }
        return fd
    }

    /// A name that opens the very file behind `descriptor` (`/proc/self/fd/N`), for a library that
    /// opens by name (libavformat's `avio_open`): whatever is put at the original path after the
    /// claim — a symlink, another file — is never opened or written through.
    public static func openPath(_ descriptor: Int32) -> String { "/proc/self/fd/\(descriptor)" }

    /// A fresh, unused name in `path`'s folder for writing a replacement before `commit` renames it
    /// over `path` (same folder, so the rename is atomic and never crosses filesystems).
    public static func temporaryPath(beside path: String) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        let name = ".\((path as NSString).lastPathComponent.prefix(120)).capturekit-\(getpid())-\(UInt32.random(in: .min ... .max)).tmp"
        return folder.isEmpty ? name : (folder as NSString).appendingPathComponent(name)
    }

    /// Renames the finished `temporary` over `path`, when nothing or a regular file is there; anything
    /// else (a directory, link, FIFO, device that appeared meanwhile) is left alone, `temporary` is
    /// removed, and `outputNotReplaceable` thrown. rename(2) replaces the directory entry itself:
    /// it never writes through a link or into a device.
    public static func commit(_ temporary: String, replacing path: String) throws(CaptureError) {
        if let kind = kind(at: path), kind != "a regular file" {
            unlink(temporary)
            throw .outputNotReplaceable(path: path, kind: kind)
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw .fileOperationFailed(path: path, reason: "cannot put the new file in place: \(String(cString: strerror(code))) (errno \(code))")
        }
    }

    /// Writes a small file (a JPEG still, a contact sheet, a plot, a report) in one go, checking what
    /// the OS says at every step: created exclusively (or, with `.replaceRegularFile` and a regular
    /// file there, written beside it and renamed over it), every byte written (short writes retried),
    /// `fsync`/`close` checked (some filesystems report a full disk only then). On failure the
    /// partial file is removed — never what was at the path — and the error is typed: `diskFull`,
    /// `writeFailed(errno)`, `outputFileExists`, `outputNotReplaceable`, `outputDirectoryMissing`.
    public static func write(_ bytes: some Collection<UInt8>, to path: String, existing: Existing = .refuse) throws(CaptureError) {
        try checkNew(path, existing: existing)
        let replacing = existing == .replaceRegularFile && kind(at: path) != nil
        let target = replacing ? temporaryPath(beside: path) : path
        let fd = try claimKeepingOpen(target)
        var failure: Int32 = 0
        let array = Array(bytes)
        array.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += n
            }
        }
        if failure == 0, fsync(fd) != 0, errno != EINVAL { failure = errno }
        if Glibc.close(fd) != 0, failure == 0, errno != EINTR { failure = errno }
        if failure != 0 {
            unlink(target)
            throw .writeError(path: path, errno: failure)
        }
        if replacing { try commit(target, replacing: path) }
    }

    /// `write` for text (UTF-8).
    public static func write(_ text: String, to path: String, existing: Existing = .refuse) throws(CaptureError) {
        try write(Array(text.utf8), to: path, existing: existing)
    }

    /// Removes `path` only if it is a regular file (e.g. a recording the user asked to delete);
    /// returns false, touching nothing, for a directory, link, FIFO, device or nothing at all.
    @discardableResult
    public static func removeRegularFile(_ path: String) -> Bool {
        isRegularFile(path) && unlink(path) == 0
    }
}
