import CaptureKit
import Foundation
import Testing

/// Output paths that try to make a recorder write somewhere else, hang it, or clobber a file: each is
/// refused with a typed error before anything is written (`OutputPath`: lstat, then
/// `O_CREAT|O_EXCL|O_NOFOLLOW`), and the thing at the path is left exactly as it was.
@Suite struct HostilePathTests {
    static func record(_ path: String) throws -> TestSupport.ToolResult {
        try TestSupport.run(CommandLineTests.binary, ["record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual",
                                                      "--preset", "ultrafast", path])
    }

    @Test func symlinksFIFOsAndFoldersAreRefusedAndLeftAlone() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A symlink to someone's file: recording must not overwrite the target.
        let victim = "\(dir)/precious.txt"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: "\(dir)/link.mp4", withDestinationPath: victim)
        let linked = try Self.record("\(dir)/link.mp4")
        #expect(linked.status != 0 && linked.stderr.contains("already exists"), "\(linked.stderr)")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep me")
        // A dangling symlink: recording must not create its target.
        try FileManager.default.createSymbolicLink(atPath: "\(dir)/dangling.mp4", withDestinationPath: "\(dir)/elsewhere.mp4")
        let dangling = try Self.record("\(dir)/dangling.mp4")
        #expect(dangling.status != 0 && dangling.stderr.contains("already exists"), "\(dangling.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/elsewhere.mp4"))
        // A FIFO: refused at once (opening it for writing would block until a reader came).
        #expect(mkfifo("\(dir)/fifo.mp4", 0o644) == 0)
        let fifo = try Self.record("\(dir)/fifo.mp4")
        #expect(fifo.status != 0 && fifo.stderr.contains("already exists"), "\(fifo.stderr)")
        // A folder named like a movie.
        try FileManager.default.createDirectory(atPath: "\(dir)/folder.mp4", withIntermediateDirectories: false)
        let folder = try Self.record("\(dir)/folder.mp4")
        #expect(folder.status != 0 && folder.stderr.contains("already exists"), "\(folder.stderr)")
        // A path through a file (not a folder) and through a missing folder.
        let through = try Self.record("\(victim)/x.mp4")
        #expect(through.status != 0 && through.stderr.contains("folder does not exist"), "\(through.stderr)")
        // A name with a newline and spaces is just a name.
        let odd = "\(dir)/two\nlines and spaces.mp4"
        let oddRun = try Self.record(odd)
        #expect(oddRun.status == 0, "\(oddRun.stderr)")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", odd, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty)
    }

    /// The same rules through the library: the movie output, the asset writer and the exclusive claim.
    @Test func theLibraryRefusesTheSamePaths() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createSymbolicLink(atPath: "\(dir)/dangling.mov", withDestinationPath: "\(dir)/target.mov")
        #expect(throws: CaptureError.outputFileExists(path: "\(dir)/dangling.mov")) { try OutputPath.checkNew("\(dir)/dangling.mov") }
        #expect(throws: CaptureError.outputFileExists(path: "\(dir)/dangling.mov")) { try OutputPath.claim("\(dir)/dangling.mov") }
        #expect(throws: CaptureError.outputFileExists(path: "\(dir)/dangling.mov")) {
            try AssetWriter(path: "\(dir)/dangling.mov", fileType: .mov)
        }
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/target.mov"))
        try OutputPath.claim("\(dir)/fresh.mp4")
        #expect(throws: CaptureError.outputFileExists(path: "\(dir)/fresh.mp4")) { try OutputPath.claim("\(dir)/fresh.mp4") }
    }

    /// No network surface: readers open local files only, even when the path or the file's contents
    /// name a URL (an HLS playlist pointing at http://, here a local port where nothing must connect).
    @Test func readersNeverOpenANetworkURL() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let direct = try TestSupport.run(CommandLineTests.binary, ["inspect", "http://127.0.0.1:9/never.mp4"])
        #expect(direct.status != 0)
        let playlist = "\(dir)/list.m3u8"
        try "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nhttp://127.0.0.1:9/segment.ts\n#EXT-X-ENDLIST\n".write(toFile: playlist, atomically: true, encoding: .utf8)
        let nested = try TestSupport.run(CommandLineTests.binary, ["inspect", playlist])
        #expect(nested.status != 0)
        #expect(!(direct.stderr + nested.stderr).contains("Connection refused"), "\(direct.stderr)\n\(nested.stderr)")
        // The library reader given a URL: refused by the whitelist, never connected (without it,
        // libavformat would try the port and fail with "Connection refused").
        do {
            _ = try MediaFileReader(path: "http://127.0.0.1:9/never.mp4")
            Issue.record("a URL was opened")
        } catch {
            #expect(!"\(error)".contains("Connection refused"), "\(error)")
        }
    }
}
