import Foundation

extension CaptureDevice {
    // MARK: White balance

    public var whiteBalanceMode: WhiteBalanceMode {
        menu(.whiteBalanceMode).flatMap(WhiteBalanceMode.init(rawValue:)) ?? .locked
    }

    public func isWhiteBalanceModeSupported(_ mode: WhiteBalanceMode) -> Bool {
        menuEntries(.whiteBalanceMode).contains(mode.rawValue)
    }

    public func setWhiteBalanceMode(_ mode: WhiteBalanceMode) throws(CaptureError) {
        guard isWhiteBalanceModeSupported(mode) else { throw unsupported("whiteBalance.mode", "mode \(mode.rawValue) (supported: \(supportedNames(WhiteBalanceMode.allCases, isWhiteBalanceModeSupported)))") }
        try apply([(.whiteBalanceMode, .menu(mode.rawValue))], operation: "setWhiteBalanceMode", completion: nil)
    }

    public var isLockingWhiteBalanceWithCustomDeviceGainsSupported: Bool { isWritable(.whiteBalanceRedGain) }

    public var maxWhiteBalanceGain: Double {
        if case .real(_, let hi)? = controlDescription(.whiteBalanceRedGain)?.kind { return hi }
        return 1
    }

    /// The gains of the latest frame (changes by itself in auto modes). Devices that only have a
    /// temperature control report the gains of that temperature.
    public var deviceWhiteBalanceGains: WhiteBalanceGains {
        if let r = double(.whiteBalanceRedGain), let g = double(.whiteBalanceGreenGain), let b = double(.whiteBalanceBlueGain) {
            return WhiteBalanceGains(red: r, green: g, blue: b)
        }
        if let t = double(.whiteBalanceTemperature) { return ColorScience.gains(for: TemperatureAndTint(temperature: t)) }
        return .unity
    }

    /// The gains that would make the latest frame average to grey.
    public var grayWorldDeviceWhiteBalanceGains: WhiteBalanceGains {
        guard let r = double(.grayWorldRedGain), let g = double(.grayWorldGreenGain), let b = double(.grayWorldBlueGain) else {
            return deviceWhiteBalanceGains
        }
        return WhiteBalanceGains(red: r, green: g, blue: b)
    }

    public var isAdjustingWhiteBalance: Bool { bool(.isAdjustingWhiteBalance) }

    public func temperatureAndTintValues(for gains: WhiteBalanceGains) -> TemperatureAndTint {
        ColorScience.temperatureAndTint(for: gains)
    }

    public func deviceWhiteBalanceGains(for values: TemperatureAndTint) -> WhiteBalanceGains {
        ColorScience.gains(for: values)
    }

    /// Locks white balance at `gains` (each 1…maxWhiteBalanceGain, or `.current`).
    public func setWhiteBalanceModeLocked(gains: WhiteBalanceGains,
                                          completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isWhiteBalanceModeSupported(.locked) else { throw unsupported("whiteBalance.mode", "white balance cannot be locked") }
        if gains == .current {
            try apply([(.whiteBalanceMode, .menu(WhiteBalanceMode.locked.rawValue))], operation: "setWhiteBalanceModeLocked", completion: completion)
            return
        }
        guard isLockingWhiteBalanceWithCustomDeviceGainsSupported else {
            throw unsupported("whiteBalance.gains", "locking white balance with custom gains is not supported")
        }
        let maxGain = maxWhiteBalanceGain
        for (name, g) in [("red", gains.red), ("green", gains.green), ("blue", gains.blue)] where !(g >= 1 && g <= maxGain) {
            throw .valueOutOfRange(control: "whiteBalance.gains.\(name)", value: Self.number(g), allowed: "1…\(Self.number(maxGain))")
        }
        try apply([(.whiteBalanceMode, .menu(WhiteBalanceMode.locked.rawValue)), (.whiteBalanceRedGain, .real(gains.red)),
                   (.whiteBalanceGreenGain, .real(gains.green)), (.whiteBalanceBlueGain, .real(gains.blue))],
                  operation: "setWhiteBalanceModeLocked", completion: completion)
    }

    /// Locks white balance for light of this temperature: through gains where the device has them,
    /// otherwise through its temperature control (UVC webcams).
    public func setWhiteBalanceModeLocked(temperatureAndTint values: TemperatureAndTint,
                                          completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        if isLockingWhiteBalanceWithCustomDeviceGainsSupported {
            let gains = ColorScience.gains(for: values)
            guard max(gains.red, gains.green, gains.blue) <= maxWhiteBalanceGain else {
                throw .valueOutOfRange(control: "whiteBalance.temperature", value: "\(values)",
                                       allowed: "temperatures whose gains stay within 1…\(Self.number(maxWhiteBalanceGain)) (gains would be \(gains))")
            }
            try setWhiteBalanceModeLocked(gains: gains, completion: completion)
            return
        }
        guard let description = controlDescription(.whiteBalanceTemperature), !description.isReadOnly else {
            throw unsupported("whiteBalance.temperature", "white balance cannot be set")
        }
        try Self.validate(.real(values.temperature), against: description)
        var list: [(ControlID, ControlValue)] = []
        if isWhiteBalanceModeSupported(.locked) { list.append((.whiteBalanceMode, .menu(WhiteBalanceMode.locked.rawValue))) }
        list.append((.whiteBalanceTemperature, .real(values.temperature)))
        try apply(list, operation: "setWhiteBalanceModeLocked", completion: completion)
    }
}
