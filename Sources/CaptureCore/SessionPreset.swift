/// Session presets (AVCaptureSession.Preset): a preset picks each video device's format.
public enum SessionPreset: String, Sendable, Hashable, Codable, CaseIterable {
    case photo, high, medium, low
    case cif352x288 = "352x288"
    case vga640x480 = "640x480"
    case hd1280x720 = "1280x720"
    case hd1920x1080 = "1920x1080"
    case hd4K3840x2160 = "3840x2160"
    case iFrame960x540, iFrame1280x720
    /// The session leaves device formats alone (set when an app picks a device format itself).
    case inputPriority

    /// Exact frame size for the sized presets.
    public var dimensions: Dimensions? {
        switch self {
        case .cif352x288: return Dimensions(width: 352, height: 288)
        case .vga640x480: return Dimensions(width: 640, height: 480)
        case .hd1280x720, .iFrame1280x720: return Dimensions(width: 1280, height: 720)
        case .hd1920x1080: return Dimensions(width: 1920, height: 1080)
        case .hd4K3840x2160: return Dimensions(width: 3840, height: 2160)
        case .iFrame960x540: return Dimensions(width: 960, height: 540)
        default: return nil
        }
    }

    /// iFrame presets record every frame as a keyframe (Apple's editing-friendly format).
    public var isIFrame: Bool { self == .iFrame960x540 || self == .iFrame1280x720 }

    /// The format a device would use under this preset, or nil if it has none that fits.
    /// Sized presets need that exact size at 30 fps; `high` takes the largest format up to 1080p
    /// at 30 fps, `medium` the largest up to 480 lines, `low` the smallest, `photo` the largest.
    /// Uncompressed formats are preferred over MJPEG (they need no decoding).
    public func format(for device: CaptureDevice) -> DeviceFormat? {
        guard device.mediaType == .video else { return nil }
        let thirty = MediaTime(value: 1, timescale: 30)
        let candidates = device.formats
            .filter { $0.dimensions != nil && $0.supports(frameDuration: thirty) }
            .sorted { a, b in
                let (pa, pb) = (a.dimensions!.width * a.dimensions!.height, b.dimensions!.width * b.dimensions!.height)
                if pa != pb { return pa < pb }
                return (a.pixelFormat?.isCompressed ?? false ? 1 : 0) < (b.pixelFormat?.isCompressed ?? false ? 1 : 0)
            }
        func area(_ f: DeviceFormat) -> Int { f.dimensions!.width * f.dimensions!.height }
        func largest(_ fs: [DeviceFormat]) -> DeviceFormat? {
            guard let maxArea = fs.map(area).max() else { return nil }
            return fs.first { area($0) == maxArea }
        }
        switch self {
        case .inputPriority: return nil
        case .photo: return largest(candidates)
        case .high: return largest(candidates.filter { $0.dimensions!.height <= 1080 })
        case .medium: return largest(candidates.filter { $0.dimensions!.height <= 480 })
        case .low: return candidates.first
        default: return candidates.first { $0.dimensions == dimensions }
        }
    }
}
