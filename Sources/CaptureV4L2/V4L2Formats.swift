import CaptureCore
import CV4L2

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

    /// The effective capabilities: the node's own when the driver reports them (DEVICE_CAPS).
    static func capabilities(_ cap: v4l2_capability) -> UInt32 {
        cap.capabilities & UInt32(V4L2_CAP_DEVICE_CAPS) != 0 ? cap.device_caps : cap.capabilities
    }

    /// True for single-planar video capture nodes that stream (not metadata, output, radio, touch).
    static func isVideoCapture(_ caps: UInt32) -> Bool {
        caps & UInt32(V4L2_CAP_VIDEO_CAPTURE) != 0 && caps & UInt32(V4L2_CAP_STREAMING) != 0
    }

    /// ENUM_FMT × ENUM_FRAMESIZES × ENUM_FRAMEINTERVALS for the formats the pipeline takes.
    static func enumerate(_ system: any V4L2System, fd: Int32) -> [DeviceFormat] {
        var result: [DeviceFormat] = []
        var index: UInt32 = 0
        while true {
            var desc = v4l2_fmtdesc()
            desc.index = index
            desc.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            guard xioctl(system, fd, V4L2Request.enumFormat, &desc) == 0 else { break }
            index += 1
            let pixelFormat = PixelFormat(rawValue: desc.pixelformat)
            guard supported.contains(pixelFormat) else { continue }
            for size in frameSizes(system, fd: fd, pixelFormat: pixelFormat) {
                let ranges = frameRateRanges(system, fd: fd, pixelFormat: pixelFormat, size: size)
                result.append(DeviceFormat(formatDescription: .video(pixelFormat: pixelFormat, dimensions: size),
                                           frameRateRanges: ranges))
            }
        }
        return result
    }

    static func frameSizes(_ system: any V4L2System, fd: Int32, pixelFormat: PixelFormat) -> [Dimensions] {
        var sizes: [Dimensions] = []
        var index: UInt32 = 0
        while true {
            var fs = v4l2_frmsizeenum()
            fs.index = index
            fs.pixel_format = pixelFormat.rawValue
            guard xioctl(system, fd, V4L2Request.enumFrameSizes, &fs) == 0 else { break }
            if fs.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
                sizes.append(Dimensions(width: Int(fs.discrete.width), height: Int(fs.discrete.height)))
                index += 1
                continue
            }
            // Stepwise or continuous: index 0 only; the two ends plus the common sizes that fit.
            let s = fs.stepwise
            let stepW = max(1, Int(s.step_width)), stepH = max(1, Int(s.step_height))
            let fits = { (d: Dimensions) -> Bool in
                d.width >= Int(s.min_width) && d.width <= Int(s.max_width) && d.height >= Int(s.min_height)
                    && d.height <= Int(s.max_height) && (d.width - Int(s.min_width)) % stepW == 0
                    && (d.height - Int(s.min_height)) % stepH == 0
            }
            var candidates = [Dimensions(width: Int(s.min_width), height: Int(s.min_height))]
            candidates += commonSizes.filter(fits)
            candidates.append(Dimensions(width: Int(s.max_width), height: Int(s.max_height)))
            for d in candidates where !sizes.contains(d) { sizes.append(d) }
            break
        }
        if sizes.isEmpty {
            // No ENUM_FRAMESIZES: the current size is the only one we can vouch for.
            var f = v4l2_format()
            f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            if xioctl(system, fd, V4L2Request.getFormat, &f) == 0, f.fmt.pix.pixelformat == pixelFormat.rawValue {
                sizes.append(Dimensions(width: Int(f.fmt.pix.width), height: Int(f.fmt.pix.height)))
            }
        }
        return sizes
    }

    static func duration(_ f: v4l2_fract) -> MediaTime? {
        guard f.numerator > 0, f.denominator > 0, f.denominator <= UInt32(Int32.max) else { return nil }
        return MediaTime(value: Int64(f.numerator), timescale: Int32(f.denominator))
    }

    static func frameRateRanges(_ system: any V4L2System, fd: Int32, pixelFormat: PixelFormat, size: Dimensions) -> [FrameRateRange] {
        var ranges: [FrameRateRange] = []
        var index: UInt32 = 0
        while true {
            var fi = v4l2_frmivalenum()
            fi.index = index
            fi.pixel_format = pixelFormat.rawValue
            fi.width = UInt32(size.width)
            fi.height = UInt32(size.height)
            guard xioctl(system, fd, V4L2Request.enumFrameIntervals, &fi) == 0 else { break }
            if fi.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue {
                if let d = duration(fi.discrete) { ranges.append(FrameRateRange(minFrameDuration: d, maxFrameDuration: d)) }
                index += 1
                continue
            }
            if let lo = duration(fi.stepwise.min), let hi = duration(fi.stepwise.max) {
                ranges.append(FrameRateRange(minFrameDuration: lo, maxFrameDuration: hi))
            }
            break
        }
        // The driver's order, without duplicates.
        var unique: [FrameRateRange] = []
        for r in ranges where !unique.contains(r) { unique.append(r) }
        if unique.isEmpty {
            // No interval enumeration: the current interval is the one rate we know.
            var parm = v4l2_streamparm()
            parm.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            if xioctl(system, fd, V4L2Request.getParameters, &parm) == 0, let d = duration(parm.parm.capture.timeperframe) {
                unique.append(FrameRateRange(minFrameDuration: d, maxFrameDuration: d))
            }
        }
        return unique
    }

    /// Index of the node's current format in `formats` (the format a fresh device starts with).
    static func currentFormatIndex(_ system: any V4L2System, fd: Int32, formats: [DeviceFormat]) -> Int {
        var f = v4l2_format()
        f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        guard xioctl(system, fd, V4L2Request.getFormat, &f) == 0 else { return 0 }
        let current = FormatDescription.video(pixelFormat: PixelFormat(rawValue: f.fmt.pix.pixelformat),
                                              dimensions: Dimensions(width: Int(f.fmt.pix.width), height: Int(f.fmt.pix.height)))
        return formats.firstIndex { $0.formatDescription == current } ?? 0
    }
}
