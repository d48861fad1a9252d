import CaptureKit
import Foundation
import Testing

/// `capture inspect` on damaged files: a report of what is intact and where the damage starts,
/// with its own exit codes (3: damaged, 4: nothing decodes), never a bare decode error.
@Suite(.serialized) struct DamagedFileInspectionTests {
    /// A 4 s simulator recording in 1 s fragments (1280x720 H.264 + AAC), made once.
    static let recording = DamageFixture()

    final class DamageFixture: Sendable {
        private let made = Locked<(fragmented: String, plain: String)?>(nil)

        func paths() async throws -> (fragmented: String, plain: String) {
            if let made = made.withLock({ $0 }) { return made }
            let dir = try TestSupport.temporaryDirectory()
            var result: (String, String) = (dir + "/good.mp4", dir + "/plain.mp4")
            // The fragmented one keeps its fragments (a finished movie is otherwise defragmented).
            for (path, interval) in [(result.0, ["--fragment-interval", "1", "--keep-fragments"]), (result.1, ["--fragment-interval", "0"])] {
                let run = try await offPool(CommandLineTests.binary, [
                    "record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "4", "--size", "1280x720",
                    "--pace", "virtual", "--preset", "ultrafast", "--bitrate", "2000000",
                ] + interval + [path])
                #expect(run.status == 0, "\(run.stderr)")
            }
            made.withLock { $0 = result }
            result = made.withLock { $0! }
            return result
        }
    }

    private func inspect(_ path: String) async throws -> (status: Int32, text: String, stderr: String, json: [String: Any]) {
        let text = try await offPool(CommandLineTests.binary, ["inspect", path])
        let json = try await offPool(CommandLineTests.binary, ["inspect", "--json", path])
        #expect(json.status == text.status)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        return (text.status, text.stdout, text.stderr, object)
    }

    private func copy(_ path: String, as name: String, bytes: Int? = nil) throws -> String {
        let out = (path as NSString).deletingLastPathComponent + "/" + name
        try? FileManager.default.removeItem(atPath: out)
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        if let bytes { data = data.prefix(bytes) }
        try data.write(to: URL(fileURLWithPath: out))
        return out
    }

    @Test func aTruncatedMP4ReportsItsIntactPart() async throws {
        let good = try await Self.recording.paths().fragmented
        let size = try #require(try FileManager.default.attributesOfItem(atPath: good)[.size] as? Int)
        let cut = try copy(good, as: "cut.mp4", bytes: size * 6 / 10)
        let r = try await inspect(cut)
        #expect(r.status == 3, "\(r.text)\(r.stderr)")
        #expect(r.text.contains("DAMAGED (truncated)"), "\(r.text)")
        #expect(r.text.contains("intact:") && r.text.contains("damage starts:"))
        #expect(!r.stderr.contains("decoding a packet failed") && r.stderr.contains("is damaged (truncated)"), "\(r.stderr)")
        let damage = try #require(r.json["damage"] as? [String: Any])
        #expect(damage["kind"] as? String == "truncated")
        let frames = try #require(damage["intactVideoFrames"] as? Int)
        let seconds = try #require(damage["intactDuration"] as? Double)
        #expect(frames > 30 && frames < 120, "\(frames) intact frames of 120")
        #expect(abs(seconds - Double(frames) / 30) < 0.001, "\(seconds) s for \(frames) frames")
        let first = try #require(damage["firstDamagedPacket"] as? [String: Any])
        #expect((first["byteOffset"] as? Int).map { $0 < size * 6 / 10 } == true)
        #expect(first["mediaType"] as? String != nil && first["time"] as? Double != nil)
        let layout = try #require(damage["layout"] as? [String: Any])
        #expect(layout["truncated"] as? Bool == true)
        // The markers of the intact part: frames 0…n−1, none missing.
        #expect(r.json["hasMarkers"] as? Bool == true)
        let analysis = try #require(r.json["analysis"] as? [String: Any])
        let indices = try #require(analysis["frameIndices"] as? [Int])
        #expect(Array(indices.prefix(frames)) == Array(0..<frames))
        #expect(r.text.contains("markers (intact part): "))
    }

    @Test func aFileCorruptedInTheMiddleSaysWhereAndHowMuchFollows() async throws {
        let good = try await Self.recording.paths().fragmented
        let damaged = try copy(good, as: "middle.mp4")
        // Overwrite 4 KiB in the middle of the largest media box with a fixed pseudo-random pattern.
        let layout = try #require(ContainerLayout.read(path: damaged))
        let mdat = try #require(layout.boxes.filter { $0.type == "mdat" }.max { $0.size < $1.size })
        let at = mdat.offset + mdat.size / 2
        var state: UInt32 = 12345
        let junk = (0..<4096).map { _ -> UInt8 in
            state = state &* 1_103_515_245 &+ 12345
            return UInt8(truncatingIfNeeded: state >> 16)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: damaged))
        try handle.seek(toOffset: UInt64(at))
        handle.write(Data(junk))
        try handle.close()

        let r = try await inspect(damaged)
        #expect(r.status == 3, "\(r.text)\(r.stderr)")
        #expect(r.text.contains("DAMAGED (corrupt)"), "\(r.text)")
        let damage = try #require(r.json["damage"] as? [String: Any])
        #expect(damage["kind"] as? String == "corrupt")
        #expect((damage["packetsAfterDamage"] as? Int ?? 0) > 0)
        let seconds = try #require(damage["intactDuration"] as? Double)
        #expect(seconds > 0 && seconds < 4)
        let first = try #require(damage["firstDamagedPacket"] as? [String: Any])
        let offset = try #require(first["byteOffset"] as? Int)
        #expect(Int64(offset) >= mdat.offset && Int64(offset) < mdat.offset + mdat.size, "damage at \(offset), junk at \(at)")
        #expect(Int64(offset) <= at + 4096)
    }

    @Test func aDestroyedBoxHeaderIsWhereTheDamageStarts() async throws {
        let good = try await Self.recording.paths().fragmented
        let damaged = try copy(good, as: "header.mp4")
        let layout = try #require(ContainerLayout.read(path: damaged))
        let moofs = layout.boxes.filter { $0.type == "moof" }
        try #require(moofs.count >= 3)
        let victim = moofs[2]
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: damaged))
        try handle.seek(toOffset: UInt64(victim.offset))
        handle.write(Data([0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x11, 0x22, 0x33]))
        try handle.close()

        let r = try await inspect(damaged)
        #expect(r.status == 3, "\(r.text)\(r.stderr)")
        #expect(r.text.contains("no valid box starts at byte \(victim.offset)"), "\(r.text)")
        let damage = try #require(r.json["damage"] as? [String: Any])
        #expect(damage["kind"] as? String == "corrupt")
        #expect((damage["layout"] as? [String: Any])?["damageOffset"] as? Int == Int(victim.offset))
        // The two fragments before it are intact: 2 s at 1 s fragments.
        #expect((damage["intactVideoFrames"] as? Int ?? 0) >= 30)
    }

    /// The top-level boxes of an MP4: (type, offset, size).
    private func topLevelBoxes(_ data: Data) -> [(type: String, offset: Int, size: Int)] {
        var boxes: [(String, Int, Int)] = []
        var offset = 0
        let bytes = [UInt8](data)
        func be(_ at: Int, _ count: Int) -> Int { (0..<count).reduce(0) { $0 << 8 | Int(bytes[at + $1]) } }
        while offset + 8 <= bytes.count {
            var size = be(offset, 4)
            if size == 1, offset + 16 <= bytes.count { size = be(offset + 8, 8) }
            if size == 0 { size = bytes.count - offset }
            guard size >= 8 else { break }
            boxes.append((String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self), offset, size))
            offset += size
        }
        return boxes
    }

    /// What an MP4 writer that puts its index last leaves when it is stopped before the end (other
    /// programs' files; CaptureKit's own unfragmented recordings are written in hidden fragments
    /// and end as one moov before the media): the header and the media, no index.
    @Test func aMovieWithoutItsIndexDecodesNothing() async throws {
        let plain = try await Self.recording.paths().plain
        let data = try Data(contentsOf: URL(fileURLWithPath: plain))
        let boxes = topLevelBoxes(data)
        let types = boxes.map(\.type)
        #expect(!types.contains("moof"), "a finished unfragmented recording has no fragments: \(types)")
        let moov = try #require(types.firstIndex(of: "moov")), mdat = try #require(types.firstIndex(of: "mdat"))
        #expect(moov < mdat, "the index comes first: \(types)")
        let ftyp = try #require(boxes.first { $0.type == "ftyp" }), media = boxes[mdat]
        let cut = (plain as NSString).deletingLastPathComponent + "/plaincut.mp4"
        try? FileManager.default.removeItem(atPath: cut)
        let indexless = data.subdata(in: ftyp.offset..<ftyp.offset + ftyp.size) + data.subdata(in: media.offset..<min(media.offset + media.size, media.offset + 100_000))
        try indexless.write(to: URL(fileURLWithPath: cut))
        let r = try await inspect(cut)
        #expect(r.status == 4, "\(r.text)\(r.stderr)")
        #expect(r.text.contains("no 'moov' box"), "\(r.text)")
        let damage = try #require(r.json["damage"] as? [String: Any])
        #expect(damage["kind"] as? String == "unreadable")
        #expect(damage["intactVideoFrames"] as? Int == 0)
        let reported = try #require((damage["layout"] as? [String: Any])?["boxes"] as? [[String: Any]])
        #expect(reported.last?["type"] as? String == "mdat")

        let noise = try copy(plain, as: "noise.mp4", bytes: 0)
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }).write(to: URL(fileURLWithPath: noise))
        let n = try await inspect(noise)
        #expect(n.status == 4, "\(n.text)\(n.stderr)")
        #expect(n.text.contains("DAMAGED (unreadable)"))
    }

    @Test func aMatroskaFileCutBetweenPacketsIsCaughtByItsClaimedDuration() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let whole = dir + "/whole.mkv"
        let run = try await offPool(CommandLineTests.binary, [
            "record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "2", "--pace", "virtual",
            "--preset", "ultrafast", "--fragment-interval", "1", whole,
        ])
        try #require(run.status == 0, "\(run.stderr)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: whole)[.size] as? Int)
        let cut = try copy(whole, as: "cut.mkv", bytes: size * 6 / 10)
        let r = try await inspect(cut)
        #expect(r.status == 3, "\(r.text)\(r.stderr)")
        let damage = try #require(r.json["damage"] as? [String: Any])
        #expect(damage["kind"] as? String == "truncated")
        #expect((damage["summary"] as? String)?.contains("the container says the media lasts") == true)
        #expect((damage["intactDuration"] as? Double).map { $0 > 0.3 && $0 < 1.8 } == true)
        #expect(try await inspect(whole).status == 0)
    }

    @Test func aWholeFileHasNoDamage() async throws {
        let good = try await Self.recording.paths().fragmented
        let r = try await inspect(good)
        #expect(r.status == 0, "\(r.text)\(r.stderr)")
        #expect(r.json["damage"] == nil)
        #expect(r.json["decodedVideoFrames"] as? Int == 120)
    }
}
