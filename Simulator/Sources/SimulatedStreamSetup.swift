import CaptureCore
import Foundation

/// What a simulated video stream renders with: rebuilt when the format changes while it runs.
final class SimulatedStreamSetup: Sendable {
    let configuration: StreamConfiguration
    let renderer: SyntheticFrameRenderer
    let pool: PixelBufferPool
    let format: FormatDescription
    /// MJPEG: frames are rendered into `scratch` (I420) and compressed into the pool's buffers.
    let compression: (compressor: any FrameCompressor, scratch: PixelBuffer)?

    init(configuration: StreamConfiguration, renderer: SyntheticFrameRenderer, compressor: (any FrameCompressor)?) {
        self.configuration = configuration
        self.renderer = renderer
        let delivered = compressor == nil ? renderer.pixelFormat : PixelFormat.mjpeg
        // Bounded like a V4L2 buffer queue: consumers that hold frames starve it (frames then drop).
        pool = PixelBufferPool(format: delivered, width: renderer.width, height: renderer.height,
                               maximumBufferCount: SimulatedVideoStream.bufferCount(width: renderer.width, height: renderer.height))
        format = .video(pixelFormat: delivered, dimensions: Dimensions(width: renderer.width, height: renderer.height))
        compression = compressor.map { ($0, PixelBuffer(format: renderer.pixelFormat, width: renderer.width, height: renderer.height)) }
    }

    /// The same pixels at another frame duration.
    func with(frameDuration: MediaTime) -> SimulatedStreamSetup {
        var configuration = self.configuration
        configuration.frameDuration = frameDuration
        return SimulatedStreamSetup(configuration: configuration, reusing: self)
    }

    private init(configuration: StreamConfiguration, reusing other: SimulatedStreamSetup) {
        self.configuration = configuration
        renderer = other.renderer
        pool = other.pool
        format = other.format
        compression = other.compression
    }
}
