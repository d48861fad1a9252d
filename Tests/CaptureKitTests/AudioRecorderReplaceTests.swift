import CaptureKit
import Foundation
import Testing

/// The library's `AudioRecorder` overwrites what is at its path without being asked, as
/// AVAudioRecorder does — but only a regular file, and atomically (recorded beside it, renamed over
/// it when finished); a directory, FIFO, symlink or device node there is refused and left exactly as
/// it was, and `deleteRecording` removes nothing but a regular file.
@Suite struct AudioRecorderReplaceTests {
    @Test func anExistingRegularFileIsReplacedByRenameAndNothingElseEver() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/take.wav"
        try Data("an old take".utf8).write(to: URL(fileURLWithPath: path))
        var old = stat(), new = stat()
        #expect(lstat(path, &old) == 0)
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav), pace: .virtual)
        #expect(recorder.record(forDuration: 0.5))
        await recorder.waitUntilFinished()
        #expect(recorder.error == nil, "\(String(describing: recorder.error))")
        #expect(lstat(path, &new) == 0 && new.st_mode & S_IFMT == S_IFREG && new.st_ino != old.st_ino)
        let probe = try await offPool("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        let seconds = Double(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(abs(seconds - 0.5) < 0.05, "ffprobe: \(probe.stdout) \(probe.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["take.wav"], "a temporary was left beside it")

        // Anything else at the path: refused at record(), untouched, and not deleted by deleteRecording().
        var kinds: [(String, () throws -> Void)] = [
            ("directory", { try FileManager.default.createDirectory(atPath: dir + "/directory.wav", withIntermediateDirectories: false)
                            try Data("inside".utf8).write(to: URL(fileURLWithPath: dir + "/directory.wav/inside.txt")) }),
            ("fifo", { _ = mkfifo(dir + "/fifo.wav", 0o644) }),
            ("symlink", { try FileManager.default.createSymbolicLink(atPath: dir + "/symlink.wav", withDestinationPath: path) }),
        ]
        if geteuid() == 0 {
            kinds.append(("device", {
                var null = stat()
                _ = stat("/dev/null", &null)
                _ = mknod(dir + "/device.wav", S_IFCHR | 0o666, null.st_rdev)
            }))
        }
        let target = OutputPathKindsTests.snapshot(path)
        for (kind, make) in kinds {
            let hostile = dir + "/\(kind).wav"
            try make()
            let before = OutputPathKindsTests.snapshot(hostile)
            let refused = try AudioRecorder(path: hostile, settings: AudioRecorderSettings(format: .wav), pace: .virtual)
            #expect(!refused.record(forDuration: 0.2), "\(kind)")
            await refused.waitUntilFinished()
            guard case .outputNotReplaceable(let at, _) = refused.error else {
                Issue.record("\(kind): \(String(describing: refused.error))")
                continue
            }
            #expect(at == hostile)
            #expect(!refused.deleteRecording(), "\(kind)")
            #expect(OutputPathKindsTests.snapshot(hostile) == before, "\(kind) changed")
        }
        #expect(OutputPathKindsTests.snapshot(path) == target, "the symlink's target changed")
    }
}
