import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Folders for outputs, and names from input files (a scenario's or fixture's name) used as path
/// components: such a name is data, never a path — it cannot climb out of its folder or reach an
/// absolute path, and two runs never share a folder.
extension OutputPath {
    /// `name` as one safe path component: every byte other than letters, digits, `.`, `-`, `_` and
    /// space becomes `_` (so `/` never survives), a name of dots only (`.`, `..`) or an empty one
    /// becomes `_` + it, and it is cut to 100 characters. `a/../../b` → `a_.._.._b`, `/etc` → `_etc`.
    public static func safeComponent(_ name: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_ ")
        var safe = String(name.map { allowed.contains($0) ? $0 : "_" }.prefix(100))
        if safe.allSatisfy({ $0 == "." }) { safe = "_" + safe }
        return safe
    }

    /// True when `a` and `b` name the same file (same device and inode, links followed): an output
    /// must never be one of the command's own inputs.
    public static func isSameFile(_ a: String, _ b: String) -> Bool {
        var x = stat(), y = stat()
        return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino
    }

    /// Checks that `path` can hold output folders: an existing directory (a link to one is followed,
    /// as `cp -r` does for a target folder), or nothing, in which case it is created (with its
    /// missing parents). A file, FIFO, device or a link to one is refused and left alone.
    public static func prepareFolder(_ path: String) throws(CaptureError) {
        var info = stat()
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                let kind = kind(at: path) ?? "a special file"
                throw .fileOperationFailed(path: path, reason: "it is \(kind == "a symbolic link" ? "a symbolic link to something" : kind) that is not a directory, and it is left alone; give a folder (one that does not exist is created)")
            }
            return
        }
        if kind(at: path) != nil {  // a dangling link: creating through it would write elsewhere
            throw .fileOperationFailed(path: path, reason: "it is a symbolic link to nothing, not a directory, and it is left alone; give a folder (one that does not exist is created)")
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw .fileOperationFailed(path: path, reason: "cannot create the folder: \(error.localizedDescription)")
        }
    }

    /// Creates a new folder for `name` inside `parent` (which must exist) and returns its path:
    /// `parent/safeComponent(name)`, or with `-2`, `-3`, … when that is taken (by an earlier run,
    /// or another scenario of the same name running at the same time: mkdir(2) is atomic).
    /// Anything already there is never reused or touched.
    public static func makeUniqueFolder(in parent: String, named name: String) throws(CaptureError) -> String {
        let base = safeComponent(name)
        for n in 1...10_000 {
            let folder = (parent as NSString).appendingPathComponent(n == 1 ? base : "\(base)-\(n)")
            if mkdir(folder, 0o755) == 0 { return folder }
            let code = errno
            guard code == EEXIST else {
                throw .fileOperationFailed(path: folder, reason: "cannot create the folder: \(String(cString: strerror(code))) (errno \(code))")
            }
        }
        throw .fileOperationFailed(path: parent, reason: "10000 folders named \(base) already exist; clear the folder")
    }
}
