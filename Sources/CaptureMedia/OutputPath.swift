import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one place that decides whether a path may become a new output file, and creates it.
///
/// Rules (what a capture program should do with a path it was given): the folder must exist and be a
/// folder; nothing may be at the path — no file, folder or FIFO, and no symbolic link, dangling or
/// not, since writing through one would create or overwrite a file somewhere else. `claim` creates
/// the file with `O_CREAT | O_EXCL | O_NOFOLLOW`, so the check and the creation are one atomic step:
/// whatever appears at the path in between makes it fail instead of being followed. Names may hold
/// any bytes but `/` and NUL (spaces and newlines included).
public enum OutputPath {
    /// Throws `outputDirectoryMissing` or `outputFileExists` (also for a symlink, FIFO or folder at
    /// the path) when `path` cannot be a new file.
    public static func checkNew(_ path: String) throws(CaptureError) {
        let folder = (path as NSString).deletingLastPathComponent
        var info = stat()
        if !folder.isEmpty, stat(folder, &info) != 0 || (info.st_mode & S_IFMT) != S_IFDIR {
            throw .outputDirectoryMissing(path: path)
        }
        if lstat(path, &info) == 0 { throw .outputFileExists(path: path) }
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
}
