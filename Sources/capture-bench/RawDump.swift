import CaptureKit
import Foundation

/// `capture-bench dump WxH SECONDS DIR`: the frames and samples `capture record --pace virtual`
/// encodes for that size (sim:back NV12 at 30 fps and sim:mic, seed 0, the same session setup), as
/// raw planes (DIR/video.nv12, rows packed) and raw float samples (DIR/audio.f32, 48 kHz mono), so
/// the like-for-like rows of ci/bench give ffmpeg and GStreamer exactly CaptureKit's pictures and
/// sound. Raw bytes only: the reference tools read them with their own raw parsers.
final class RawDumper: VideoDataOutputSampleBufferDelegate, AudioDataOutputSampleBufferDelegate {
    private let video: FileHandle
    private let audio: FileHandle
    let frames = Locked(0)
    let samples = Locked(0)

    init(folder: String) throws {
        for name in ["video.nv12", "audio.f32"] {
            _ = FileManager.default.createFile(atPath: "\(folder)/\(name)", contents: nil)
        }
        video = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(folder)/video.nv12"))
        audio = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(folder)/audio.f32"))
    }

    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pixels = sample.pixelBuffer else { return }
        var data = Data(capacity: pixels.width * pixels.height * 3 / 2)
        for plane in 0..<pixels.planeCount {
            let base = pixels.baseAddress(ofPlane: plane)
            // NV12: both planes are `width` bytes of picture per row (Y; interleaved CbCr).
            for row in 0..<pixels.planeRows[plane] {
                data.append(base.advanced(by: row * pixels.bytesPerRow[plane]).assumingMemoryBound(to: UInt8.self), count: pixels.width)
            }
        }
        video.write(data)
        frames.withLock { $0 += 1 }
    }

    func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pcm = sample.audioBuffer else { return }
        let count = pcm.withFloatSamples { samples -> Int in
            audio.write(Data(buffer: samples))
            return samples.count
        }
        samples.withLock { $0 += count }
    }

    func close() throws {
        try video.close()
        try audio.close()
    }
}

func dumpRaw(size: Dimensions, seconds: Int, folder: String) throws {
    let session = try Rows.makeSession(seed: 0, size: size, audio: true)
    let dumper = try RawDumper(folder: folder)
    let queue = DispatchQueue(label: "dump")
    let video = VideoDataOutput()
    video.alwaysDiscardsLateVideoFrames = false
    video.setSampleBufferDelegate(dumper, queue: queue)
    let audio = AudioDataOutput()
    audio.setSampleBufferDelegate(dumper, queue: queue)
    try session.addOutput(video)
    try session.addOutput(audio)
    try session.enableManualStepping()
    try session.startRunning()
    try session.advance(by: MediaTime(value: Int64(seconds), timescale: 1))
    session.stopRunning()
    queue.sync {}
    try dumper.close()
    print("\(dumper.frames.withLock { $0 }) frames, \(dumper.samples.withLock { $0 }) samples")
}
