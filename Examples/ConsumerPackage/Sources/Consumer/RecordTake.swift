import CaptureKit

/// The README's library example as a consumer writes it: a registry, a session, the camera's
/// input and a movie file output, recording `seconds` of the simulated back camera in virtual time.
public func recordTake(to path: String, seconds: Int64 = 1, seed: UInt64 = 42) async throws -> RecordingSummary {
    let registry = CaptureKit.makeRegistry(seed: seed)
    let session = CaptureSession(pace: .virtual)
    try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))

    let movie = MovieFileOutput()
    movie.maxRecordedDuration = MediaTime(value: seconds, timescale: 1)
    try session.addOutput(movie)
    try session.startRunning()

    // Returns when the recording ends: a limit, stopRecording(), or the session stopping.
    let summary = try await movie.record(to: path)
    session.stopRunning()
    return summary
}
