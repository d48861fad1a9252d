import ArgumentParser
import CaptureKit
import Foundation

struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Tell at a glance whether a recording is right: streams, timing, keyframes, markers, A/V sync.",
        discussion: """
            Files recorded from the simulator carry a frame-index stamp and sync markers; for them inspect \
            also lists dropped, duplicated and reordered frames and the A/V offset at every marker. \
            Exits non-zero when a check you asked for fails (--expect-frames, --max-av-offset).

            A damaged file (cut short by a full disk or a crash, or with damaged bytes inside) gets a \
            report, never a bare decode error: its streams, how much decodes cleanly (duration, frames), \
            where the damage starts (stream, packet, time, byte offset), the container's boxes (MP4/MOV) and \
            the markers of the intact part.

            Exit codes:
              0  whole file; every check asked for passed
              1  a check failed, or there is no file to read
              3  damaged (truncated or corrupt): the report says what is intact
              4  nothing in it decodes: damaged (no index, not media), or a file with no media
                 (no streams, or streams without packets; the report's check "media" fails)
            Checks (--expect-frames, --max-av-offset) judge the intact part.
            """)

    @Argument(help: "The media file.")
    var file: String

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Option(name: .customLong("contact-sheet"), help: "Write a JPEG grid of thumbnails with frame indices, times and an audio level strip.")
    var contactSheet: String?

    @Option(name: .customLong("plot"), help: "Write a PNG plot of the A/V offset at every sync marker and of the frame intervals over time.")
    var plot: String?

    @Flag(help: "Replace --contact-sheet and --plot files that exist, if they are regular files (atomically); a folder, link, FIFO, device or the file inspected is never replaced.")
    var overwrite = false

    @Option(name: .customLong("expect-frames"), help: "Fail unless the file has exactly N frames and none is missing.")
    var expectFrames: Int?

    @Option(name: .customLong("max-av-offset"), help: "Fail when a sync marker's A/V offset exceeds this (e.g. 40ms, 0.04s).")
    var maxAVOffset: String?

    /// Parses "40ms", "0.04s" or "0.04" (seconds).
    static func parseDuration(_ text: String) -> Double? {
        let t = text.trimmingCharacters(in: .whitespaces).lowercased()
        if t.hasSuffix("ms") { return Double(t.dropLast(2)).map { $0 / 1000 } }
        if t.hasSuffix("s") { return Double(t.dropLast()) }
        return Double(t)
    }

    @Option(name: .customLong("metadata"), help: "JSON lines of detections (from `capture record --metadata`) to outline on the contact sheet. (default: FILE's .metadata.jsonl beside it, when there is one)")
    var metadata: String?

    /// The boxes of a `record --metadata` file, at their movie times.
    static func metadataBoxes(_ path: String) throws -> [MetadataBox] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("--metadata \(path): cannot read the file")
        }
        let decoder = JSONDecoder()
        return try text.split(separator: "\n").enumerated().map { i, line in
            guard let r = try? decoder.decode(MetadataRecord.self, from: Data(line.utf8)), r.bounds.count == 4 else {
                throw ValidationError("--metadata \(path): line \(i + 1) is not a detection (capture record --metadata writes them)")
            }
            return MetadataBox(time: r.movieTime ?? r.time, x: r.bounds[0], y: r.bounds[1], width: r.bounds[2], height: r.bounds[3], type: r.type)
        }
    }

    func run() throws {
        if let contactSheet, let plot, samePath(contactSheet, plot) {
            throw ValidationError("--contact-sheet and --plot name the same file (\(plot)); give each its own")
        }
        var options = RecordingInspector.Options(expectFrames: expectFrames, contactSheetPath: contactSheet)
        options.plotPath = plot
        options.existingOutput = .init(overwrite: overwrite)
        let besideMovie = RecordCommand.metadataPath(for: file)
        if let path = metadata ?? (contactSheet != nil && FileManager.default.fileExists(atPath: besideMovie) ? besideMovie : nil) {
            options.metadataBoxes = try Self.metadataBoxes(path)
        }
        if let maxAVOffset {
            guard let seconds = Self.parseDuration(maxAVOffset), seconds >= 0 else {
                throw ValidationError("--max-av-offset takes a duration such as 40ms or 0.04s")
            }
            options.maxAVOffset = seconds
        }
        var report: InspectionReport
        do { report = try RecordingInspector.inspect(path: file, options: options) } catch { throw CommandFailure(error, overwritable: true) }
        // A file that opens but holds nothing to decode is not whole: say so, and exit as "nothing decodes".
        let noMedia = report.damage == nil && !report.streams.contains { $0.packets > 0 }
        if noMedia {
            let detail = report.streams.isEmpty ? "the file has no streams: it holds no media"
                : report.streams.count == 1 ? "its stream holds no packets: nothing to decode"
                : "its \(report.streams.count) streams hold no packets: nothing to decode"
            report.checks.append(InspectionReport.Check(name: "media", passed: false, detail: detail))
        }
        print(json ? encodeJSON(report, command: "inspect") : Self.text(report))
        for check in report.checks where !check.passed { printError("check \(check.name) failed: \(check.detail)") }
        if let damage = report.damage {
            printError("\(file) is damaged (\(damage.kind.rawValue)): \(damage.summary)")
            throw ExitCode(damage.intactVideoFrames == 0 && (damage.intactAudioDuration ?? 0) == 0 ? Self.exitNothingIntact : Self.exitDamaged)
        }
        if noMedia { throw ExitCode(Self.exitNothingIntact) }
        if !report.passed { throw ExitCode.failure }
    }

    /// Exit code for a damaged file with an intact part.
    static let exitDamaged: Int32 = 3
    /// Exit code for a damaged file of which nothing decodes.
    static let exitNothingIntact: Int32 = 4

    static func text(_ r: InspectionReport) -> String {
        var lines: [String] = []
        let duration = r.duration.map { String(format: "%.3f s", $0) } ?? "unknown duration"
        let rate = r.bitrate.map { String(format: "%.0f kbit/s", Double($0) / 1000) } ?? "?"
        lines.append("\(r.path): \(r.format), \(duration)\(r.damage == nil || r.duration == nil ? "" : " (as the container claims)"), \(r.fileSize) bytes, \(rate)")
        if let d = r.damage {
            lines.append("DAMAGED (\(d.kind.rawValue)): \(d.summary)")
            var intact = String(format: "intact: %.3f s decode cleanly", d.intactDuration)
            intact += ", \(d.intactVideoFrames) video frames"
            if let a = d.intactAudioDuration { intact += String(format: ", audio to %.3f s", a) }
            lines.append(intact)
            if let p = d.firstDamagedPacket {
                var at = ["damage starts:"]
                if let type = p.mediaType, let stream = p.stream, let n = p.packet { at.append("stream \(stream) (\(type)) packet \(n)") }
                if let t = p.time { at.append(String(format: "at %.3f s", t)) }
                if let b = p.byteOffset { at.append("byte \(b)") }
                lines.append(at.joined(separator: " ") + " — " + p.problem)
            } else if let offset = d.layout?.damageOffset {
                lines.append("damage starts: byte \(offset)" + (d.layout?.truncated == true ? " (the box the file ends inside)" : ""))
            }
            if d.packetsAfterDamage > 0 { lines.append("after the damage: \(d.packetsAfterDamage) more packets can be read (not decoded)") }
            if let layout = d.layout { lines.append("boxes: \(layout.summary)") }
        }
        for s in r.streams {
            let i = s.info
            var parts = ["stream \(i.index): \(i.mediaType) \(i.codec)"]
            if let w = i.width, let h = i.height { parts.append("\(w)x\(h)" + (i.pixelFormat.map { " \($0)" } ?? "")) }
            if let rate = i.sampleRate { parts.append("\(rate) Hz \(i.channels ?? 0) ch") }
            if let d = i.duration { parts.append(String(format: "%.3f s", d)) }
            parts.append("\(s.packets) packets")
            if i.mediaType == "video" {
                parts.append("\(r.decodedVideoFrames) frames")
                if let k = s.maximumKeyframeInterval { parts.append("\(s.keyframes) keyframes, at most \(k) frames apart") }
            }
            if let b = s.measuredBitrate { parts.append(String(format: "%.0f kbit/s", Double(b) / 1000)) }
            lines.append(parts.joined(separator: ", "))
        }
        if let a = r.analysis, r.hasMarkers {
            let stamps = a.frameIndices.compactMap { $0 }
            lines.append("markers\(r.damage == nil ? "" : " (intact part)"): \(stamps.count) of \(a.videoFrameCount) frames stamped \(stamps.min() ?? 0)…\(stamps.max() ?? 0)")
            lines.append("dropped: " + (a.droppedCount == 0 ? "none" : "\(a.droppedCount) (indices \(RecordingInspector.ranges(a.droppedIndices)))"))
            lines.append("duplicated: " + (a.duplicatedIndices.isEmpty ? "none" : RecordingInspector.ranges(a.duplicatedIndices)))
            lines.append("reordered: \(a.reorderedCount)")
            for m in a.syncMarkers {
                let v = m.videoTime.map { String(format: "video %.3f s", $0) } ?? "no flash"
                let au = m.audioTime.map { String(format: "audio %.3f s", $0) } ?? "no burst"
                let o = m.offset.map { String(format: "offset %+.1f ms", $0 * 1000) } ?? "unpaired"
                lines.append("sync \(m.second) s: \(v), \(au), \(o)")
            }
        } else if r.decodedVideoFrames > 0 {
            lines.append("markers: none (not a CaptureKit simulator recording)")
        }
        for c in r.checks { lines.append("check \(c.name): \(c.passed ? "ok" : "FAILED") — \(c.detail)") }
        if let sheet = r.contactSheet { lines.append("contact sheet: \(sheet) (\(r.thumbnails.count) thumbnails)") }
        if let p = r.plot {
            lines.append("plot: \(p.path) (\(p.offsets.points.count) A/V offsets, \(p.intervalCount) frame intervals)")
        }
        if let drawn = r.metadataBoxesDrawn { lines.append("metadata boxes drawn on the contact sheet: \(drawn)") }
        return lines.joined(separator: "\n")
    }
}
