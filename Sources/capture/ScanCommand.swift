import ArgumentParser
import CaptureKit
import Dispatch
import Foundation

/// One detection as the command line prints it (`scan --json`, `record --metadata`).
struct MetadataRecord: Codable {
    /// PTS in seconds (the device's clock).
    var time: Double
    /// Seconds into the movie (`record --metadata` only).
    var movieTime: Double?
    var type: String
    var value: String?
    var faceID: Int?
    /// Normalised x, y, width, height (native orientation, origin top-left).
    var bounds: [Double]
    var corners: [[Double]]

    init(_ o: MetadataObject, movieTime: Double? = nil) {
        time = o.time.seconds
        self.movieTime = movieTime
        type = o.type.name
        value = o.stringValue
        faceID = o.faceID
        func r(_ v: Double) -> Double { (v * 10_000).rounded() / 10_000 }
        bounds = [r(o.bounds.minX), r(o.bounds.minY), r(o.bounds.width), r(o.bounds.height)]
        corners = o.corners.map { [r($0.x), r($0.y)] }
    }

    var jsonLine: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// A decoded payload as the terminal may show it: control characters (C0, DEL, C1 — an escape
    /// sequence in a QR code could otherwise move the cursor, retitle the window or clear the
    /// screen), quotes and backslashes written as Swift escapes (`\n`, `\u{1B}`).
    static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    var humanLine: String {
        let box = bounds.map { String(format: "%.3f", $0) }.joined(separator: ",")
        var line = String(format: "%9.3f ", time) + type
        if let value { line += " \"\(Self.escaped(value))\"" }
        if let faceID { line += " id \(faceID)" }
        return line + " box \(box)"
    }
}

/// Parses `--types qr,ean13,face`.
enum MetadataTypeOption {
    static func parse(_ text: String) throws -> [MetadataObjectType] {
        let known = MetadataOutput.supportedMetadataObjectTypes.map(\.name).joined(separator: ", ")
        // An empty list would detect nothing and wait for ever for detections to report.
        guard text.split(separator: ",").contains(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) else {
            throw ValidationError("--types needs at least one type (known: \(known))")
        }
        return try text.split(separator: ",").map { name in
            guard let type = MetadataObjectType(name: String(name).trimmingCharacters(in: .whitespaces)) else {
                let known = MetadataOutput.supportedMetadataObjectTypes.map(\.name).joined(separator: ", ")
                throw ValidationError("--types: unknown type '\(name)' (known: \(known))")
            }
            return type
        }
    }
}

/// Prints what a metadata output finds, in order (its delegate; callbacks on one serial queue).
final class MetadataPrinter: MetadataOutputObjectsDelegate {
    let queue = DispatchQueue(label: "capture.scan.print")
    let json: Bool
    let count = Locked(0)
    init(json: Bool) { self.json = json }
    func metadataOutput(_ output: MetadataOutput, didOutput objects: [MetadataObject], from connection: CaptureConnection) {
        var text = ""
        for o in objects {
            let record = MetadataRecord(o)
            text += (json ? record.jsonLine : record.humanLine) + "\n"
        }
        count.withLock { $0 += objects.count }
        if !text.isEmpty { FileHandle.standardOutput.write(Data(text.utf8)) }
    }
}

struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Print the faces and codes a camera sees (a metadata output: ZBar for codes, OpenCV for faces).",
        discussion: """
            Each detection: PTS (s), type, value (codes) or face ID, and the normalised box (x,y,w,h in the camera's \
            native orientation). With --json: one JSON object per line, then a summary line {"summary": …}.
            Simulated cameras show scene items with --control: scene.qrCode=TEXT, scene.face=on, and
            scene.qrCode.x/y/size/rotation/motion (and scene.face.…) — see README.
            """)

    @Option(help: "Camera unique ID (sim:back, /dev/video0…).")
    var camera: String

    @Option(help: "Comma-separated types: qr, ean13, ean8, upce, code39, code93, code128, itf, codabar, databar, face.")
    var types: String = "qr,face"

    @Option(help: "Seconds of media to scan.")
    var duration: Double = 5

    @Option(help: "virtual (as fast as possible, deterministic) or realtime (paced like a device).")
    var pace: CapturePace = .virtual

    @Option(help: "Seed for the simulator's content.")
    var seed: UInt64 = 0

    @Option(name: .customLong("control"), help: "KEY=VALUE, repeatable: a camera control applied before capture (e.g. scene.qrCode=hello).")
    var controls: [String] = []

    @Option(help: "WxH@FPS[:FOURCC]: the camera format and a constant frame rate, e.g. 1280x720@30.")
    var format: String?

    @Flag(help: "JSON lines instead of text.")
    var json = false

    struct Summary: Codable {
        var camera: String
        var types: [String]
        var objects: Int
        var framesOffered: Int
        var framesDetected: Int
        var framesSkipped: Int
        var detectionRate: Double
        var mediaSeconds: Double
    }

    func validate() throws {
        guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be a positive number of seconds") }
        _ = try MetadataTypeOption.parse(types)
    }

    func run() async throws {
        let requested = try MetadataTypeOption.parse(types)
        let registry = CaptureKit.makeRegistry(seed: seed)
        let session = CaptureSession(pace: pace)
        let output = MetadataOutput()
        let printer = MetadataPrinter(json: json)
        do {
            try session.setSessionPreset(.inputPriority)
            let device = try registry.device(uniqueID: camera)
            try ControlOptions.configure(device, format: format, controls: controls)
            try session.addInput(CaptureDeviceInput(device: device))
            try session.addOutput(output)
            try output.setMetadataObjectTypes(requested)
            output.setMetadataObjectsDelegate(printer, queue: printer.queue)
            try session.startRunning()
        } catch {
            throw CommandFailure(error)
        }
        if pace == .realtime {
            try? await Task.sleep(for: .seconds(duration))
        } else {
            // Bounded: media must keep coming (a step of detection within 30 s of wall time).
            var last = (seconds: -1.0, at: Date())
            while output.statistics.mediaSeconds < duration - 1e-9 && session.isRunning {
                let now = output.statistics.mediaSeconds
                if now != last.seconds { last = (now, Date()) }
                if Date().timeIntervalSince(last.at) > 30 {
                    session.stopRunning()
                    throw CommandFailure("scan: no frame reached the detectors for 30 s (at \(String(format: "%.2f", now)) s of \(String(format: "%g", duration)) s); the camera stopped delivering")
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        session.stopRunning()
        printer.queue.sync {}
        let stats = output.statistics
        let summary = Summary(camera: camera, types: requested.map(\.name), objects: printer.count.withLock { $0 },
                              framesOffered: stats.framesOffered, framesDetected: stats.framesDetected, framesSkipped: stats.framesSkipped,
                              detectionRate: (stats.detectionRate * 100).rounded() / 100, mediaSeconds: stats.mediaSeconds)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            FileHandle.standardOutput.write((try? encoder.encode(JSONEnvelope(command: "scan", body: ["summary": summary], listKey: nil))) ?? Data())
            FileHandle.standardOutput.write(Data("\n".utf8))
        } else {
            FileHandle.standardOutput.write(Data("scanned \(String(format: "%.2f", stats.mediaSeconds)) s of \(camera): \(summary.objects) objects, \(stats.framesDetected) frames detected, \(stats.framesSkipped) skipped, detection rate \(String(format: "%.1f", stats.detectionRate)) fps\n".utf8))
        }
    }
}

/// `record --metadata`: writes the detections made while the movie records as JSON lines, with
/// `movieTime` = PTS − PTS of the first frame detected while recording (the movie's first frame
/// in virtual pace; within a frame of it in real time).
final class MetadataLinesWriter: MetadataOutputObjectsDelegate {
    let queue = DispatchQueue(label: "capture.record.metadata")
    private let handle: FileHandle
    private let movie: MovieFileOutput
    private let state = Locked<(origin: MediaTime?, count: Int, late: [MetadataObject])>((nil, 0, []))

    init(path: String, movie: MovieFileOutput) throws(CaptureError) {
        // Created exclusively (never over a file, folder, link, FIFO or device that is there).
        handle = FileHandle(fileDescriptor: try OutputPath.claimKeepingOpen(path), closeOnDealloc: true)
        self.movie = movie
    }

    func metadataOutput(_ output: MetadataOutput, didOutput objects: [MetadataObject], from connection: CaptureConnection) {
        guard let first = objects.first else { return }
        let recording = movie.isRecording
        let origin = state.withLock { s -> MediaTime? in
            guard recording else {
                // The callback runs on this queue after the detection: the movie may have stopped in
                // between (in virtual pace the next frame comes at once). `finish` keeps these if
                // they fall inside the recording.
                if s.origin != nil { s.late += objects }
                return nil
            }
            if s.origin == nil { s.origin = first.time }
            s.count += objects.count
            return s.origin!
        }
        if let origin { write(objects, origin: origin) }
    }

    private func write(_ objects: [MetadataObject], origin: MediaTime) {
        let text = objects.map { MetadataRecord($0, movieTime: ($0.time - origin).seconds).jsonLine + "\n" }.joined()
        handle.write(Data(text.utf8))
    }

    /// Waits for queued callbacks, writes those that came after the stop but belong to the
    /// movie's `recordedDuration` seconds, closes the file; the number of objects written.
    func finish(recordedDuration: Double) -> Int {
        queue.sync {}
        let (origin, late) = state.withLock { s in (s.origin, s.late.filter { o in s.origin.map { (o.time - $0).seconds < recordedDuration - 1e-6 } ?? false }) }
        if let origin, !late.isEmpty {
            write(late, origin: origin)
            state.withLock { $0.count += late.count }
        }
        try? handle.close()
        return state.withLock { $0.count }
    }
}
