import CaptureKit
import Foundation
import Testing

/// A real block-device filesystem made inside the VM: ext4 on a loop device over a file in the
/// guest's /dev/shm (tmpfs), optionally through a device-mapper linear target so the device can be
/// swapped for dm's `error` target mid-recording. Needs root, loop, dm-mod and ext4 (ci/vm/prepare
/// loads them); only ever made inside the VM (CAPTUREKIT_IN_VM=1).
final class BlockDisk {
    let image: String
    let loop: String
    let mapperName: String?
    let device: String
    let mountPoint: String

    struct Failure: Error, CustomStringConvertible { var description: String }

    @discardableResult
    static func sh(_ tool: String, _ arguments: [String]) throws -> DeviceEnvironment.ToolResult {
        let result = try DeviceEnvironment.run(tool, arguments)
        guard result.status == 0 else {
            throw Failure(description: "\(tool) \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)")
        }
        return result
    }

    /// `megabytes` of ext4, mounted with `options` (e.g. "errors=remount-ro").
    init(megabytes: Int, deviceMapper: Bool = false, options: String? = nil) throws {
        let id = UUID().uuidString.prefix(8)
        image = "/dev/shm/capturekit-disk-\(id).img"
        mountPoint = "/mnt/capturekit-disk-\(id)"
        try BlockDisk.sh("truncate", ["-s", "\(megabytes)M", image])
        loop = try BlockDisk.sh("losetup", ["-f", "--show", image]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        if deviceMapper {
            let name = "capturekit-\(id)"
            let sectors = try BlockDisk.sh("blockdev", ["--getsz", loop]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            // No udev in the VM: dmsetup makes the /dev/mapper node itself (mknodes).
            try BlockDisk.sh("dmsetup", ["create", "--noudevsync", name, "--table", "0 \(sectors) linear \(loop) 0"])
            try BlockDisk.sh("dmsetup", ["mknodes", name])
            mapperName = name
            device = "/dev/mapper/" + name
            linearTable = "0 \(sectors) linear \(loop) 0"
            errorTable = "0 \(sectors) error"
        } else {
            mapperName = nil
            device = loop
        }
        try BlockDisk.sh("mkfs.ext4", ["-q", "-F", device])
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try BlockDisk.sh("mount", (options.map { ["-o", $0] } ?? []) + [device, mountPoint])
    }

    private var linearTable = ""
    private var errorTable = ""

    /// Bytes free for an unprivileged writer, as statvfs sees them.
    var freeBytes: Int64 {
        var info = statvfs()
        guard statvfs(mountPoint, &info) == 0 else { return -1 }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Swaps the device under the filesystem for dm's `error` target: every I/O fails with EIO from
    /// now on. (Suspending first flushes and freezes the filesystem, so what was written before is on
    /// the device — and stays readable only from the page cache.)
    func failWithIOErrors() throws {
        guard let name = mapperName else { throw Failure(description: "not a device-mapper disk") }
        try BlockDisk.sh("dmsetup", ["suspend", "--noudevsync", name])
        try BlockDisk.sh("dmsetup", ["reload", "--noudevsync", name, "--table", errorTable])
        try BlockDisk.sh("dmsetup", ["resume", "--noudevsync", name])
    }

    /// Forces every block-device filesystem read-only at once, open files for writing or not (the
    /// kernel's emergency remount, SysRq-u): `mount -o remount,ro` refuses with EBUSY while a file
    /// is open for writing. In the VM the only block-device filesystems are this test's (the root
    /// is an overlay over tmpfs and 9p, which have no block device and are left alone); checked first.
    func forceReadOnly() throws {
        let mounts = try String(contentsOfFile: "/proc/mounts", encoding: .utf8)
        let blockMounts = mounts.split(separator: "\n").map { $0.split(separator: " ") }
            .filter { $0.count > 1 && $0[0].hasPrefix("/dev/") && !$0[0].hasPrefix("/dev/shm") }
        for m in blockMounts where m[1] != mountPoint {
            throw Failure(description: "refusing SysRq-u: \(m[0]) is mounted on \(m[1]) too")
        }
        try "u".write(toFile: "/proc/sysrq-trigger", atomically: false, encoding: .utf8)
    }

    /// Fills the filesystem with a preallocated file until `free` bytes are left, so a recording
    /// fills the rest in seconds (a full disk is a disk with a few MB free).
    func fill(leaving free: Int64) throws {
        let available = freeBytes
        guard available > free else { return }
        try BlockDisk.sh("fallocate", ["-l", String(available - free), mountPoint + "/filler"])
    }

    /// Unmounts, puts the real device back under a device-mapper disk, and mounts it again read-only:
    /// what the device really holds, without the page cache that outlived the failure.
    func remountFromTheDevice() throws {
        try BlockDisk.sh("umount", [mountPoint])
        if let name = mapperName {
            try BlockDisk.sh("dmsetup", ["suspend", "--noudevsync", name])
            try BlockDisk.sh("dmsetup", ["reload", "--noudevsync", name, "--table", linearTable])
            try BlockDisk.sh("dmsetup", ["resume", "--noudevsync", name])
        }
        try BlockDisk.sh("mount", ["-o", "ro", device, mountPoint])
    }

    var isReadOnly: Bool {
        var info = statvfs()
        return statvfs(mountPoint, &info) == 0 && info.f_flag & UInt(ST_RDONLY) != 0
    }

    func tearDown() {
        _ = try? DeviceEnvironment.run("umount", ["-l", mountPoint])
        if let name = mapperName {
            // A suspended or failed device must be resumed before it can be removed.
            _ = try? DeviceEnvironment.run("dmsetup", ["resume", "--noudevsync", name])
            _ = try? DeviceEnvironment.run("dmsetup", ["remove", "--noudevsync", name])
        }
        _ = try? DeviceEnvironment.run("losetup", ["-d", loop])
        try? FileManager.default.removeItem(atPath: image)
        try? FileManager.default.removeItem(atPath: mountPoint)
    }
}

/// Issue 12, must-show 3: disks that fill up and fail, for real — a full ext4, a device that starts
/// failing every I/O (dm-error), a filesystem forced read-only mid-recording. Each recording
/// (sim:back 640x480 + sim:mic, ultrafast H.264, 1 s fragments) must end with a typed error, fire
/// didFinish exactly once, leave no stuck thread (the output records again at once) and say what
/// it kept. The tests are synchronous on purpose: the VM has one vCPU, so the cooperative pool has
/// one thread, and the tools they run (mount, dmsetup, ffmpeg) block.
@Suite(.serialized, .enabled(if: DeviceEnvironment.inVM, "makes loop, device-mapper and ext4 devices and forces filesystems read-only: runs only inside ci/vm-run"))
struct DiskFailureTests {
    final class FinishSpy: CaptureFileOutputRecordingDelegate {
        let calls = Locked<[(summary: RecordingSummary, error: CaptureError?, at: Date)]>([])
        func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                        summary: RecordingSummary, error: CaptureError?) {
            calls.withLock { $0.append((summary, error, Date())) }
        }
        var count: Int { calls.withLock { $0.count } }
    }

    struct Rig {
        let session: CaptureSession
        let movie: MovieFileOutput
    }

    /// `intra`: every frame a keyframe, so the file grows ~10× faster than with the usual GOP and
    /// a few MB fill in seconds (the VM encodes at about half real time).
    private func makeRig(intra: Bool = false) throws -> Rig {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        settings.videoBitrate = 4_000_000
        if intra { settings.keyframeInterval = 1 }
        movie.settings = settings
        movie.movieFragmentInterval = MediaTime(value: 1, timescale: 1)
        try session.addOutput(movie)
        try session.startRunning()
        return Rig(session: session, movie: movie)
    }

    /// Polls `condition` until it holds or `seconds` pass (the watchdog); returns whether it held.
    @discardableResult
    private func wait(seconds: Double, _ condition: () -> Bool) -> Bool {
        (try? DeviceEnvironment.eventuallyBlocking("the condition", within: .milliseconds(Int(seconds * 1000)), condition)) != nil
    }

    /// Stops the session on another thread under a watchdog: a stuck writer would hang it.
    private func stopWithinWatchdog(_ session: CaptureSession, seconds: Double = 30) -> Bool {
        let done = Locked(false)
        let stopper = Thread { session.stopRunning(); done.withLock { $0 = true } }
        stopper.start()
        return wait(seconds: seconds) { done.withLock { $0 } }
    }

    /// After the failure the same output, in the same session started again, records a short file
    /// elsewhere: its writer is not stuck.
    private func recordsAgain(_ rig: Rig) throws -> Bool {
        try rig.session.startRunning()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let spy = FinishSpy()
        rig.movie.maxRecordedDuration = MediaTime(value: 1, timescale: 2)
        rig.movie.startRecording(to: dir + "/again.mp4", recordingDelegate: spy)
        let finished = wait(seconds: 60) { spy.count > 0 }
        return finished && spy.calls.withLock { $0.first?.error } == .recordingLimitReached(.maximumDuration)
    }

    private func size(_ path: String) -> Int64 {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? -1
    }

    /// ffmpeg's verdict (decoding every packet) and ffprobe's duration and decoded video frames.
    struct Verdict: CustomStringConvertible {
        var ffmpegClean: Bool
        var ffmpegErrors: String
        var duration: Double
        var frames: Int
        var description: String {
            "ffmpeg -f null " + (ffmpegClean ? "clean" : "errors: \(ffmpegErrors.prefix(300))")
                + ", ffprobe \(String(format: "%.3f", duration)) s, \(frames) video frames"
        }
    }

    private func verdict(_ path: String) throws -> Verdict {
        let decode = try DeviceEnvironment.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        let probe = try DeviceEnvironment.run("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                                          "-show_entries", "stream=nb_read_frames:format=duration", "-of", "json", path])
        let json = (try? JSONSerialization.jsonObject(with: Data(probe.stdout.utf8))) as? [String: Any]
        let frames = Int(((json?["streams"] as? [[String: Any]])?.first?["nb_read_frames"] as? String) ?? "") ?? 0
        let duration = Double(((json?["format"] as? [String: Any])?["duration"] as? String) ?? "") ?? 0
        return Verdict(ffmpegClean: decode.status == 0 && decode.stderr.isEmpty, ffmpegErrors: decode.stderr,
                       duration: duration, frames: frames)
    }

    // MARK: a. Full disk

    @Test func aFullExt4EndsWithDiskFullOnceAndKeepsAPlayableFile() throws {
        let disk = try BlockDisk(megabytes: 8)
        defer { disk.tearDown() }
        try disk.fill(leaving: 2_000_000)
        let rig = try makeRig(intra: true)
        defer { rig.session.stopRunning() }
        let path = disk.mountPoint + "/full.mp4"
        let spy = FinishSpy()
        let start = Date()
        print("disk full: \(disk.freeBytes) bytes free on an 8 MB ext4 (\(disk.device))")
        rig.movie.startRecording(to: path, recordingDelegate: spy)
        #expect(wait(seconds: 240) { spy.count > 0 }, "no didFinish within 240 s")
        #expect(stopWithinWatchdog(rig.session), "stopping the session hung")
        usleep(500_000)
        let calls = spy.calls.withLock { $0 }
        try #require(calls.count == 1, "didFinish fired \(calls.count) times")
        let (summary, error, at) = calls[0]
        guard case .diskFull(let errorPath, let bytes, let seconds) = error else {
            Issue.record("expected diskFull, got \(String(describing: error))")
            return
        }
        let v = try verdict(path)
        print("disk full: \(String(describing: error!)) — after \(String(format: "%.1f", at.timeIntervalSince(start))) s of wall time; "
              + "summary \(summary.videoFrames) frames, \(summary.duration) s, \(summary.fileSize) bytes, usable \(summary.fileIsUsable); \(v)")
        #expect(errorPath == path)
        #expect(summary.stopReason == "diskFull" && summary.fileIsUsable)
        #expect(bytes == size(path) && summary.fileSize == bytes)
        #expect(seconds > 1 && summary.duration == seconds)
        #expect(bytes > 1_000_000, "only \(bytes) bytes kept of 2 MB free")
        #expect(disk.freeBytes < 200_000, "\(disk.freeBytes) bytes still free: the disk was not full")
        #expect(v.ffmpegClean, "\(v)")
        #expect(v.duration > 0 && v.frames == summary.videoFrames, "\(v); summary \(summary.videoFrames) frames")
        #expect(try recordsAgain(rig), "the output did not record again after the full disk")
    }

    @Test func theCommandLineOnAFullExt4ExitsNonZeroSayingWhatItKept() throws {
        let disk = try BlockDisk(megabytes: 8)
        defer { disk.tearDown() }
        try disk.fill(leaving: 2_000_000)
        let path = disk.mountPoint + "/cli.mp4"
        let start = Date()
        // MJPEG: every frame whole, ~1 MB a second, so the 2 MB fill in seconds (the CLI sets no GOP).
        let result = try DeviceEnvironment.run(DeviceEnvironment.captureTool, [
            "record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "120", "--size", "640x480",
            "--pace", "virtual", "--video-codec", "mjpeg", "--fragment-interval", "1", path,
        ])
        let elapsed = Date().timeIntervalSince(start)
        print("disk full (CLI): exit \(result.status) after \(String(format: "%.1f", elapsed)) s: \(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
        #expect(result.status == 1)
        #expect(result.stderr.contains("is full"), "\(result.stderr)")
        let kept = try #require(result.stderr.firstMatch(of: /kept ([0-9.]+) s in ([0-9]+) bytes/), "\(result.stderr)")
        #expect(Int64(kept.2) == size(path))
        let v = try verdict(path)
        print("disk full (CLI): \(v)")
        #expect(v.ffmpegClean, "\(v)")
        #expect(abs(v.duration - (Double(kept.1) ?? 0)) < 0.1, "\(v) but the CLI kept \(kept.1) s")
    }

    @Test func minFreeDiskSpaceLimitStopsBeforeTheDeviceIsFull() throws {
        let disk = try BlockDisk(megabytes: 8)
        defer { disk.tearDown() }
        try disk.fill(leaving: 4_500_000)
        let rig = try makeRig(intra: true)
        defer { rig.session.stopRunning() }
        let limit: Int64 = 2_500_000
        rig.movie.minFreeDiskSpaceLimit = limit
        let path = disk.mountPoint + "/limited.mp4"
        let spy = FinishSpy()
        let freeBefore = disk.freeBytes
        rig.movie.startRecording(to: path, recordingDelegate: spy)
        #expect(wait(seconds: 240) { spy.count > 0 }, "no didFinish within 240 s")
        #expect(stopWithinWatchdog(rig.session), "stopping the session hung")
        usleep(500_000)
        let calls = spy.calls.withLock { $0 }
        try #require(calls.count == 1, "didFinish fired \(calls.count) times")
        let (summary, error, _) = calls[0]
        let v = try verdict(path)
        print("minFreeDiskSpaceLimit \(limit): \(String(describing: error)); \(freeBefore) bytes free before, \(disk.freeBytes) after; "
              + "summary \(summary.duration) s, \(summary.fileSize) bytes, \(summary.stopReason); \(v)")
        #expect(error == .recordingLimitReached(.diskFull))
        #expect(summary.stopReason == "diskFull" && summary.fileIsUsable)
        #expect(disk.freeBytes > limit / 2, "the device filled up anyway: \(disk.freeBytes) bytes free")
        #expect(v.ffmpegClean, "\(v)")
        #expect(v.duration > 1 && v.frames == summary.videoFrames, "\(v); summary \(summary.videoFrames) frames")
    }

    // MARK: b. I/O errors

    /// Records, and once two seconds are in the file breaks the disk with `breakIt`; returns the one
    /// didFinish call and the seconds from the fault to it.
    private func recordAndBreak(_ disk: BlockDisk, name: String, _ breakIt: () throws -> Void)
        throws -> (rig: Rig, path: String, summary: RecordingSummary, error: CaptureError?, secondsToFinish: Double)? {
        let rig = try makeRig()
        rig.movie.maxRecordedDuration = MediaTime(value: 12, timescale: 1)
        let path = disk.mountPoint + "/" + name
        let spy = FinishSpy()
        rig.movie.startRecording(to: path, recordingDelegate: spy)
        #expect(wait(seconds: 120) { rig.movie.recordedDuration.seconds >= 2 || spy.count > 0 }, "two seconds never reached the file")
        try #require(spy.count == 0, "the recording ended before the fault: \(spy.calls.withLock { $0 })")
        let fault = Date()
        let recordedAtFault = rig.movie.recordedDuration.seconds
        try breakIt()
        #expect(wait(seconds: 180) { spy.count > 0 }, "no didFinish within 180 s of the fault: a hang")
        #expect(stopWithinWatchdog(rig.session), "stopping the session hung")
        usleep(500_000)
        let calls = spy.calls.withLock { $0 }
        #expect(calls.count == 1, "didFinish fired \(calls.count) times")
        guard let first = calls.first else { return nil }
        let seconds = first.at.timeIntervalSince(fault)
        print("\(name): fault at \(String(format: "%.2f", recordedAtFault)) s of media; didFinish \(String(format: "%.2f", seconds)) s later "
              + "with \(first.error.map { String(describing: $0) } ?? "no error"); summary \(first.summary.stopReason), "
              + "\(first.summary.duration) s, \(first.summary.fileSize) bytes, usable \(first.summary.fileIsUsable)")
        return (rig, path, first.summary, first.error, seconds)
    }

    /// What `capture inspect` says about a file (exit 0 whole, 3 damaged with an intact part, 4 nothing decodes).
    private func inspect(_ path: String) throws -> DeviceEnvironment.ToolResult {
        let result = try DeviceEnvironment.run(DeviceEnvironment.captureTool, ["inspect", path])
        print("capture inspect \(path): exit \(result.status)\n\(result.stdout.split(separator: "\n").prefix(6).joined(separator: "\n"))")
        return result
    }

    @Test(arguments: ["errors=continue", "errors=remount-ro"])
    func anIOErrorEndsWithATypedErrorOnceAndNoHang(_ options: String) throws {
        let disk = try BlockDisk(megabytes: 32, deviceMapper: true, options: options)
        defer { disk.tearDown() }
        let name = "eio-\(options.dropFirst("errors=".count)).mp4"
        guard let r = try recordAndBreak(disk, name: name, { try disk.failWithIOErrors() }) else { return }
        defer { r.rig.session.stopRunning() }
        // EIO from the device, or EROFS once ext4 has given up on it (its journal aborts and it
        // turns read-only, whatever errors= says): both are the disk refusing, typed, with what was kept.
        guard case .writeFailed(let errorPath, let code, let bytes, _) = r.error, code == EIO || code == EROFS else {
            Issue.record("expected writeFailed(EIO or EROFS), got \(String(describing: r.error))")
            return
        }
        #expect(errorPath == r.path)
        #expect(r.summary.stopReason == "writeFailed")
        #expect(r.secondsToFinish < 60, "didFinish came \(r.secondsToFinish) s after the fault")
        // The device is gone: what the file holds is only in the page cache. Say what it is.
        if FileManager.default.fileExists(atPath: r.path) {
            let v = try verdict(r.path)
            let report = try inspect(r.path)
            print("\(name): \(bytes) bytes reported kept, \(size(r.path)) in the page cache; \(v)")
            #expect(v.ffmpegClean || report.status == 3 || report.status == 4, "neither playable nor reported damaged: \(v)")
        } else {
            print("\(name): the file is gone (nothing whole was kept)")
        }
        #expect(try recordsAgain(r.rig), "the output did not record again after the I/O error")
        // What was reported kept had been synced, so it is on the device, whole.
        try disk.remountFromTheDevice()
        let onDevice = try verdict(r.path)
        print("\(name), on the device after remounting: \(size(r.path)) bytes; \(onDevice)")
        #expect(onDevice.ffmpegClean && onDevice.frames >= r.summary.videoFrames && r.summary.videoFrames > 0,
                "\(onDevice); \(r.summary.videoFrames) frames reported kept")
    }

    // MARK: c. Read-only remount

    @Test func aReadOnlyRemountEndsWithATypedErrorOnceAndNoHang() throws {
        let disk = try BlockDisk(megabytes: 32)
        defer { disk.tearDown() }
        // What a user would try first cannot do it: ext4 refuses while a file is open for writing.
        guard let r = try recordAndBreak(disk, name: "remount-ro.mp4", {
            let remount = try DeviceEnvironment.run("mount", ["-o", "remount,ro", disk.mountPoint])
            print("mount -o remount,ro with the movie open: exit \(remount.status) \(remount.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
            if remount.status != 0 { try disk.forceReadOnly() }
        }) else { return }
        defer { r.rig.session.stopRunning() }
        #expect(disk.isReadOnly)
        guard case .writeFailed(let errorPath, EROFS, let bytes, let seconds) = r.error else {
            Issue.record("expected writeFailed(EROFS), got \(String(describing: r.error))")
            return
        }
        #expect(errorPath == r.path)
        #expect(r.summary.stopReason == "writeFailed")
        #expect(r.secondsToFinish < 60, "didFinish came \(r.secondsToFinish) s after the fault")
        let v = try verdict(r.path)
        let report = try inspect(r.path)
        print("remount-ro: \(bytes) bytes and \(seconds) s reported kept, file \(size(r.path)) bytes; \(v)")
        // Read-only: the partial last fragment cannot be cut off, so the file is either whole to
        // its last fragment or reported damaged after its intact part.
        #expect(v.ffmpegClean || report.status == 3, "neither playable nor reported damaged: \(v)")
        #expect(v.duration > 0 && v.frames > 0, "\(v)")
        #expect(try recordsAgain(r.rig), "the output did not record again after the read-only remount")
        try disk.remountFromTheDevice()
        let onDevice = try verdict(r.path)
        print("remount-ro, on the device after remounting: \(size(r.path)) bytes; \(onDevice)")
        #expect(onDevice.ffmpegClean && onDevice.frames >= r.summary.videoFrames && r.summary.videoFrames > 0,
                "\(onDevice); \(r.summary.videoFrames) frames reported kept")
    }
}
