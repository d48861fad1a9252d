import Foundation

extension CaptureDevice {
    // MARK: Torch

    public var hasTorch: Bool { controlDescription(.torchMode) != nil }
    public var isTorchAvailable: Bool { hasTorch && maxAvailableTorchLevel > 0 }
    public var torchMode: TorchMode { menu(.torchMode).flatMap(TorchMode.init(rawValue:)) ?? .off }
    /// The torch's current level, 0 when off.
    public var torchLevel: Double { double(.torchLevel) ?? 0 }
    public var isTorchActive: Bool { torchLevel > 0 }
    /// The highest level the torch can give now; below 1 when the device is hot.
    public var maxAvailableTorchLevel: Double { hasTorch ? (double(.maxAvailableTorchLevel) ?? 1) : 0 }

    public func isTorchModeSupported(_ mode: TorchMode) -> Bool {
        hasTorch ? menuEntries(.torchMode).contains(mode.rawValue) : mode == .off
    }

    public func setTorchMode(_ mode: TorchMode) throws(CaptureError) {
        guard hasTorch else { throw unsupported("torch.mode", "the device has no torch") }
        guard isTorchModeSupported(mode) else { throw unsupported("torch.mode", "mode \(mode.rawValue)") }
        try apply([(.torchMode, .menu(mode.rawValue))], operation: "setTorchMode", completion: nil)
    }

    /// Turns the torch on at `level` in (0, 1], or `torchLevelMaximumAvailable`. A level in range but
    /// above `maxAvailableTorchLevel` is a runtime error (`torchLevelUnavailable`).
    public func setTorchModeOn(level: Double) throws(CaptureError) {
        guard hasTorch else { throw unsupported("torch.level", "the device has no torch") }
        let available = maxAvailableTorchLevel
        let wanted = level == Self.torchLevelMaximumAvailable ? available : level
        guard level == Self.torchLevelMaximumAvailable || (level > 0 && level <= 1) else {
            throw .valueOutOfRange(control: "torch.level", value: Self.number(level), allowed: "greater than 0, at most 1")
        }
        guard wanted <= available, wanted > 0 else { throw .torchLevelUnavailable(requested: wanted, available: available) }
        try apply([(.torchMode, .menu(TorchMode.on.rawValue)), (.torchLevel, .real(wanted))], operation: "setTorchModeOn", completion: nil)
    }

    // MARK: Zoom

    public var videoZoomFactor: Double { double(.zoomFactor) ?? 1 }
    public var isRampingVideoZoom: Bool { bool(.isRampingZoom) }

    /// Jumps to `factor` in 1…activeFormat.videoMaxZoomFactor.
    public func setVideoZoomFactor(_ factor: Double) throws(CaptureError) {
        try checkZoom(factor)
        try apply([(.zoomFactor, .real(factor))], operation: "setVideoZoomFactor", completion: nil)
    }

    /// Moves smoothly to `factor` at `rate` powers of two per second.
    public func ramp(toVideoZoomFactor factor: Double, withRate rate: Double) throws(CaptureError) {
        try checkZoom(factor)
        guard rate > 0, rate.isFinite else {
            throw .valueOutOfRange(control: "zoom.rampRate", value: Self.number(rate), allowed: "a positive number of powers of two per second")
        }
        guard controlDescription(.zoomRampTarget) != nil else { throw unsupported("zoom.ramp", "zoom ramps are not supported") }
        try apply([(.zoomRampTarget, .real(factor)), (.zoomRampRate, .real(rate))], operation: "ramp(toVideoZoomFactor:)", completion: nil)
    }

    public func cancelVideoZoomRamp() throws(CaptureError) {
        guard controlDescription(.zoomRampRate) != nil else { throw unsupported("zoom.ramp", "zoom ramps are not supported") }
        try apply([(.zoomRampRate, .real(0))], operation: "cancelVideoZoomRamp", completion: nil)
    }

    private func checkZoom(_ factor: Double) throws(CaptureError) {
        guard controlDescription(.zoomFactor) != nil else { throw unsupported("zoom.factor", "the device cannot zoom") }
        let maxZoom = activeFormat.videoMaxZoomFactor
        guard factor >= 1, factor <= maxZoom else {
            throw .valueOutOfRange(control: "zoom.factor", value: Self.number(factor), allowed: "1…\(Self.number(maxZoom))")
        }
    }
}
