import CaptureKit
import Foundation
import Testing

/// Where the real-device tests run: inside `ci/vm-run` (CAPTUREKIT_IN_VM=1), whose kernel has the
/// vivid camera and the snd-aloop card. On a host without them the tests skip with that reason;
/// inside the VM a missing device is a failure, never a skip.
enum DeviceEnvironment {
    static let inVM = ProcessInfo.processInfo.environment["CAPTUREKIT_IN_VM"] == "1"
    static let skipReason: Comment = "needs the vivid camera and the snd-aloop card (kernel modules this machine lacks); runs inside ci/vm-run"

    /// The vivid capture node, if any.
    static var vividNode: String? {
        (try? V4L2Driver().discoverDevices())?.first { $0.modelID.hasPrefix("vivid") }?.uniqueID
    }

    static var available: Bool { inVM || vividNode != nil }

    static let loopbackCapture = "hw:Loopback,1,0"
    static let loopbackPlayback = "hw:Loopback,0,0"

    struct Failure: Error, CustomStringConvertible { var description: String }

    static func requireVivid() throws -> String {
        guard let node = vividNode else { throw Failure(description: "no vivid capture node under /dev/video* (is the vivid module loaded?)") }
        return node
    }

    /// The registry's device object for a unique ID, found through discovery.
    static func device(_ registry: DeviceRegistry, _ id: String) throws -> CaptureDevice {
        guard let device = try registry.devices().first(where: { $0.uniqueID == id }) else {
            throw Failure(description: "\(id) is not among the discovered devices")
        }
        return device
    }

    /// A 1 kHz sine at −6 dBFS, mono S16 at 48 kHz, as a WAV file for aplay.
    static func writeTone(seconds: Int, to path: String) throws {
        let rate = 48_000, count = rate * seconds
        var data = Data()
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); u32(UInt32(36 + count * 2)); data.append(contentsOf: Array("WAVE".utf8))
        data.append(contentsOf: Array("fmt ".utf8)); u32(16); u16(1); u16(1); u32(UInt32(rate)); u32(UInt32(rate * 2)); u16(2); u16(16)
        data.append(contentsOf: Array("data".utf8)); u32(UInt32(count * 2))
        for i in 0..<count {
            let v = Int16((sin(2 * Double.pi * 1000 * Double(i) / Double(rate)) * 16_384).rounded())
            u16(UInt16(bitPattern: v))
        }
        try data.write(to: URL(fileURLWithPath: path))
    }

    struct ToolResult { var status: Int32; var stdout: String; var stderr: String }

    /// Runs a tool from PATH and collects its output.
    static func run(_ tool: String, _ arguments: [String]) throws -> ToolResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let errData = Locked(Data())
        let errRead = DispatchSemaphore(value: 0)
        Thread {
            errData.withLock { $0 = err.fileHandleForReading.readDataToEndOfFile() }
            errRead.signal()
        }.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        errRead.wait()   // the reader saw end of file (the tool closed its stderr)
        return ToolResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                          stderr: errData.withLock { String(decoding: $0, as: UTF8.self) })
    }

    /// Starts a tool in the background (e.g. the tone player).
    static func launch(_ tool: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }

    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "capturekit-device-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// ffprobe's streams of a file, frames counted by decoding.
    static func probe(_ path: String) throws -> [[String: Any]] {
        let r = try run("ffprobe", ["-v", "error", "-count_frames", "-show_streams", "-of", "json", path])
        guard r.status == 0, let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any],
              let streams = json["streams"] as? [[String: Any]] else { throw Failure(description: "ffprobe failed on \(path): \(r.stderr)") }
        return streams
    }

    /// Records the drops a registry's drivers report for `node`, with their PTS, until cancelled
    /// (only this registry's drivers post to its event center).
    static func dropLog(_ registry: DeviceRegistry, node: String) -> Task<[(time: Double, count: Int)], Never> {
        let events = registry.driverEvents.events()
        return Task {
            var drops: [(time: Double, count: Int)] = []
            for await event in events {
                if case .samplesDropped(let id, _, let count, let time) = event, id == node { drops.append((time.seconds, count)) }
            }
            return drops
        }
    }

    /// The frames of `drops` that were due inside a recording's span: from its first frame for
    /// `limit` (its `maxRecordedDuration`). A drop of n frames is reported with the PTS t of the
    /// frame after the gap, so its frames were due at t − k·`period`, k = 1…n. Counting the drops
    /// reported up to the file's last frame (as this did before) misses the frames lost just before
    /// the frame that ended the recording at its limit: that frame is not in the file and comes
    /// after the file's end, yet the frames the gap before it lost were due inside the span.
    static func dropped(_ drops: [(time: Double, count: Int)], during summary: RecordingSummary,
                        limit: Double, period: Double) throws -> Int {
        guard let start = summary.startTime else { throw Failure(description: "the recording has no start time") }
        return dropped(drops, from: start, limit: limit, period: period)
    }

    /// The same for a recording whose first frame is at `start`.
    static func dropped(_ drops: [(time: Double, count: Int)], from start: Double, limit: Double, period: Double) -> Int {
        var count = 0
        for drop in drops {
            for k in 1...max(1, drop.count) {
                let due = drop.time - Double(k) * period
                if due >= start - period / 2 && due < start + limit - period / 2 { count += 1 }
            }
        }
        return count
    }

    /// Waits until `condition` holds, looking every 10 ms, until `deadline`; then throws a failure
    /// that names what it waited for. The one deadline-bounded poll of these tests, for states that
    /// announce themselves with no event (a recorded duration, a file on disk, a process's state).
    static func eventually(_ what: String, until deadline: ContinuousClock.Instant,
                           _ condition: () throws -> Bool) async throws {
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw Failure(description: "timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The same, within `timeout` from now.
    static func eventually(_ what: String, within timeout: Duration, _ condition: () throws -> Bool) async throws {
        try await eventually(what, until: ContinuousClock.now + timeout, condition)
    }

    /// The same, for synchronous tests: blocks the calling thread (never call it on the cooperative pool).
    static func eventuallyBlocking(_ what: String, within timeout: Duration, _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw Failure(description: "timed out waiting for \(what)") }
            usleep(10_000)
        }
    }

    /// Whether something plays into snd-aloop's playback side (its first substream is RUNNING):
    /// only then does the capture side offer exactly the player's format.
    static var loopbackIsPlaying: Bool {
        ((try? String(contentsOfFile: "/proc/asound/Loopback/pcm0p/sub0/status", encoding: .utf8)) ?? "").contains("RUNNING")
    }

    /// Whether something captures from snd-aloop's capture side (`hw:Loopback,1,0` is RUNNING).
    static var loopbackIsCapturing: Bool {
        ((try? String(contentsOfFile: "/proc/asound/Loopback/pcm1c/sub0/status", encoding: .utf8)) ?? "").contains("RUNNING")
    }

    /// The frames of `drops` whose gap ends at a frame the file holds (a drop is reported with the
    /// PTS of the frame after the gap; `frameTimes` are the file's, measured from the recording's
    /// start). The recording's first frame is left out: a gap before it is the session's warm-up.
    static func dropped(_ drops: [(time: Double, count: Int)], beforeFramesAt frameTimes: [Double],
                        of summary: RecordingSummary, tolerance: Double) throws -> Int {
        guard let start = summary.startTime else { throw Failure(description: "the recording has no start time") }
        let inside = frameTimes.dropFirst()
        return drops.filter { drop in inside.contains { abs($0 - (drop.time - start)) <= tolerance } }.reduce(0) { $0 + $1.count }
    }

    /// The `capture` tool SwiftPM built beside the test bundle.
    static var captureTool: String {
        let tests = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        return tests.deletingLastPathComponent().appendingPathComponent("capture").path
    }
}
