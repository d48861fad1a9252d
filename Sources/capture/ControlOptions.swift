import ArgumentParser
import CaptureKit
import Foundation

/// `--control KEY=VALUE` and `--format WxH@FPS[:FOURCC]`, shared by the commands that capture.
enum ControlOptions {
    /// Splits `KEY=VALUE`; a malformed entry fails naming it.
    static func parse(_ entries: [String]) throws(CaptureError) -> [(key: String, value: String)] {
        var result: [(key: String, value: String)] = []
        for entry in entries {
            guard let eq = entry.firstIndex(of: "="), eq != entry.startIndex, entry.index(after: eq) != entry.endIndex else {
                throw .invalidArgument("--control '\(entry)' must look like KEY=VALUE (keys: \(CaptureDevice.controlKeys.joined(separator: ", ")))")
            }
            result.append((String(entry[..<eq]), String(entry[entry.index(after: eq)...])))
        }
        return result
    }

    /// Picks the format and sets a constant frame rate (min = max duration) under the lock held by the caller.
    static func applyFormat(_ text: String, to device: CaptureDevice) throws(CaptureError) {
        guard let request = FormatRequest(text) else {
            throw .invalidArgument("--format '\(text)' must look like 1280x720@60 or 1280x720@60:420f (pixel formats: 420v, 420f, NV12, I420, YUYV, MJPG)")
        }
        let duration = request.frameDuration
        let match = device.formats.first { format in
            guard format.dimensions == request.dimensions, format.supports(frameDuration: duration) else { return false }
            guard let fourcc = request.fourcc else { return true }
            guard format.pixelFormat == PixelFormat(name: fourcc) else { return false }
            switch fourcc.lowercased() {
            case "420f": return format.isFullRange
            case "420v": return !format.isFullRange
            default: return true
            }
        }
        guard let format = match else {
            let available = device.formats.map { "\(describe($0)) @ \($0.frameRateRanges.map(\.description).joined(separator: ", "))" }
            throw .formatNotSupported("\(device.uniqueID) has no format \(text) (it has: \(available.joined(separator: "; ")))")
        }
        try device.setActiveFormat(format)
        try device.setActiveVideoMaxFrameDuration(duration)
        try device.setActiveVideoMinFrameDuration(duration)
    }

    /// Applies every `--control` in order; errors name the key, the value and what is allowed.
    static func applyControls(_ entries: [(key: String, value: String)], to device: CaptureDevice) throws(CaptureError) {
        for (key, value) in entries {
            do {
                try device.applyControl(key: key, value: value)
            } catch {
                // Name the value too when the library's message names only the control.
                if case .controlNotSupported(let id, _, let detail) = error {
                    throw .controlNotSupported(device: id, control: "\(key) (value \(value))", detail: detail)
                }
                throw error
            }
        }
    }

    /// `--format` then `--control`s, under the configuration lock, before capture starts.
    static func configure(_ device: CaptureDevice, format: String?, controls: [String]) throws(CaptureError) {
        let entries = try parse(controls)
        guard format != nil || !entries.isEmpty else { return }
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        if let format { try applyFormat(format, to: device) }
        try applyControls(entries, to: device)
    }

    static func describe(_ format: DeviceFormat) -> String {
        guard let pf = format.pixelFormat, let d = format.dimensions else { return "\(format.formatDescription)" }
        let name = pf == .nv12 ? (format.isFullRange ? "420f" : "420v") : pf.fourcc
        return "\(name) \(d)"
    }
}
