import Foundation
import Testing

/// The soak's short form on every test run: capture-soak in a process of its own (so other tests'
/// memory does not blur its numbers) for 6 minutes of media, then every movie it wrote decoded by
/// ffmpeg. ci/soak runs the hour and plots it.
@Suite struct SoakTests {
    @Test func sixMinutesOfMediaKeepHeapDescriptorsAndThreadsFlat() async throws {
        let soak = (CommandLineTests.binary as NSString).deletingLastPathComponent + "/capture-soak"
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Minutes of waiting on a child process: off the cooperative pool (two threads on two cores),
        // which the other tests need.
        let result = try await offPool(soak, ["--minutes", "6", "--dir", dir])
        let rows = result.stdout.split(separator: "\n").filter { $0.first?.isNumber == true }
            .map { $0.split(separator: ",").compactMap { Int($0) } }
        #expect(rows.count == 6 && rows.allSatisfy { $0.count == 8 }, "one sample per minute: \(result.stdout)")
        guard rows.count == 6 else { return }
        // From minute 2: the heap in use, file descriptors and threads stay flat. Resident memory
        // gets 10 % here: glibc makes a malloc arena per new encoder thread until it has 8 per core,
        // which takes a few minutes to settle (the hour in ci/soak holds RSS to 5 %).
        let base = rows[1], later = rows.dropFirst()
        #expect(later.map { $0[2] }.max()! <= base[2] * 105 / 100, "heap in use (kB) by minute: \(rows.map { $0[2] })")
        #expect(later.map { $0[1] }.max()! <= base[1] * 110 / 100, "RSS (kB) by minute: \(rows.map { $0[1] })")
        #expect(later.map { $0[3] }.max()! <= base[3] + 1, "open fds by minute: \(rows.map { $0[3] })")
        // Dispatch adds worker threads while its queues are busy and retires them when idle, so a
        // sample on a loaded machine can catch two or three more; a leak grows minute by minute.
        #expect(later.map { $0[4] }.max()! <= base[4] + 3, "threads by minute: \(rows.map { $0[4] })")
        #expect((rows.last?[6] ?? 0) >= 30, "a photo every 10 s")
        // Every file it wrote decodes cleanly.
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".mp4") }
        #expect(files.count >= 5)
        for file in files {
            let decode = try await offPool("ffmpeg", ["-v", "error", "-i", "\(dir)/\(file)", "-f", "null", "-"])
            #expect(decode.status == 0 && decode.stderr.isEmpty, "\(file): \(decode.stderr)")
        }
    }
}
