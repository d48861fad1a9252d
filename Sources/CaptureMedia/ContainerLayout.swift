import Foundation

/// The top-level boxes of an ISO base media file (MP4, MOV, M4A), read straight from the bytes:
/// what a damaged file still holds and where it breaks, even when libavformat cannot open it
/// (an unfragmented movie cut before its `moov` was written).
public struct ContainerLayout: Sendable, Codable, Equatable {
    public struct Box: Sendable, Codable, Equatable {
        /// The four-character type (`ftyp`, `moov`, `moof`, `mdat`, …).
        public var type: String
        public var offset: Int64
        /// The size the box declares.
        public var size: Int64
        /// The bytes of it the file holds (less than `size` when the file ends inside it).
        public var bytesPresent: Int64
    }

    public var fileSize: Int64
    public var boxes: [Box]
    /// The byte offset where the layout breaks: the start of the box the file ends inside, or of
    /// a box header that is not valid. nil when the boxes tile the file exactly.
    public var damageOffset: Int64?
    /// The file ends inside its last box (it was cut short, e.g. by a full disk or a crash).
    public var truncated: Bool
    /// What is wrong, in a sentence; nil when nothing is.
    public var problem: String?
    /// The file has a `moov` box (its index, or the fragments' header).
    public var hasIndex: Bool { boxes.contains { $0.type == "moov" } }
    /// Complete `moof` boxes that have their `mdat` after them.
    public var completeFragments: Int {
        zip(boxes, boxes.dropFirst()).filter { $0.type == "moof" && $1.type == "mdat" && $1.bytesPresent == $1.size }.count
    }

    /// "ftyp, moov, 12 × moof+mdat, mfra"-style summary of the boxes.
    public var summary: String {
        var parts: [String] = []
        var i = 0
        while i < boxes.count {
            func wholeFragment(_ i: Int) -> Bool {
                i + 1 < boxes.count && boxes[i].type == "moof" && boxes[i + 1].type == "mdat" && boxes[i + 1].bytesPresent == boxes[i + 1].size
            }
            if wholeFragment(i) {
                var n = 0
                while wholeFragment(i) {
                    n += 1
                    i += 2
                }
                parts.append("\(n) × moof+mdat")
                continue
            }
            let box = boxes[i]
            parts.append(box.bytesPresent < box.size ? "\(box.type) (cut: \(box.bytesPresent) of \(box.size) bytes)" : box.type)
            i += 1
        }
        return parts.joined(separator: ", ")
    }

    /// Reads the boxes of `path`; nil when the file does not start like an ISO media file.
    public static func read(path: String) -> ContainerLayout? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let end = try? handle.seekToEnd() else { return nil }
        let fileSize = Int64(end)
        var layout = ContainerLayout(fileSize: fileSize, boxes: [], damageOffset: nil, truncated: false, problem: nil)
        var offset: Int64 = 0
        let known: Set<String> = ["ftyp", "moov", "mdat", "moof", "mfra", "free", "skip", "wide", "sidx", "styp", "uuid", "meta", "pdin", "prft", "emsg"]
        while offset < fileSize, layout.boxes.count < 1_000_000 {
            guard (try? handle.seek(toOffset: UInt64(offset))) != nil, let header = try? handle.read(upToCount: 16) else { break }
            let bytes = [UInt8](header)
            if bytes.count < 8 {
                layout.note(at: offset, truncated: true, "the file ends inside a box header at byte \(offset)")
                break
            }
            var size = Int64(bytes[0]) << 24 | Int64(bytes[1]) << 16 | Int64(bytes[2]) << 8 | Int64(bytes[3])
            let type = String(decoding: bytes[4..<8], as: UTF8.self)
            let printable = bytes[4..<8].allSatisfy { (0x20...0x7E).contains($0) }
            if size == 1 {
                guard bytes.count >= 16 else {
                    layout.note(at: offset, truncated: true, "the file ends inside the '\(type)' box header at byte \(offset)")
                    break
                }
                size = bytes[8..<16].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            } else if size == 0 {
                size = fileSize - offset  // to the end of the file
            }
            guard printable, size >= 8, layout.boxes.isEmpty ? type == "ftyp" || known.contains(type) : true else {
                if layout.boxes.isEmpty { return nil }  // not an ISO media file at all
                layout.note(at: offset, truncated: false,
                            "no valid box starts at byte \(offset) (after '\(layout.boxes.last?.type ?? "")'): the bytes from there on are damaged or overwritten")
                break
            }
            let present = min(size, fileSize - offset)
            layout.boxes.append(Box(type: type, offset: offset, size: size, bytesPresent: present))
            if present < size {
                layout.note(at: offset, truncated: true,
                            "the file ends inside the '\(type)' box at byte \(offset): it declares \(size) bytes, \(present) are present (cut at byte \(fileSize))")
                break
            }
            offset += size
        }
        if !layout.hasIndex {
            let missing = "no 'moov' box: the file has no index (an unfragmented movie gets it only when recording finishes), so no player can read its samples"
            layout.problem = layout.problem.map { $0 + "; " + missing } ?? missing
        }
        return layout
    }

    private mutating func note(at offset: Int64, truncated: Bool, _ problem: String) {
        damageOffset = offset
        self.truncated = truncated
        self.problem = problem
    }
}
