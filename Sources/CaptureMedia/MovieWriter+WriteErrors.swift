import CFFmpeg
import CaptureCore
import Foundation

/// Write errors: libavformat's failed writes made typed, the cut back to complete fragments after
/// one, and the check that what was written reached the device.
extension MovieWriter {
    /// libavformat keeps a failed write in `pb->error` and carries on, so a full disk goes unseen
    /// unless it is looked at: checks it after every call that writes, then the call's own result.
    /// An I/O error becomes `diskFull`/`writeFailed` (remembered: the writer writes nothing more).
    func checkWrite(_ code: Int32, _ operation: @autoclosure () -> String) throws(CaptureError) {
        if let writeFailure { throw writeFailure }
        // An injected full disk: past its byte limit the file's writes fail as a full disk's do
        // (the AVIOContext's error, ENOSPC), so everything below treats it as the real thing.
        if let limit = options.faults.byteLimit(at: max(videoEnd, audioEnd)), let pb = formatContext?.pointee.pb,
           pb.pointee.error == 0, avio_tell(pb) > limit {
            pb.pointee.error = -ENOSPC
        }
        // Without an AVIOContext (opening failed) the call's own result is open(2)'s errno.
        if let failure = ioError(formatContext?.pointee.pb == nil ? code : 0) {
            writeFailure = failure
            throw failure
        }
        try FFmpeg.check(code, operation())
    }

    /// The typed error for the AVIOContext's error, else for `code` taken as an I/O result
    /// (`AVERROR(errno)`), promising what will be kept; nil if neither is one.
    func ioError(_ code: Int32) -> CaptureError? {
        let pbError = formatContext?.pointee.pb?.pointee.error ?? 0
        let value = pbError < 0 ? pbError : code
        guard value < 0, -value < 4096 else { return nil }
        return .writeError(path: path, errno: -value, bytesKept: completePart.bytes, secondsKept: completePart.seconds)
    }

    /// After a refused write: closes the file and cuts it back to the end of its last complete
    /// fragment (no trailer fits on a full disk, and a cut fragment would stop players with an
    /// error), so it plays to that fragment's last frame. An unfragmented MP4/MOV/M4A was written in
    /// hidden fragments, so the same holds for it; an MKV without clusters cut by us is left as it
    /// is (its clusters play to the cut). Returns the error with what was kept.
    func keepCompleteFragments(after failure: CaptureError) -> CaptureError {
        writeFailure = failure
        // Closing flushes what avio still buffers; on a full disk those writes fail too, harmlessly.
        close(deleteFile: false)
        let code: Int32
        switch failure {
        case .writeFailed(_, let e, _, _): code = e
        default: code = ENOSPC
        }
        if fileType == .wav, let kept = WAVRepair.keepWholeSamples(path: path) {
            // PCM needs no index: every whole sample frame on disk plays once the sizes are right.
            completePart = CompletePart(bytes: kept.bytes, seconds: kept.seconds, videoFrames: 0, fragments: 0)
            let failureWithKept = CaptureError.writeError(path: path, errno: code, bytesKept: kept.bytes, secondsKept: kept.seconds)
            writeFailure = failureWithKept
            return failureWithKept
        }
        if fragmentInterval != nil {
            if completePart.fragments > 0 {
                // A read-only or failing disk may refuse this too: then the partial fragment stays.
                _ = truncate(path, off_t(completePart.bytes))
            } else {
                // Not one fragment reached the disk whole: nothing in the file would play.
                unlink(path)
            }
        }
        var info = stat()
        let size = stat(path, &info) == 0 ? Int64(info.st_size) : 0
        if fragmentInterval == nil || completePart.fragments == 0 { completePart = CompletePart() }
        completePart.bytes = size
        let failureWithKept = CaptureError.writeError(path: path, errno: code, bytesKept: size, secondsKept: completePart.seconds)
        writeFailure = failureWithKept
        return failureWithKept
    }

    /// Asks the OS whether everything written so far is on the device, and fails the writer if not.
    /// write(2) only hands data to the page cache: a device that fails its I/O (EIO) is reported
    /// by `fdatasync` alone, and a filesystem forced read-only (an emergency remount, or ext4's
    /// errors=remount-ro) may drop delayed-allocation data without any call failing — its
    /// read-only flag is the only sign, so that counts as EROFS. Called once per fragment and at
    /// the end, so what `completePart` promises has reached the device.
    func syncToDevice() throws(CaptureError) {
        guard syncDescriptor >= 0 else { return }
        var code: Int32 = 0
        if fdatasync(syncDescriptor) != 0, errno != EINVAL { code = errno }
        var info = statvfs()
        if code == 0, fstatvfs(syncDescriptor, &info) == 0, info.f_flag & UInt(ST_RDONLY) != 0 { code = EROFS }
        guard code != 0 else { return }
        let failure = CaptureError.writeError(path: path, errno: code, bytesKept: completePart.bytes, secondsKept: completePart.seconds)
        writeFailure = failure
        throw failure
    }
}
