@_spi(Testing) import CaptureKit
import Foundation

/// Issue 17, target 4 (a): in real time, how long after a frame's capture timestamp (its PTS, the
/// start of its exposure on the host clock) the video data output's delegate is called. The floor
/// is one frame period: a frame exists once it has been exposed. `busy`: a movie file output
/// records the same session (H.264 veryfast + AAC), so the encoder competes for the two cores.
final class LatencyProbe: VideoDataOutputSampleBufferDelegate {
    let latencies = Locked<[Double]>([])
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        let latency = HostClock.now().seconds - sample.presentationTime.seconds
        latencies.withLock { $0.append(latency * 1000) }
    }
}

/// Median and p99 (ms) of a set of latencies, and how many.
struct LatencyFigures {
    var median: Double, p99: Double, count: Int
    init?(_ unsorted: [Double]) {
        let values = unsorted.sorted()
        guard !values.isEmpty else { return nil }
        median = values[values.count / 2]
        p99 = values[min(values.count - 1, Int((Double(values.count) * 0.99).rounded(.up)) - 1)]
        count = values.count
    }
}

/// (a) capture → data output delegate; (b) with `busy`: capture → the frame's H.264 packet handed
/// to the muxer (x264's frame threads and the writer holding each packet until the next add frames).
func measureLatency(size: Dimensions, fps: Int, seconds: Int, busy: Bool) throws -> (delegate: LatencyFigures, packet: LatencyFigures?) {
    let registry = CaptureKit.makeRegistry(seed: 0)
    let session = CaptureSession(pace: .realtime)
    try session.setSessionPreset(.inputPriority)
    let camera = try registry.device(uniqueID: "sim:back")
    try session.addInput(CaptureDeviceInput(device: camera))
    guard let format = camera.format(matching: size, frameRate: fps, pixelFormat: .nv12) else {
        fail("sim:back has no \(size) NV12 format at \(fps) fps")
    }
    try camera.lockForConfiguration()
    try camera.setActiveFormat(format)
    let period = MediaTime(value: 1, timescale: Int32(fps))
    try camera.setActiveVideoMinFrameDuration(period)
    try camera.setActiveVideoMaxFrameDuration(period)
    camera.unlockForConfiguration()
    let probe = LatencyProbe()
    let output = VideoDataOutput()
    output.setSampleBufferDelegate(probe, queue: DispatchQueue(label: "latency"))
    try session.addOutput(output)
    var movie: MovieFileOutput?
    let packets = Locked<[Double]>([])
    let path = NSTemporaryDirectory() + "capture-bench-latency-\(UUID().uuidString).mp4"
    defer { try? FileManager.default.removeItem(atPath: path) }
    if busy {
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let m = MovieFileOutput()
        m.testingVideoPacketWritten = { pts in
            let latency = HostClock.now().seconds - pts
            packets.withLock { $0.append(latency * 1000) }
        }
        try session.addOutput(m)
        movie = m
    }
    try session.startRunning()
    let signal = FinishSignal()
    movie?.startRecording(to: path, recordingDelegate: signal)
    Thread.sleep(forTimeInterval: Double(seconds))
    movie?.stopRecording()
    if movie != nil { signal.done.wait() }
    session.stopRunning()
    // The first second is the start-up (allocation, the encoder's calibration): left out.
    guard let delegate = LatencyFigures(probe.latencies.withLock { Array($0.dropFirst(fps)) }) else { fail("no frames delivered") }
    return (delegate, LatencyFigures(packets.withLock { Array($0.dropFirst(fps)) }))
}
