import CaptureCore
import Foundation
import Synchronization

/// What the simulated camera does to the scene in one frame. `neutral` renders the scene's
/// reflectances as they are.
public struct CameraEffects: Sendable, Hashable {
    /// Linear-light multiplier per channel: illuminance × exposure × white-balance gain (clipped at 1).
    public var red = 1.0, green = 1.0, blue = 1.0
    /// Defocus: box-blur radius in pixels (0 = sharp).
    public var blurRadius = 0
    /// Sensor noise: standard deviation in 8-bit luma code values (0 = none).
    public var noiseSigma = 0.0
    /// Digital zoom about the centre (1 = none).
    public var zoom = 1.0
    /// Encode full-range (420f) instead of video-range luma and chroma.
    public var fullRange = false

    public init() {}
    public static let neutral = CameraEffects()
}

/// Where to measure a frame for the auto controllers (rectangles in pixels).
public struct MeteringRequest: Sendable, Hashable {
    public var exposureRegion: PixelRect?
    public var focusRegion: PixelRect?
    public var grayWorld = false
    public init(exposureRegion: PixelRect? = nil, focusRegion: PixelRect? = nil, grayWorld: Bool = false) {
        self.exposureRegion = exposureRegion
        self.focusRegion = focusRegion
        self.grayWorld = grayWorld
    }
}

public struct PixelRect: Sendable, Hashable {
    public var x0, y0, x1, y1: Int
    public init(x0: Int, y0: Int, x1: Int, y1: Int) { self.x0 = x0; self.y0 = y0; self.x1 = x1; self.y1 = y1 }
}

/// What the camera's statistics engine saw in a frame (before the markers were drawn).
public struct FrameMeasurements: Sendable, Hashable {
    /// Mean luma code value in the exposure region.
    public var meanLuma: Double?
    /// Mean absolute horizontal luma difference in the focus region (a contrast/sharpness measure).
    public var contrast: Double?
    /// Mean linear R, G, B over the scene (for gray-world white balance).
    public var linearMeans: (r: Double, g: Double, b: Double)?

    public static func == (a: FrameMeasurements, b: FrameMeasurements) -> Bool {
        a.meanLuma == b.meanLuma && a.contrast == b.contrast && a.linearMeans?.r == b.linearMeans?.r
            && a.linearMeans?.g == b.linearMeans?.g && a.linearMeans?.b == b.linearMeans?.b
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(meanLuma)
        hasher.combine(contrast)
        hasher.combine(linearMeans?.r)
    }
}
