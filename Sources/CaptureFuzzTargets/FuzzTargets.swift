import CaptureKit
import CaptureKitTesting
import Foundation

/// The inputs CaptureKit parses from outside, as fuzz targets: each takes arbitrary bytes and must
/// either succeed or throw a typed `CaptureError` — never trap, hang or touch memory it does not own.
/// `capture-fuzz` drives them with libFuzzer (`ci/fuzz TARGET`); `FuzzRegressionTests` replays every
/// input that once crashed (`Fixtures/fuzz/TARGET/regressions`).
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A fixture file (NUT + JSON records) through `FixtureReader`.
    case fixture
    /// A frame for MJPEG pass-through: `JPEGFrameCheck`, then the libturbojpeg decoder.
    case jpeg
    /// A simulator device profile (JSON) through the validating `ProfileParser`.
    case profile
    /// `--control KEY=VALUE` and `--format WxH@FPS[:FOURCC]` text.
    case control
    /// Any file handed to `capture inspect`: `MediaFileReader` (probe, then decode every packet).
    case media
    /// A scenario file (`capture test`) through the strict `Scenario` parser.
    case scenario

    /// Runs one input. Returns normally for accepted and for rejected (typed-error) inputs.
    public func run(_ data: Data) {
        switch self {
        case .fixture: Self.withTemporaryFile(data, suffix: ".nut") { _ = try? FixtureReader.read(path: $0) }
        case .jpeg: Self.jpeg(data)
        case .profile: _ = try? SimulatedDeviceProfile.parse(data, file: "fuzz.json")
        case .control: Self.control(data)
        case .media: Self.withTemporaryFile(data, suffix: "") { Self.media($0) }
        case .scenario: _ = try? Scenario.parse(data, file: "fuzz.json")
        }
    }

    private static func jpeg(_ data: Data) {
        let bytes = [UInt8](data)
        _ = bytes.withUnsafeBytes { JPEGFrameCheck.inspect($0) }
        // The encoder decodes copied MJPEG frames when it re-encodes them: the decoder sees them too.
        guard let codec = try? JPEGCodec() else { return }
        _ = try? codec.decode(bytes)
    }

    /// One simulated camera per process: control parsing needs a device to validate against.
    private static let camera: CaptureDevice? = try? CaptureKit.makeRegistry().device(uniqueID: "sim:back")

    private static func control(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        _ = FormatRequest(text)
        _ = Dimensions(parsing: text)
        _ = CaptureDevice.parseNumber(text)
        guard let camera, let equals = text.firstIndex(of: "=") else { return }
        try? camera.lockForConfiguration()
        defer { camera.unlockForConfiguration() }
        try? camera.applyControl(key: String(text[..<equals]), value: String(text[text.index(after: equals)...]))
    }

    private static func media(_ path: String) {
        guard let reader = try? MediaFileReader(path: path) else { return }
        _ = reader.info
        try? reader.decode(video: { _ in }, audio: { _, _, _, _ in })
    }

    /// The readers under test open files by path, so each input is written to one: in /dev/shm
    /// when there is one (memory, no disk I/O), with plain write(2) (FileManager's atomic write
    /// syncs to disk, which took a tenth of each run).
    private static let scratchFolder = FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()

    private static func withTemporaryFile(_ data: Data, suffix: String, _ body: (String) -> Void) {
        let path = scratchFolder + "capturekit-fuzz-\(getpid())\(suffix)"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return }
        let complete = data.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { return false }
                offset += n
            }
            return true
        }
        close(fd)
        defer { unlink(path) }
        if complete { body(path) }
    }
}
