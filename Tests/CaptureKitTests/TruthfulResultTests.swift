import CaptureKit
import Foundation
import Testing

/// Every step's result told truthfully (issue 39, class 3): a defragmentation the disk cannot hold,
/// a recording with no media, a file put at the path while recording, and `inspect` on files in
/// which nothing decodes. Each drives the real `capture` binary or the library end to end.
@Suite struct TruthfulResultTests {
    static func capture(_ arguments: [String]) throws -> TestSupport.ToolResult {
        try TestSupport.run(CommandLineTests.binary, arguments)
    }

    static let recordArguments = ["record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "2", "--pace", "virtual",
                                  "--preset", "ultrafast", "--fragment-interval", "0.5"]

    /// Names in `folder` that start with "." (a leftover temporary copy would).
    static func hiddenFiles(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasPrefix(".") }
    }

    /// The disk holds the recording but not its defragmented copy: the fragmented file is kept and
    /// plays, the summary says the defragmentation failed and why, and the exit status is 3.
    @Test(.enabled(if: SmallDisk.mountable, SmallDisk.skipReason))
    func aDefragmentationTheDiskCannotHoldIsReportedAndTheFragmentsKept() throws {
        // The same recording (virtual pace, same seed) on a roomy disk gives its size.
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let reference = try Self.capture(Self.recordArguments + ["\(dir)/ref.mp4"])
        #expect(reference.status == 0, "\(reference.stderr)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: "\(dir)/ref.mp4")[.size] as? Int)
        // Room for the recording and half of a copy (in whole pages).
        let diskBytes = (size + size / 2 + 4095) / 4096 * 4096
        let disk = try SmallDisk(size: String(diskBytes))
        defer { disk.unmount() }
        let path = "\(disk.path)/take.mp4"
        let run = try Self.capture(Self.recordArguments + [path])
        #expect(run.status == 3, "exit \(run.status): \(run.stderr)")
        #expect(run.stderr.contains("not defragmented") && run.stderr.contains("no room"), "\(run.stderr)")
        #expect(run.stdout.contains("defragmentation FAILED") && !run.stdout.contains("then defragmented"), "\(run.stdout)")
        #expect(run.stdout.contains("file usable: true"), "\(run.stdout)")
        // The file kept is the fragmented recording, complete: it decodes, with every frame.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.range(of: Data("moof".utf8)) != nil, "the kept file is fragmented")
        let streams = try TestSupport.probeStreams(path)
        let video = try #require(streams.first { $0["codec_type"] as? String == "video" })
        #expect(video["nb_read_frames"] as? String == "60")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
        // The partial copy is gone, nothing else was left beside it.
        #expect(Self.hiddenFiles(disk.path).isEmpty, "\(Self.hiddenFiles(disk.path))")
        // --json says the same in the recording's summary.
        #expect(unlink(path) == 0)
        let json = try Self.capture(Self.recordArguments + ["--json", "\(disk.path)/again.mp4"])
        #expect(json.status == 3, "exit \(json.status): \(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let recording = try #require(object["recording"] as? [String: Any])
        let problem = try #require(recording["defragmentationError"] as? String)
        #expect(problem.contains("no room for the defragmented copy"), "\(problem)")
        #expect(recording["fileIsUsable"] as? Bool == true)
    }

    /// A file put at the path while the recording was being finished is never read, rewritten or
    /// removed: the defragmenter checks the file at the path is the one written (device + inode).
    @Test func theDefragmenterLeavesAFilePutAtThePathAlone() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/take.mp4"
        let run = try Self.capture(Self.recordArguments + ["--keep-fragments", path])
        #expect(run.status == 0, "\(run.stderr)")
        let recording = try #require(FileIdentity(path: path))
        // Someone moves the recording away and puts their own file at its name.
        #expect(rename(path, "\(dir)/moved.mp4") == 0)
        let theirs = Data("someone else's file\n".utf8)
        try theirs.write(to: URL(fileURLWithPath: path))
        #expect(throws: MovieDefragmenter.replaced(path)) {
            try MovieDefragmenter.defragment(path: path, fileType: .mp4, recording: recording)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == theirs)
        #expect(Self.hiddenFiles(dir).isEmpty)
        // With the recording back at its name, it is defragmented in place of itself.
        #expect(unlink(path) == 0 && rename("\(dir)/moved.mp4", path) == 0)
        let now = try MovieDefragmenter.defragment(path: path, fileType: .mp4, recording: recording)
        #expect(now != nil && now == FileIdentity(path: path) && now != recording)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.range(of: Data("moof".utf8)) == nil, "defragmented")
        #expect(try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"]).status == 0)
        // A leftover temporary copy of another run is not removed: the copy takes another name.
        let leftover = "\(dir)/.again.mp4.defragmenting"
        try Data("leftover".utf8).write(to: URL(fileURLWithPath: leftover))
        #expect(try Self.capture(Self.recordArguments + ["\(dir)/again.mp4"]).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: leftover)) == Data("leftover".utf8))
        #expect(Self.hiddenFiles(dir) == [".again.mp4.defragmenting"])
    }

    /// `--duration 1e-9` lets no sample in: not usable, exit 1 with a clear error, no file kept
    /// (as AVFoundation reports a recording that captured nothing), for MP4 and MKV.
    @Test func aRecordingWithNoMediaIsAnErrorAndKeepsNoFile() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["empty.mp4", "empty.mkv", "empty.mov"] {
            let run = try Self.capture(["record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "1e-9",
                                        "--pace", "virtual", "\(dir)/\(name)"])
            #expect(run.status == 1, "\(name): exit \(run.status)")
            #expect(run.stderr.contains("nothing was captured"), "\(name): \(run.stderr)")
            #expect(!run.stdout.contains("file usable: true"), "\(name): \(run.stdout)")
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/\(name)"), "\(name) kept")
        }
    }

    /// `inspect` exits 4 ("nothing decodes") on a file that opens but holds no media: an MP4 without
    /// streams, and an MKV whose clusters hold no packets.
    @Test func inspectFailsOnFilesWithNothingToDecode() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // An MP4 with a header and no streams (what an empty recording used to leave).
        let streamless = "\(dir)/streamless.mp4"
        try Self.writeStreamlessMP4(streamless)
        let probe = try TestSupport.run("ffprobe", ["-v", "error", "-show_entries", "format=nb_streams", "-of", "csv=p=0", streamless])
        #expect(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(probe.stdout) \(probe.stderr)")
        let a = try Self.capture(["inspect", streamless])
        #expect(a.status == 4, "exit \(a.status): \(a.stdout) \(a.stderr)")
        #expect(a.stdout.contains("check media: FAILED") && a.stdout.contains("no streams"), "\(a.stdout)")
        // An MKV recorded for real, its blocks turned into Void elements: clusters with no packets.
        let mkv = "\(dir)/take.mkv"
        #expect(try Self.capture(["record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual", "--preset", "ultrafast", mkv]).status == 0)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: mkv)))
        let voided = MatroskaBlocks.voidBlocks(&bytes)
        #expect(voided == 15)
        let empty = "\(dir)/no-packets.mkv"
        try Data(bytes).write(to: URL(fileURLWithPath: empty))
        let count = try TestSupport.run("ffprobe", ["-v", "error", "-count_packets", "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", empty])
        // ffprobe reads no packet from it ("N/A": none counted).
        #expect(["0", "N/A"].contains(count.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(count.stdout)")
        let b = try Self.capture(["inspect", "--json", empty])
        #expect(b.status == 4, "exit \(b.status): \(b.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(b.stdout.utf8)) as? [String: Any])
        let checks = try #require(json["checks"] as? [[String: Any]])
        #expect(checks.contains { $0["name"] as? String == "media" && $0["passed"] as? Bool == false
                                   && ($0["detail"] as? String)?.contains("no packets: nothing to decode") == true }, "\(checks)")
        // The untouched recording still passes.
        #expect(try Self.capture(["inspect", mkv]).status == 0)
    }

    /// A minimal MP4 with no tracks: ftyp, and a moov holding only mvhd.
    static func writeStreamlessMP4(_ path: String) throws {
        func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
            let size = UInt32(8 + body.count)
            return [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)] + Array(type.utf8) + body
        }
        var mvhd = [UInt8](repeating: 0, count: 100)
        mvhd[15] = 0xE8; mvhd[14] = 0x03  // timescale 1000
        mvhd[21] = 0x01; mvhd[24] = 0x01  // rate 1.0, volume 1.0
        for (i, v) in [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000].enumerated() {
            let at = 36 + i * 4
            mvhd[at] = UInt8(v >> 24 & 0xFF); mvhd[at + 1] = UInt8(v >> 16 & 0xFF); mvhd[at + 2] = UInt8(v >> 8 & 0xFF); mvhd[at + 3] = UInt8(v & 0xFF)
        }
        mvhd[99] = 1  // next track ID
        let file = box("ftyp", Array("isom".utf8) + [0, 0, 2, 0] + Array("isomiso2mp41".utf8)) + box("moov", box("mvhd", mvhd))
        try Data(file).write(to: URL(fileURLWithPath: path))
    }
}

/// Walks a Matroska file's EBML elements (Segment → Cluster → blocks).
enum MatroskaBlocks {
    /// Turns every SimpleBlock and BlockGroup inside a Cluster into a Void element of the same size
    /// (the demuxer skips Void), so the clusters stay and hold no packets; returns how many.
    static func voidBlocks(_ b: inout [UInt8]) -> Int {
        func vint(_ p: Int, keepMarker: Bool) -> (value: UInt64, length: Int) {
            let first = b[p]
            var length = 1, mask: UInt8 = 0x80
            while length <= 8, first & mask == 0 { mask >>= 1; length += 1 }
            var value = UInt64(keepMarker ? first : first & (mask &- 1))
            for i in 1..<length { value = value << 8 | UInt64(b[p + i]) }
            return (value, length)
        }
        func walk(_ start: Int, _ end: Int, depth: Int) -> Int {
            var p = start, count = 0
            while p < end, p < b.count {
                let id = vint(p, keepMarker: true), size = vint(p + id.length, keepMarker: false)
                let body = p + id.length + size.length
                let unknown = size.value == (UInt64(1) << (7 * UInt64(size.length))) - 1
                let bodyEnd = unknown ? end : min(end, body + Int(size.value))
                if id.value == 0x1853_8067 || id.value == 0x1F43_B675 {
                    count += walk(body, bodyEnd, depth: depth + 1)
                } else if depth == 2, id.value == 0xA3 || id.value == 0xA0 {
                    b[p] = 0xEC
                    count += 1
                }
                p = bodyEnd
            }
            return count
        }
        return walk(0, b.count, depth: 0)
    }
}
