import CaptureCore
import Foundation

/// Writes a small file (a JPEG still, a contact sheet) in one go, checking what the OS says at
/// every step: the file is created new (`O_CREAT|O_EXCL`, so an existing file or a symlink in its
/// place is never followed or overwritten), every byte is written (short writes retried), and
/// `fsync`/`close` are checked, since some filesystems report a full disk only then. On failure
/// the partial file is removed and the error is typed: `diskFull`, `writeFailed(errno)`,
/// `outputFileExists`, `outputDirectoryMissing`.
public enum NewFile {
    public static func write(_ bytes: some Collection<UInt8>, to path: String) throws(CaptureError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        if fd < 0 {
            let code = errno
            switch code {
            case EEXIST: throw .outputFileExists(path: path)
            case ENOENT, ENOTDIR: throw .outputDirectoryMissing(path: path)
            default: throw .writeError(path: path, errno: code)
            }
        }
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
            unlink(path)
            throw .writeError(path: path, errno: failure)
        }
    }
}
