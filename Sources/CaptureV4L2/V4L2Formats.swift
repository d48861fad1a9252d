import CaptureCore

/// Device capabilities and formats as V4L2 reports them, mapped onto the device model.
enum V4L2Formats {
    /// Pixel formats the pipeline can take (the encoder converts YUYV/RGB24; MJPEG is decoded).
    static let supported: [PixelFormat] = [.yuyv, .nv12, .yuv420, .mjpeg, .rgb24]

    /// Sizes tried inside a stepwise or continuous frame-size range, besides its two ends.
    static let commonSizes: [Dimensions] = [
        Dimensions(width: 160, height: 120), Dimensions(width: 320, height: 240), Dimensions(width: 640, height: 360),
        Dimensions(width: 640, height: 480), Dimensions(width: 800, height: 600), Dimensions(width: 1280, height: 720),
        Dimensions(width: 1920, height: 1080), Dimensions(width: 3840, height: 2160),
    ]

    /// True for single-planar video capture nodes that stream (not metadata, output, radio, touch).
    static func isVideoCapture(_ caps: V4L2CapabilityFlags) -> Bool { caps.isSuperset(of: [.videoCapture, .streaming]) }

    /// ENUM_FMT × ENUM_FRAMESIZES × ENUM_FRAMEINTERVALS for the formats the pipeline takes.
    static func enumerate(_ system: any V4L2System, fd: V4L2FileDescriptor) -> [DeviceFormat] {
        var result: [DeviceFormat] = []
        var index: UInt32 = 0
        while let pixelFormat = try? system.enumerateFormat(fd, type: .videoCapture, index: index) {
            index += 1
            guard supported.contains(pixelFormat) else { continue }
            for size in frameSizes(system, fd: fd, pixelFormat: pixelFormat) {
                let ranges = frameRateRanges(system, fd: fd, pixelFormat: pixelFormat, size: size)
                result.append(DeviceFormat(formatDescription: .video(pixelFormat: pixelFormat, dimensions: size),
                                           frameRateRanges: ranges))
            }
        }
        return result
    }

    static func frameSizes(_ system: any V4L2System, fd: V4L2FileDescriptor, pixelFormat: PixelFormat) -> [Dimensions] {
        var sizes: [Dimensions] = []
        var index: UInt32 = 0
        while let answer = try? system.enumerateFrameSize(fd, pixelFormat: pixelFormat, index: index) {
            guard case .stepwise(let lo, let hi, let stepWidth, let stepHeight) = answer else {
                if case .discrete(let size) = answer { sizes.append(size) }
                index += 1
                continue
            }
            // Stepwise or continuous: index 0 only; the two ends plus the common sizes that fit.
            let stepW = max(1, stepWidth), stepH = max(1, stepHeight)
            let fits = { (d: Dimensions) -> Bool in
                d.width >= lo.width && d.width <= hi.width && d.height >= lo.height && d.height <= hi.height
                    && (d.width - lo.width) % stepW == 0 && (d.height - lo.height) % stepH == 0
            }
            let candidates = [lo] + commonSizes.filter(fits) + [hi]
            for d in candidates where !sizes.contains(d) { sizes.append(d) }
            break
        }
        if sizes.isEmpty, let current = try? system.getFormat(fd, type: .videoCapture), current.pixelFormat == pixelFormat {
            // No ENUM_FRAMESIZES: the current size is the only one we can vouch for.
            sizes.append(current.dimensions)
        }
        return sizes
    }

    static func duration(_ f: V4L2Fraction) -> MediaTime? {
        guard f.numerator > 0, f.denominator > 0, f.denominator <= UInt32(Int32.max) else { return nil }
        return MediaTime(value: Int64(f.numerator), timescale: Int32(f.denominator))
    }

    /// A frame duration as a V4L2 fraction (both fit in UInt32 for any sane rate).
    static func fraction(_ t: MediaTime) -> V4L2Fraction {
        var num = t.value, den = Int64(t.timescale)
        func gcd(_ a: Int64, _ b: Int64) -> Int64 { b == 0 ? a : gcd(b, a % b) }
        let g = max(1, gcd(abs(num), abs(den)))
        num /= g; den /= g
        while num > Int64(UInt32.max) || den > Int64(UInt32.max) { num /= 2; den /= 2 }
        return V4L2Fraction(numerator: UInt32(max(1, num)), denominator: UInt32(max(1, den)))
    }

    static func frameRateRanges(_ system: any V4L2System, fd: V4L2FileDescriptor, pixelFormat: PixelFormat,
                                size: Dimensions) -> [FrameRateRange] {
        var ranges: [FrameRateRange] = []
        var index: UInt32 = 0
        while let answer = try? system.enumerateFrameInterval(fd, pixelFormat: pixelFormat, size: size, index: index) {
            guard case .stepwise(let lo, let hi, _) = answer else {
                if case .discrete(let f) = answer, let d = duration(f) { ranges.append(FrameRateRange(minFrameDuration: d, maxFrameDuration: d)) }
                index += 1
                continue
            }
            if let lo = duration(lo), let hi = duration(hi) {
                ranges.append(FrameRateRange(minFrameDuration: lo, maxFrameDuration: hi))
            }
            break
        }
        // The driver's order, without duplicates.
        var unique: [FrameRateRange] = []
        for r in ranges where !unique.contains(r) { unique.append(r) }
        if unique.isEmpty, let parameters = try? system.getParameters(fd, type: .videoCapture), let d = duration(parameters.timePerFrame) {
            // No interval enumeration: the current interval is the one rate we know.
            unique.append(FrameRateRange(minFrameDuration: d, maxFrameDuration: d))
        }
        return unique
    }

    /// Index of the node's current format in `formats` (the format a fresh device starts with).
    static func currentFormatIndex(_ system: any V4L2System, fd: V4L2FileDescriptor, formats: [DeviceFormat]) -> Int {
        guard let f = try? system.getFormat(fd, type: .videoCapture) else { return 0 }
        let current = FormatDescription.video(pixelFormat: f.pixelFormat, dimensions: f.dimensions)
        return formats.firstIndex { $0.formatDescription == current } ?? 0
    }
}
