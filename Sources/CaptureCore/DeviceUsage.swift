/// Which session is streaming from each device object, so one device feeds one running session.
/// (Separate registries make separate device objects: two simulators do not share devices.)
final class DeviceUsage: Sendable {
    static let shared = DeviceUsage()
    private let owners = Locked<[ObjectIdentifier: ObjectIdentifier]>([:])

    func claim(_ device: CaptureDevice, by session: CaptureSession) throws(CaptureError) {
        let me = ObjectIdentifier(session), key = ObjectIdentifier(device)
        try owners.withLock { (owners: inout [ObjectIdentifier: ObjectIdentifier]) throws(CaptureError) in
            if let owner = owners[key], owner != me { throw CaptureError.deviceInUse(device.uniqueID) }
            owners[key] = me
        }
    }

    func release(_ device: CaptureDevice, by session: CaptureSession) {
        owners.withLock { owners in
            if owners[ObjectIdentifier(device)] == ObjectIdentifier(session) { owners[ObjectIdentifier(device)] = nil }
        }
    }
}
