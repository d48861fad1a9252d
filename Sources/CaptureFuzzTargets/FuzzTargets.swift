import CaptureKit
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

    /// Runs one input. Returns normally for accepted and for rejected (typed-error) inputs.
    public func run(_ data: Data) {
        switch self {
        case .fixture: Self.withTemporaryFile(data, suffix: ".nut") { _ = try? FixtureReader.read(path: $0) }
        case .jpeg: Self.jpeg(data)
        case .profile: _ = try? SimulatedDeviceProfile.parse(data, file: "fuzz.json")
        case .control: Self.control(data)
        case .media: Self.withTemporaryFile(data, suffix: "") { Self.media($0) }
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

    private static func withTemporaryFile(_ data: Data, suffix: String, _ body: (String) -> Void) {
        let path = NSTemporaryDirectory() + "capturekit-fuzz-\(getpid())\(suffix)"
        _ = FileManager.default.createFile(atPath: path, contents: data)
        defer { unlink(path) }
        body(path)
    }
}
