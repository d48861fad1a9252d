import CaptureAnalysis
import CaptureCore
import CaptureMedia
import Foundation

/// What `capture inspect` finds in a file: streams, timing, keyframes, and — when the file carries
/// CaptureKit's markers — frame continuity and A/V offsets, plus the checks a user asked for.
public struct InspectionReport: Sendable, Codable {
    public struct Stream: Sendable, Codable {
        public var info: MediaFileInfo.Stream
        public var packets: Int
        public var bytes: Int64
        /// Packets between keyframes (largest gap; video).
        public var maximumKeyframeInterval: Int?
        public var keyframes: Int
        /// Measured from the packet sizes and the stream's duration, bits per second.
        public var measuredBitrate: Int?
    }

    public struct Check: Sendable, Codable {
        public var name: String
        public var passed: Bool
        public var detail: String
        public init(name: String, passed: Bool, detail: String) { (self.name, self.passed, self.detail) = (name, passed, detail) }
    }

    public struct Thumbnail: Sendable, Codable {
        /// Position in presentation order, its decoded stamp (nil when unreadable) and its time.
        public var frameNumber: Int
        public var stampIndex: Int?
        public var time: Double
        /// Where it sits on the contact sheet.
        public var x: Int, y: Int, width: Int, height: Int
    }

    public var path: String
    public var format: String
    public var duration: Double?
    public var fileSize: Int64
    public var bitrate: Int?
    public var streams: [Stream]
    public var decodedVideoFrames: Int
    /// True when most frames carry a readable CaptureKit stamp.
    public var hasMarkers: Bool
    public var analysis: RecordingReport?
    public var checks: [Check]
    public var contactSheet: String?
    public var thumbnails: [Thumbnail]
    /// nil when the file is whole: every packet reads and decodes cleanly and its boxes tile it.
    public var damage: Damage?
    /// Metadata boxes (`Options.metadataBoxes`) drawn on the contact sheet's thumbnails.
    public var metadataBoxesDrawn: Int? = nil
    /// The timing plot (`Options.plotPath`): where it went and what it shows.
    public var plot: Plot? = nil

    /// What `capture inspect --plot` drew: the A/V offset panel with its points, and the frame-interval
    /// panel's axes (its points — one per frame — are left out of the report; `RecordingPlot` has them).
    public struct Plot: Sendable, Codable {
        public var path: String
        public var width: Int
        public var height: Int
        public var offsets: RecordingPlot.Panel
        public var intervals: RecordingPlot.Panel
        public var intervalCount: Int
        public var unpairedMarkers: Int
    }

    public var passed: Bool { checks.allSatisfy(\.passed) }

    /// What is wrong with a damaged file and how much of it is intact. Streams, frame counts and
    /// the marker analysis of the report cover only the intact part.
    public struct Damage: Sendable, Codable {
        public enum Kind: String, Sendable, Codable {
            /// The file ends early (a full disk, a crash, a cut copy).
            case truncated
            /// Bytes inside the file are damaged; it may go on after them.
            case corrupt
            /// Nothing in it can be read as media (no index, not a media file).
            case unreadable
        }
        public var kind: Kind
        /// One sentence: what is wrong.
        public var summary: String
        /// The first packet that does not read or decode cleanly: stream, packet number, time, byte offset.
        public var firstDamagedPacket: DecodeDamage?
        /// Seconds from the start that decode cleanly (to the end of the last clean frame or sample).
        public var intactDuration: Double
        public var intactVideoFrames: Int
        public var intactAudioDuration: Double?
        /// Packets the demuxer could still read after the damage (not decoded).
        public var packetsAfterDamage: Int
        /// The boxes of an MP4/MOV/M4A file as the bytes show them (nil for other formats).
        public var layout: ContainerLayout?
    }
}

/// One detection to outline on a contact sheet: seconds into the movie, a normalised box (native
/// orientation, origin top-left) and its type's short name (`qr`, `face`…).
public struct MetadataBox: Sendable, Hashable {
    public var time: Double
    public var x, y, width, height: Double
    public var type: String
    public init(time: Double, x: Double, y: Double, width: Double, height: Double, type: String) {
        self.time = time; self.x = x; self.y = y; self.width = width; self.height = height; self.type = type
    }
}

/// Runs the inspection; see `InspectionReport`.
public enum RecordingInspector {
    public struct Options: Sendable {
        public var expectFrames: Int?
        /// Seconds.
        public var maxAVOffset: Double?
        public var contactSheetPath: String?
        public var thumbnailCount = 12
        /// Detections to outline on the contact sheet (e.g. `capture record --metadata`'s lines):
        /// drawn on the thumbnail whose time is within 1/60 s of theirs.
        public var metadataBoxes: [MetadataBox] = []
        /// Where to write a PNG of the A/V offsets and frame intervals (`RecordingPlot`).
        public var plotPath: String?
        /// What to do when something is at the contact sheet's or the plot's path: refuse (the
        /// default), or replace a regular file there (atomically; never a folder, link, FIFO or device).
        public var existingOutput: OutputPath.Existing = .refuse
        public init(expectFrames: Int? = nil, maxAVOffset: Double? = nil, contactSheetPath: String? = nil) {
            self.expectFrames = expectFrames
            self.maxAVOffset = maxAVOffset
            self.contactSheetPath = contactSheetPath
        }
    }

    public static func inspect(path: String, options: Options = Options()) throws(CaptureError) -> InspectionReport {
        // Outputs first: refused before any work, and never the input itself.
        for out in [options.contactSheetPath, options.plotPath].compactMap({ $0 }) {
            try OutputPath.checkNew(out, existing: options.existingOutput)
            if OutputPath.isSameFile(out, path) {
                throw .outputNotReplaceable(path: out, kind: "the recording being inspected")
            }
        }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else {
            throw .fileOperationFailed(path: path, reason: "no such file")
        }
        try InputFile.requireRegular(path, what: "a media file")
        let size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        let layout = ContainerLayout.read(path: path)
        let scanReader: MediaFileReader
        do {
            scanReader = try MediaFileReader(path: path)
        } catch {
            // Nothing libavformat can open: say what the bytes show instead of the bare error.
            let why = layout?.problem ?? "not a media file libavformat can read (\(error))"
            let damage = InspectionReport.Damage(kind: .unreadable, summary: why, firstDamagedPacket: nil, intactDuration: 0,
                                                 intactVideoFrames: 0, intactAudioDuration: nil, packetsAfterDamage: 0, layout: layout)
            return InspectionReport(path: path, format: "unknown", duration: nil, fileSize: size, bitrate: nil, streams: [],
                                    decodedVideoFrames: 0, hasMarkers: false, analysis: nil, checks: [], contactSheet: nil,
                                    thumbnails: [], damage: damage)
        }
        let info = scanReader.info
        let packets = try scanReader.scanPackets(stopAtReadError: true)
        let streams = info.streams.map { stream -> InspectionReport.Stream in
            let p = packets.first { $0.index == stream.index }
            let seconds = stream.duration ?? info.duration
            return InspectionReport.Stream(
                info: stream, packets: p?.packetCount ?? 0, bytes: p?.byteCount ?? 0,
                maximumKeyframeInterval: stream.mediaType == "video" ? p?.maximumKeyframeInterval : nil,
                keyframes: p?.keyframePositions.count ?? 0,
                measuredBitrate: seconds.flatMap { $0 > 0 ? Int(Double((p?.byteCount ?? 0) * 8) / $0) : nil })
        }
        let videoPackets = streams.first { $0.info.mediaType == "video" }?.packets ?? 0
        let sheet = ContactSheetBuilder(expectedFrames: videoPackets, thumbnails: options.contactSheetPath == nil ? 0 : options.thumbnailCount)

        var analyzer = RecordingAnalyzer()
        var frames = 0
        var levels = AudioLevelTrack()
        var videoTimes: (first: Double, last: Double)?
        var frameTimes: [Double] = []
        var audioEnd: Double?
        let outcome: DecodeOutcome
        do {
            // Strict decoding that stops at the first damage: what the analysis sees is the intact part.
            outcome = try MediaFileReader(path: path).decodeUntilDamage(
                video: { frame in
                    let plane = LumaPlane(base: frame.luma, width: frame.width, height: frame.height, bytesPerRow: frame.bytesPerRow[0])
                    analyzer.addVideoFrame(plane, presentationTime: frame.presentationTime)
                    sheet.offer(frame, number: frames)
                    frames += 1
                    videoTimes = (videoTimes?.first ?? frame.presentationTime, max(videoTimes?.last ?? 0, frame.presentationTime))
                    frameTimes.append(frame.presentationTime)
                },
                audio: { samples, channels, rate, start in
                    let mono = channels == 1 ? samples : stride(from: 0, to: samples.count, by: channels).map { samples[$0] }
                    analyzer.addAudio(mono, startTime: start, sampleRate: rate)
                    levels.add(mono, rate: rate)
                    audioEnd = max(audioEnd ?? 0, start + Double(mono.count) / Double(rate))
                })
        } catch {
            throw (error as? CaptureError) ?? .codecFailure(operation: "decoding \(path)", code: -1, message: "\(error)")
        }
        var damage: InspectionReport.Damage?
        // The end of the last clean frame: its time plus the typical gap between frames.
        let gap = frames > 1 ? ((videoTimes?.last ?? 0) - (videoTimes?.first ?? 0)) / Double(frames - 1) : 0
        let videoEnd = videoTimes.map { $0.last + gap }
        // A file cut between packets (Matroska, WAV) reads cleanly to its end: only the duration its
        // header claims shows that media is missing.
        var shortfall: String?
        let decodedEnd = max(videoEnd ?? 0, audioEnd ?? 0)
        if let claimed = info.duration, decodedEnd > 0, claimed - decodedEnd > max(0.25, 3 * gap) {
            shortfall = String(format: "the container says the media lasts %.3f s, but it ends at %.3f s: the file is cut short", claimed, decodedEnd)
        }
        if outcome.damage != nil || layout?.problem != nil || shortfall != nil {
            let intact = videoEnd ?? audioEnd ?? 0
            // Frames of another stream may have decoded past the first damaged packet (interleaving);
            // the file is whole only up to that packet.
            let cleanFrames = outcome.damage?.time.map { t in frameTimes.filter { $0 < t - 1e-6 }.count } ?? frames
            damage = Self.damage(outcome, layout: layout, shortfall: shortfall, intact: intact, frames: cleanFrames, audioEnd: audioEnd)
        }
        let analysis = analyzer.report()
        let stamped = analysis.frameIndices.compactMap { $0 }.count
        let hasMarkers = frames > 0 && stamped * 2 > frames
        var checks: [InspectionReport.Check] = []
        if let expected = options.expectFrames {
            var problems: [String] = []
            if frames != expected { problems.append("\(frames) frames, not \(expected)") }
            if hasMarkers, analysis.droppedCount > 0 {
                problems.append("missing frame indices \(Self.ranges(analysis.droppedIndices)) (\(analysis.droppedCount) dropped)")
            }
            if hasMarkers, !analysis.duplicatedIndices.isEmpty { problems.append("duplicated indices \(Self.ranges(analysis.duplicatedIndices))") }
            if hasMarkers, analysis.reorderedCount > 0 { problems.append("\(analysis.reorderedCount) reordered frames") }
            checks.append(.init(name: "expect-frames", passed: problems.isEmpty,
                                detail: problems.isEmpty ? "\(frames) frames, none missing" : problems.joined(separator: "; ")))
        }
        if let limit = options.maxAVOffset {
            let offsets = analysis.syncMarkers.compactMap { m in m.offset.map { (m.second, $0) } }
            let worst = offsets.max { abs($0.1) < abs($1.1) }
            let passed = !offsets.isEmpty && abs(worst?.1 ?? 0) <= limit + 1e-9
            let detail = offsets.isEmpty ? "no paired sync markers to measure"
                : "largest offset \(Self.ms(worst!.1)) at \(worst!.0) s (limit \(Self.ms(limit)))"
            checks.append(.init(name: "max-av-offset", passed: passed, detail: detail))
        }
        var thumbnails: [InspectionReport.Thumbnail] = []
        var boxesDrawn: Int?
        if let out = options.contactSheetPath {
            var drawn = 0
            let jpeg = try sheet.render(levels: levels, analysis: analysis, thumbnails: &thumbnails,
                                        boxes: options.metadataBoxes, boxesDrawn: &drawn)
            if !options.metadataBoxes.isEmpty { boxesDrawn = drawn }
            try OutputPath.write(jpeg, to: out, existing: options.existingOutput)
        }
        var plot: InspectionReport.Plot?
        if let out = options.plotPath {
            let drawing = RecordingPlot(syncMarkers: analysis.syncMarkers, frameTimes: frameTimes)
            try drawing.write(to: out, existing: options.existingOutput)
            var intervals = drawing.intervals
            intervals.points = []
            plot = .init(path: out, width: drawing.width, height: drawing.height, offsets: drawing.offsets, intervals: intervals,
                         intervalCount: drawing.intervals.points.count, unpairedMarkers: drawing.unpairedMarkers)
        }
        return InspectionReport(
            path: path, format: info.formatName, duration: info.duration, fileSize: size,
            bitrate: info.duration.flatMap { $0 > 0 ? Int(Double(size * 8) / $0) : nil },
            streams: streams, decodedVideoFrames: frames, hasMarkers: hasMarkers,
            analysis: frames > 0 || analysis.audioDuration != nil ? analysis : nil,
            checks: checks, contactSheet: options.contactSheetPath, thumbnails: thumbnails, damage: damage,
            metadataBoxesDrawn: boxesDrawn, plot: plot)
    }

    /// Classifies the damage and says it in a sentence.
    static func damage(_ outcome: DecodeOutcome, layout: ContainerLayout?, shortfall: String?, intact: Double, frames: Int,
                       audioEnd: Double?) -> InspectionReport.Damage {
        let first = outcome.damage
        let nothing = frames == 0 && (audioEnd ?? 0) == 0
        let kind: InspectionReport.Damage.Kind
        if nothing && first == nil && layout?.hasIndex == false {
            kind = .unreadable
        } else if layout?.truncated == true || first?.packetCutShort == true || (first == nil && shortfall != nil)
                    || (first != nil && outcome.packetsAfterDamage == 0 && layout == nil) {
            kind = .truncated
        } else {
            kind = .corrupt
        }
        var parts: [String] = []
        if let problem = layout?.problem { parts.append(problem) }
        if let shortfall { parts.append(shortfall) }
        if let first {
            var at: [String] = []
            if let type = first.mediaType, let n = first.packet { at.append("\(type) packet \(n)") }
            if let t = first.time { at.append(String(format: "at %.3f s", t)) }
            if let b = first.byteOffset { at.append("byte \(b)") }
            parts.append("decoding stops at " + (at.isEmpty ? "the end" : at.joined(separator: ", ")) + ": " + first.problem)
        }
        return InspectionReport.Damage(kind: kind, summary: parts.joined(separator: "; "), firstDamagedPacket: first,
                                       intactDuration: first?.time.map { min(intact, max(0, $0)) } ?? intact, 
                                       intactVideoFrames: frames, intactAudioDuration: audioEnd.map { a in first?.time.map { min(a, $0) } ?? a },
                                       packetsAfterDamage: outcome.packetsAfterDamage, layout: layout)
    }

    /// "3, 40–44, 90" for a sorted list of indices.
    public static func ranges(_ values: [Int]) -> String {
        var parts: [String] = []
        var i = 0
        while i < values.count {
            var j = i
            while j + 1 < values.count && values[j + 1] == values[j] + 1 { j += 1 }
            parts.append(i == j ? "\(values[i])" : "\(values[i])–\(values[j])")
            i = j + 1
        }
        return parts.joined(separator: ", ")
    }

    static func ms(_ seconds: Double) -> String { String(format: "%+.1f ms", seconds * 1000) }
}

/// RMS level per 10 ms of audio, for the contact sheet's level strip.
struct AudioLevelTrack {
    static let window = 0.01
    var levels: [Double] = []
    var duration = 0.0
    private var pending: [Float] = []

    mutating func add(_ samples: [Float], rate: Int) {
        pending += samples
        let size = max(1, Int(Double(rate) * Self.window))
        while pending.count >= size {
            levels.append(ToneAnalysis.rmsDBFS(pending[0..<size]))
            pending.removeFirst(size)
        }
        duration += Double(samples.count) / Double(rate)
    }
}

/// Picks evenly spaced frames while the file decodes, then composes them into one I420 picture
/// with labels (a built-in 5×7 font) and an audio level strip, encoded with `JPEGCodec`.
final class ContactSheetBuilder {
    static let columns = 4
    static let thumbnailWidth = 320
    static let pad = 8
    static let labelHeight = 24
    static let stripHeight = 64
    let wanted: Set<Int>
    private var picked: [(number: Int, time: Double, pixels: PixelBuffer)] = []

    init(expectedFrames: Int, thumbnails: Int) {
        let count = min(thumbnails, expectedFrames)
        wanted = count <= 0 ? [] : Set((0..<count).map { count == 1 ? 0 : $0 * (expectedFrames - 1) / (count - 1) })
    }

    func offer(_ frame: DecodedVideoFrame, number: Int) {
        guard wanted.contains(number) else { return }
        let width = Self.thumbnailWidth
        let height = max(2, (frame.height * width / max(1, frame.width)) & ~1)
        let source = PixelBuffer(format: .yuv420, width: frame.width, height: frame.height)
        for plane in 0..<3 {
            let rows = plane == 0 ? frame.height : (frame.height + 1) / 2
            let bytes = plane == 0 ? frame.width : (frame.width + 1) / 2
            for row in 0..<rows {
                (source.producerBaseAddress(ofPlane: plane) + row * source.bytesPerRow[plane])
                    .copyMemory(from: frame.planes[plane] + row * frame.bytesPerRow[plane], byteCount: bytes)
            }
        }
        let thumb = PixelBuffer(format: .yuv420, width: width, height: height)
        guard (try? PixelConverter(from: .yuv420, Dimensions(width: frame.width, height: frame.height), to: .yuv420,
                                   Dimensions(width: width, height: height)).convert(source, into: thumb)) != nil else { return }
        picked.append((number, frame.presentationTime, thumb))
    }

    /// Outline colours (Y, Cb, Cr): codes green, faces yellow.
    static let codeBoxColor: (UInt8, UInt8, UInt8) = (150, 44, 21)
    static let faceBoxColor: (UInt8, UInt8, UInt8) = (210, 16, 146)

    func render(levels: AudioLevelTrack, analysis: RecordingReport, thumbnails: inout [InspectionReport.Thumbnail],
                boxes: [MetadataBox] = [], boxesDrawn: inout Int) throws(CaptureError) -> [UInt8] {
        let ordered = picked.sorted { $0.time < $1.time }
        let thumbHeight = ordered.first?.pixels.height ?? 180
        let rows = max(1, (ordered.count + Self.columns - 1) / Self.columns)
        let cellHeight = thumbHeight + Self.labelHeight
        let width = Self.pad + Self.columns * (Self.thumbnailWidth + Self.pad)
        let height = (Self.pad + rows * (cellHeight + Self.pad) + Self.stripHeight + Self.pad + 1) & ~1
        let canvas = PixelBuffer(format: .yuv420, width: width, height: height)
        let painter = Painter(canvas)
        painter.fill(x: 0, y: 0, width: width, height: height, luma: 16)
        // Frame numbers in presentation order differ from stamps only when frames are missing.
        let sortedTimes = analysis.frameIndices
        for (i, item) in ordered.enumerated() {
            let x = Self.pad + (i % Self.columns) * (Self.thumbnailWidth + Self.pad)
            let y = Self.pad + (i / Self.columns) * (cellHeight + Self.pad)
            painter.blit(item.pixels, x: x, y: y)
            let stamp = sortedTimes.indices.contains(item.number) ? sortedTimes[item.number] : nil
            let label = "#\(stamp.map(String.init) ?? "?") \(String(format: "%.3f", item.time))s"
            painter.text(label, x: x + 2, y: y + item.pixels.height + 4, scale: 2)
            thumbnails.append(.init(frameNumber: item.number, stampIndex: stamp, time: item.time,
                                    x: x, y: y, width: item.pixels.width, height: item.pixels.height))
            for box in boxes where abs(box.time - item.time) < 1.0 / 60 {
                let w = Double(item.pixels.width), h = Double(item.pixels.height)
                let bx = x + Int(box.x * w), by = y + Int(box.y * h)
                let bw = max(2, Int(box.width * w)), bh = max(2, Int(box.height * h))
                let c = box.type == "face" ? Self.faceBoxColor : Self.codeBoxColor
                for (rx, ry, rw, rh) in [(bx, by, bw, 2), (bx, by + bh - 2, bw, 2), (bx, by, 2, bh), (bx + bw - 2, by, 2, bh)] {
                    painter.fill(x: rx, y: ry, width: rw, height: rh, luma: c.0, chroma: (c.1, c.2))
                }
                boxesDrawn += 1
            }
        }
        // Audio level strip: one column per slice of the audio, height from −60…0 dBFS.
        let stripY = height - Self.pad - Self.stripHeight
        let stripWidth = width - 2 * Self.pad
        painter.fill(x: Self.pad, y: stripY, width: stripWidth, height: Self.stripHeight, luma: 40)
        if !levels.levels.isEmpty {
            for column in 0..<stripWidth {
                let from = column * levels.levels.count / stripWidth
                let to = max(from + 1, (column + 1) * levels.levels.count / stripWidth)
                let level = levels.levels[from..<min(to, levels.levels.count)].max() ?? -160
                let bar = Int((max(0, min(60, level + 60)) / 60) * Double(Self.stripHeight - 12))
                painter.fill(x: Self.pad + column, y: stripY + Self.stripHeight - bar, width: 1, height: bar, luma: 180,
                             chroma: (64, 64))
            }
        }
        painter.text("AUDIO DB", x: Self.pad + 4, y: stripY + 4, scale: 1)
        return try JPEGCodec().encode(canvas, quality: 0.9)
    }
}

/// Draws into an I420 buffer: rectangles, copies and text in a 5×7 bitmap font.
struct Painter {
    let canvas: PixelBuffer

    init(_ canvas: PixelBuffer) { self.canvas = canvas }

    func fill(x: Int, y: Int, width: Int, height: Int, luma: UInt8, chroma: (UInt8, UInt8) = (128, 128)) {
        guard width > 0, height > 0 else { return }
        let y0 = canvas.producerBaseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
        for row in max(0, y)..<min(canvas.height, y + height) {
            (y0 + row * canvas.bytesPerRow[0] + max(0, x)).update(repeating: luma, count: max(0, min(canvas.width, x + width) - max(0, x)))
        }
        for (plane, value) in [(1, chroma.0), (2, chroma.1)] {
            let p = canvas.producerBaseAddress(ofPlane: plane).assumingMemoryBound(to: UInt8.self)
            for row in max(0, y / 2)..<min((canvas.height + 1) / 2, (y + height + 1) / 2) {
                let from = max(0, x / 2), to = min((canvas.width + 1) / 2, (x + width + 1) / 2)
                if to > from { (p + row * canvas.bytesPerRow[plane] + from).update(repeating: value, count: to - from) }
            }
        }
    }

    /// Copies an I420 picture to an even position.
    func blit(_ picture: PixelBuffer, x: Int, y: Int) {
        for plane in 0..<3 {
            let d = plane == 0 ? 1 : 2
            let rows = plane == 0 ? picture.height : (picture.height + 1) / 2
            let bytes = plane == 0 ? picture.width : (picture.width + 1) / 2
            for row in 0..<rows where y / d + row < canvas.planeRows[plane] {
                (canvas.producerBaseAddress(ofPlane: plane) + (y / d + row) * canvas.bytesPerRow[plane] + x / d)
                    .copyMemory(from: picture.baseAddress(ofPlane: plane) + row * picture.bytesPerRow[plane], byteCount: bytes)
            }
        }
    }

    func text(_ string: String, x: Int, y: Int, scale: Int) {
        var cursor = x
        for character in string.uppercased() {
            let rows = Self.glyphs[character] ?? Self.glyphs["?"]!
            for (r, bits) in rows.enumerated() {
                for c in 0..<5 where bits & (1 << (4 - c)) != 0 {
                    fill(x: cursor + c * scale, y: y + r * scale, width: scale, height: scale, luma: 235)
                }
            }
            cursor += 6 * scale
        }
    }

    /// 5×7 glyphs, one byte per row, bit 4 = leftmost column.
    static let glyphs: [Character: [UInt8]] = [
        "0": [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E], "1": [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        "2": [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F], "3": [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        "4": [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02], "5": [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        "6": [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E], "7": [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        "8": [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E], "9": [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        "#": [0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A], ".": [0, 0, 0, 0, 0, 0x0C, 0x0C],
        "S": [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E], " ": [0, 0, 0, 0, 0, 0, 0],
        "-": [0, 0, 0, 0x1F, 0, 0, 0], "?": [0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04],
        "A": [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11], "U": [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        "D": [0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C], "I": [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
        "O": [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], "B": [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
    ]
}
