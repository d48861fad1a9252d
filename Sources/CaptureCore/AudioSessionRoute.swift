import Foundation

// MARK: - Ports, data sources, routes

/// The kind of an audio port (AVAudioSession.Port).
public enum AudioSessionPortType: String, Sendable, Hashable, CaseIterable, Codable {
    // inputs
    case builtInMic, usbAudio, lineIn, headsetMic, loopback
    // outputs
    case builtInSpeaker, headphones, lineOut
}

/// Where a data source faces (AVAudioSession.Orientation).
public enum AudioSessionOrientation: String, Sendable, Hashable, CaseIterable, Codable {
    case front, back, bottom, top, left, right
}

/// One of a port's microphones (AVAudioSessionDataSourceDescription): a phone's front, back and
/// bottom microphones; on Linux a card's capture source.
public struct AudioSessionDataSourceDescription: Sendable, Hashable {
    public var dataSourceID: Int
    public var dataSourceName: String
    public var orientation: AudioSessionOrientation?

    public init(dataSourceID: Int, dataSourceName: String, orientation: AudioSessionOrientation? = nil) {
        self.dataSourceID = dataSourceID
        self.dataSourceName = dataSourceName
        self.orientation = orientation
    }
}

/// What a driver reports about one of its microphones, for the audio session.
public struct AudioInputRoute: Sendable, Hashable {
    public var uniqueID: String
    public var name: String
    public var portType: AudioSessionPortType
    public var dataSources: [AudioSessionDataSourceDescription]
    public var selectedDataSourceID: Int?
    /// The input gain 0…1, nil when it cannot be set.
    public var gain: Float?

    public init(uniqueID: String, name: String, portType: AudioSessionPortType, dataSources: [AudioSessionDataSourceDescription] = [],
                selectedDataSourceID: Int? = nil, gain: Float? = nil) {
        self.uniqueID = uniqueID
        self.name = name
        self.portType = portType
        self.dataSources = dataSources
        self.selectedDataSourceID = selectedDataSourceID
        self.gain = gain
    }
}

/// A driver whose microphones have ports, data sources and an input gain (the simulator: a gain
/// stage on the samples; ALSA: the card's mixer capture volume).
public protocol AudioRoutingDriver: CaptureDriver {
    /// The connected microphones this driver has, as ports.
    func audioInputRoutes() -> [AudioInputRoute]
    /// Makes `dataSourceID` the microphone the input records from.
    func selectDataSource(_ dataSourceID: Int, forInput uniqueID: String) throws(CaptureError)
    /// Sets the input's gain, 0…1 (1 = unity for the simulator, full scale of the mixer on a card).
    func setInputGain(_ gain: Float, forInput uniqueID: String) throws(CaptureError)
}

/// An audio port (AVAudioSessionPortDescription): its type, name, uid (the device's unique ID) and
/// data sources. `setPreferredDataSource` picks which of its microphones records.
public final class AudioSessionPortDescription: Sendable, Hashable, CustomStringConvertible {
    public let portType: AudioSessionPortType
    public let portName: String
    /// The device's unique ID (`sim:mic`, `hw:Loopback,1,0`, …).
    public let uid: String
    /// Nil for a port with a single microphone.
    public let dataSources: [AudioSessionDataSourceDescription]?
    public let selectedDataSource: AudioSessionDataSourceDescription?
    private let session: AudioSession?

    init(portType: AudioSessionPortType, portName: String, uid: String, dataSources: [AudioSessionDataSourceDescription]?,
         selectedDataSource: AudioSessionDataSourceDescription?, session: AudioSession?) {
        self.portType = portType
        self.portName = portName
        self.uid = uid
        self.dataSources = dataSources
        self.selectedDataSource = selectedDataSource
        self.session = session
    }

    /// The data source the session prefers for this port (nil: the port's default).
    public var preferredDataSource: AudioSessionDataSourceDescription? { session?.preferredDataSource(forPort: uid) }

    /// Records from `dataSource` on this port (applied at once; the port keeps it while connected).
    public func setPreferredDataSource(_ dataSource: AudioSessionDataSourceDescription?) throws(CaptureError) {
        guard let session else { throw .audioRouteUnavailable("the port \(uid) belongs to no audio session") }
        try session.setPreferredDataSource(dataSource, forPort: uid)
    }

    public static func == (a: AudioSessionPortDescription, b: AudioSessionPortDescription) -> Bool {
        a.uid == b.uid && a.portType == b.portType && a.portName == b.portName && a.dataSources == b.dataSources
            && a.selectedDataSource == b.selectedDataSource
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(uid) }

    public var description: String {
        "\(portType.rawValue) '\(portName)' (\(uid))" + (selectedDataSource.map { " [\($0.dataSourceName)]" } ?? "")
    }
}

/// The ports audio flows through now (AVAudioSessionRouteDescription).
public struct AudioSessionRouteDescription: Sendable, Hashable {
    public var inputs: [AudioSessionPortDescription]
    public var outputs: [AudioSessionPortDescription]
}
