/// Whether the user lets this process capture a media type (AVAuthorizationStatus).
public enum AuthorizationStatus: String, Sendable, Hashable, Codable {
    case notDetermined, restricted, denied, authorized
}

/// A driver that knows about permission to capture. The simulator scripts its answers; a real
/// backend maps it to whether the device nodes can be opened. Drivers that do not adopt this
/// are treated as authorized.
public protocol AuthorizingDriver: CaptureDriver {
    func authorizationStatus(for mediaType: MediaType) -> AuthorizationStatus
    /// Asks the user (or the script) once; later calls return the recorded answer.
    func requestAccess(for mediaType: MediaType) async -> Bool
}

extension DeviceRegistry {
    /// The authorization status for a media type across this registry's drivers: authorized only
    /// when every driver that tracks permission says so, otherwise the first other answer.
    /// (`MediaType` has only video and audio, so AVFoundation's "other media type" programmer
    /// error cannot happen here.)
    public func authorizationStatus(for mediaType: MediaType) -> AuthorizationStatus {
        for case let driver as any AuthorizingDriver in drivers {
            let status = driver.authorizationStatus(for: mediaType)
            if status != .authorized { return status }
        }
        return .authorized
    }

    /// Requests access from every driver that tracks permission; true when all grant it.
    public func requestAccess(for mediaType: MediaType) async -> Bool {
        var granted = true
        for case let driver as any AuthorizingDriver in drivers {
            if await !driver.requestAccess(for: mediaType) { granted = false }
        }
        return granted
    }
}
