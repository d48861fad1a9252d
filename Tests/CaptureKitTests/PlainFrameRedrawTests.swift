import CaptureKit
import Testing

/// A plain frame (sharp, noiseless, no scene items, no shake) rendered into pool memory that last
/// held a plain frame over the same background puts back only that frame's box and markers; a
/// noisy one (sharp, no items, no shake) puts back only their chroma after a plain or noisy frame
/// (issue 17, target 1). The frames must be the very bytes a whole-background copy gives, however
/// the effects change between frames and whatever else wrote the memory in between.
// Serialized, and yielding after every frame, like BlurRowReuseTests (CPU-bound beside timed tests).
@Suite(.serialized) struct PlainFrameRedrawTests {
    struct Step {
        var effects = CameraEffects()
        var items = SceneItemSettings()
        var motion: FrameMotion?
        /// Written over the buffer's memory after the frame (by a write call), before it goes back to the pool.
        var scribble = false
    }

    /// Renders `steps` as a session does: buffers from a bounded pool, two frames in flight, so
    /// the memory cycles through the pool. Returns each frame's visible bytes, measurements, and
    /// how many frames put back only the changed parts.
    static func frames(_ format: PixelFormat, _ size: Dimensions, redraw: Bool, steps: [Step]) async throws
        -> (frames: [[UInt8]], measurements: [FrameMeasurements], partial: Int) {
        let renderer = try SyntheticFrameRenderer(pixelFormat: format, dimensions: size, frameDuration: MediaTime(value: 1, timescale: 30),
                                                  seed: 5, reusesBackgroundRowPass: true, redrawsOnlyChanges: redraw)
        let pool = PixelBufferPool(format: format, width: size.width, height: size.height, maximumBufferCount: 3)
        var inFlight: [PixelBuffer] = []
        var frames: [[UInt8]] = [], measurements: [FrameMeasurements] = []
        let metering = MeteringRequest(exposureRegion: PixelRect(x0: 0, y0: 0, x1: size.width, y1: size.height),
                                       focusRegion: PixelRect(x0: 0, y0: 0, x1: size.width, y1: size.height / 2), grayWorld: true)
        for (n, step) in steps.enumerated() {
            let buffer = try #require(pool.makeBuffer())
            measurements.append(renderer.render(frame: Int64(n * 5), effects: step.effects, syncFlash: n % 4 == 3, metering: metering,
                                                motion: step.motion, into: buffer, items: step.items))
            frames.append(BlurRowReuseTests.visibleBytes(of: buffer, format, size))
            // Sharp, without items or shake: plain, or noisy where the noise is fused with the copy
            // (planar formats whose luma rows have no padding; its chroma is the background's).
            let fusesNoise = format != .yuyv && buffer.bytesPerRow[0] == size.width
            let remembered = step.effects.blurRadius == 0 && step.items.isEmpty && step.motion == nil
                && (step.effects.noiseSigma == 0 || fusesNoise)
            #expect((buffer.producerContent != nil) == remembered,
                    "step \(n): a sharp, still frame without items is remembered with its memory, any other is not")
            if step.scribble {
                for plane in 0..<buffer.planeCount {
                    try buffer.withMutablePlane(plane) { _ = $0.initializeMemory(as: UInt8.self, repeating: 0x5A) }
                }
                #expect(buffer.producerContent == nil, "a write call forgets what the memory held")
            }
            inFlight.append(buffer)
            if inFlight.count > 2 { inFlight.removeFirst() }
            await Task.yield()
        }
        return (frames, measurements, renderer.partialBackgroundCount)
    }

    @Test(arguments: [PixelFormat.nv12, .yuv420, .yuyv])
    func puttingBackTheChangedPartsGivesTheSameBytesAsCopyingTheWholeBackground(_ format: PixelFormat) async throws {
        var steps: [Step] = Array(repeating: Step(), count: 8)
        var cast = CameraEffects(); cast.red = 1.3
        steps += Array(repeating: Step(effects: cast), count: 5)                 // a new background mid-run
        var zoom = CameraEffects(); zoom.zoom = 3
        steps += Array(repeating: Step(effects: zoom), count: 5)                 // the box moved and clipped
        var noisy = CameraEffects(); noisy.noiseSigma = 2
        steps += Array(repeating: Step(effects: noisy), count: 6)                // noisy: chroma put back, luma drawn whole
        steps += Array(repeating: Step(), count: 5)                              // plain after noisy: luma not the background's
        var noisyCast = noisy; noisyCast.blue = 0.8
        steps += Array(repeating: Step(effects: noisyCast), count: 5)            // noisy over a new background
        var blurred = CameraEffects(); blurred.blurRadius = 2
        steps += Array(repeating: Step(effects: blurred), count: 3)              // blurred: drawn whole
        steps += Array(repeating: Step(effects: noisyCast), count: 4)
        var qr = SceneItemSettings(); qr.qrCode = "plain frame redraw"
        steps += Array(repeating: Step(items: qr), count: 3)                     // items: drawn whole
        steps += Array(repeating: Step(), count: 4)
        let shake = CameraShake.motion(seed: 3, frame: 1, amplitude: 0.02, mode: .off)
        steps += Array(repeating: Step(motion: shake), count: 3)                 // shaken: drawn whole
        steps += Array(repeating: Step(), count: 4)
        steps += [Step(scribble: true), Step(scribble: true)] + Array(repeating: Step(), count: 5)  // memory written by someone else
        var full = CameraEffects(); full.fullRange = true
        steps += Array(repeating: Step(effects: full), count: 4)
        for size in [Dimensions(width: 640, height: 480), Dimensions(width: 352, height: 288)] {
            let whole = try await Self.frames(format, size, redraw: false, steps: steps)
            let redrawn = try await Self.frames(format, size, redraw: true, steps: steps)
            #expect(whole.partial == 0)
            // Frames whose memory held a frame of their kind over the same background (3 buffers, 2 in
            // flight: the first 3 of each run of one background are copied whole); planar noisy frames
            // add theirs (YUYV's noise, and noise over padded rows such as 352's, is not fused with the
            // copy, so those are drawn whole).
            let expected = format == .yuyv || size.width % 64 != 0 ? 15 : 24
            #expect(redrawn.partial >= expected, "only \(redrawn.partial) frames put back the changed parts at \(size) \(format)")
            let differing = BlurRowReuseTests.differences(whole.frames, redrawn.frames) { "step \($0)" }
            #expect(differing.isEmpty, "\(size) \(format): \(differing.count) frames differ, first: \(differing.prefix(3))")
            let measuredDifferently = whole.measurements.indices.filter { whole.measurements[$0] != redrawn.measurements[$0] }
            #expect(measuredDifferently.isEmpty, "\(size) \(format): the statistics differ at steps \(measuredDifferently)")
            // The box really moves and the scribbles really land: neighbouring plain frames differ.
            #expect(whole.frames[0] != whole.frames[1])
        }
    }
}
