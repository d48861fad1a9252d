import Foundation

extension CaptureDevice {
    // MARK: Exposure

    public var exposureMode: ExposureMode { menu(.exposureMode).flatMap(ExposureMode.init(rawValue:)) ?? .locked }

    public func isExposureModeSupported(_ mode: ExposureMode) -> Bool { menuEntries(.exposureMode).contains(mode.rawValue) }

    public func setExposureMode(_ mode: ExposureMode) throws(CaptureError) {
        guard isExposureModeSupported(mode) else { throw unsupported("exposure.mode", "mode \(mode.rawValue) (supported: \(supportedNames(ExposureMode.allCases, isExposureModeSupported)))") }
        try apply([(.exposureMode, .menu(mode.rawValue))], operation: "setExposureMode", completion: nil)
    }

    public var isExposurePointOfInterestSupported: Bool { isWritable(.exposurePointOfInterestX) }

    public var exposurePointOfInterest: CapturePoint {
        CapturePoint(x: double(.exposurePointOfInterestX) ?? 0.5, y: double(.exposurePointOfInterestY) ?? 0.5)
    }

    public func setExposurePointOfInterest(_ point: CapturePoint) throws(CaptureError) {
        guard isExposurePointOfInterestSupported else { throw unsupported("exposure.pointOfInterest", "no exposure point of interest") }
        try Self.checkPoint(point, "exposure.pointOfInterest")
        try apply([(.exposurePointOfInterestX, .real(point.x)), (.exposurePointOfInterestY, .real(point.y))],
                  operation: "setExposurePointOfInterest", completion: nil)
    }

    /// The exposure time of the latest frame (changes by itself in auto modes).
    public var exposureDuration: MediaTime {
        MediaTime(seconds: double(.exposureDuration) ?? 0, preferredTimescale: 1_000_000_000)
    }

    public var iso: Double { double(.iso) ?? 0 }
    public var isAdjustingExposure: Bool { bool(.isAdjustingExposure) }
    /// How far (EV) the metered exposure is from the target.
    public var exposureTargetOffset: Double { double(.exposureTargetOffset) ?? 0 }

    /// Custom exposure: `duration` within the active format's min/max exposure duration (or
    /// `currentExposureDuration`), `iso` within its min/max ISO (or `currentISO`). A duration
    /// longer than the frame duration lengthens the frames, as sensors do.
    public func setExposureModeCustom(duration: MediaTime, iso: Double,
                                      completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isExposureModeSupported(.custom) else { throw unsupported("exposure.mode", "custom exposure is not supported") }
        let format = activeFormat
        var values: [(ControlID, ControlValue)] = [(.exposureMode, .menu(ExposureMode.custom.rawValue))]
        if duration.isValid {
            guard duration.isNumeric, duration >= format.minExposureDuration, duration <= format.maxExposureDuration else {
                throw .valueOutOfRange(control: "exposure.duration", value: "\(Self.number(duration.seconds)) s",
                                       allowed: "\(Self.number(format.minExposureDuration.seconds))…\(Self.number(format.maxExposureDuration.seconds)) s")
            }
            values.append((.exposureDuration, .real(duration.seconds)))
        }
        if iso != Self.currentISO {
            guard iso >= format.minISO, iso <= format.maxISO else {
                throw .valueOutOfRange(control: "exposure.iso", value: Self.number(iso),
                                       allowed: "\(Self.number(format.minISO))…\(Self.number(format.maxISO))")
            }
            values.append((.iso, .real(iso)))
        }
        try apply(values, operation: "setExposureModeCustom", completion: completion)
    }

    public var exposureTargetBias: Double { double(.exposureTargetBias) ?? 0 }

    public var minExposureTargetBias: Double {
        if case .real(let lo, _)? = controlDescription(.exposureTargetBias)?.kind { return lo }
        return 0
    }

    public var maxExposureTargetBias: Double {
        if case .real(_, let hi)? = controlDescription(.exposureTargetBias)?.kind { return hi }
        return 0
    }

    public func setExposureTargetBias(_ bias: Double, completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isWritable(.exposureTargetBias) else { throw unsupported("exposure.bias", "no exposure target bias") }
        guard bias >= minExposureTargetBias, bias <= maxExposureTargetBias else {
            throw .valueOutOfRange(control: "exposure.bias", value: Self.number(bias),
                                   allowed: "\(Self.number(minExposureTargetBias))…\(Self.number(maxExposureTargetBias)) EV")
        }
        try apply([(.exposureTargetBias, .real(bias))], operation: "setExposureTargetBias", completion: completion)
    }
}
