import Foundation

extension CaptureDevice {
    // MARK: Focus

    public var focusMode: FocusMode { menu(.focusMode).flatMap(FocusMode.init(rawValue:)) ?? .locked }

    /// A fixed-focus device supports only `.locked`.
    public func isFocusModeSupported(_ mode: FocusMode) -> Bool {
        let entries = menuEntries(.focusMode)
        return entries.isEmpty ? mode == .locked : entries.contains(mode.rawValue)
    }

    public func setFocusMode(_ mode: FocusMode) throws(CaptureError) {
        guard isFocusModeSupported(mode) else { throw unsupported("focus.mode", "mode \(mode.rawValue) (supported: \(supportedNames(FocusMode.allCases, isFocusModeSupported)))") }
        if controlDescription(.focusMode) == nil {
            try withLockCheck("setFocusMode")
            return
        }
        try apply([(.focusMode, .menu(mode.rawValue))], operation: "setFocusMode", completion: nil)
    }

    public var isFocusPointOfInterestSupported: Bool { isWritable(.focusPointOfInterestX) }

    public var focusPointOfInterest: CapturePoint {
        CapturePoint(x: double(.focusPointOfInterestX) ?? 0.5, y: double(.focusPointOfInterestY) ?? 0.5)
    }

    /// Sets where autofocus measures; it does not focus by itself: set an auto mode afterwards.
    public func setFocusPointOfInterest(_ point: CapturePoint) throws(CaptureError) {
        guard isFocusPointOfInterestSupported else { throw unsupported("focus.pointOfInterest", "no focus point of interest") }
        try Self.checkPoint(point, "focus.pointOfInterest")
        try apply([(.focusPointOfInterestX, .real(point.x)), (.focusPointOfInterestY, .real(point.y))],
                  operation: "setFocusPointOfInterest", completion: nil)
    }

    static func checkPoint(_ p: CapturePoint, _ name: String) throws(CaptureError) {
        guard (0...1).contains(p.x), (0...1).contains(p.y) else {
            throw .valueOutOfRange(control: name, value: "\(p)", allowed: "x and y in 0…1, (0, 0) top-left")
        }
    }

    /// 0 is the closest focus, 1 the farthest. Changes by itself while autofocus works.
    public var lensPosition: Double { double(.lensPosition) ?? 1 }

    public var isLockingFocusWithCustomLensPositionSupported: Bool { isWritable(.lensPosition) }

    public var isAdjustingFocus: Bool { bool(.isAdjustingFocus) }

    /// Locks focus at `lensPosition` (0…1, or `currentLensPosition` to keep the lens where it is);
    /// the completion gets the PTS of the first frame with the lens there.
    public func setFocusModeLocked(lensPosition: Double,
                                   completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isFocusModeSupported(.locked), controlDescription(.focusMode) != nil else {
            throw unsupported("focus.lensPosition", "the lens has fixed focus")
        }
        if lensPosition == Self.currentLensPosition {
            try apply([(.focusMode, .menu(FocusMode.locked.rawValue))], operation: "setFocusModeLocked", completion: completion)
            return
        }
        guard isLockingFocusWithCustomLensPositionSupported else {
            throw unsupported("focus.lensPosition", "locking focus at a custom lens position is not supported")
        }
        guard (0...1).contains(lensPosition) else {
            throw .valueOutOfRange(control: "focus.lensPosition", value: Self.number(lensPosition), allowed: "0…1")
        }
        try apply([(.focusMode, .menu(FocusMode.locked.rawValue)), (.lensPosition, .real(lensPosition))],
                  operation: "setFocusModeLocked", completion: completion)
    }

    public var isSmoothAutoFocusSupported: Bool { isWritable(.smoothAutoFocus) }
    public var isSmoothAutoFocusEnabled: Bool { bool(.smoothAutoFocus) }

    public func setSmoothAutoFocusEnabled(_ enabled: Bool) throws(CaptureError) {
        guard isSmoothAutoFocusSupported else { throw unsupported("focus.smooth", "smooth autofocus is not supported") }
        try apply([(.smoothAutoFocus, .bool(enabled))], operation: "setSmoothAutoFocusEnabled", completion: nil)
    }
}
