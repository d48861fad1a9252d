import CaptureCore

/// A simulated device described by data: what it is called and which formats it offers.
public struct SimulatedDeviceProfile: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case camera(formats: [DeviceFormat])
        case microphone(format: AudioStreamFormat, tone: SyncToneSpec)
    }

    public var uniqueID: String
    public var name: String
    public var position: DeviceDescription.Position
    public var kind: Kind
    public var defaultFormatIndex: Int

    public init(uniqueID: String, name: String, position: DeviceDescription.Position, kind: Kind, defaultFormatIndex: Int = 0) {
        self.uniqueID = uniqueID
        self.name = name
        self.position = position
        self.kind = kind
        self.defaultFormatIndex = defaultFormatIndex
    }

    public var mediaType: MediaType {
        if case .camera = kind { return .video }
        return .audio
    }

    public var deviceDescription: DeviceDescription {
        let formats: [DeviceFormat]
        switch kind {
        case .camera(let f): formats = f
        case .microphone(let format, _): formats = [DeviceFormat(formatDescription: .audio(format))]
        }
        return DeviceDescription(uniqueID: uniqueID, localizedName: name, modelID: "CaptureKit Simulator",
                                 mediaType: mediaType, position: position, formats: formats,
                                 defaultFormatIndex: defaultFormatIndex)
    }

    /// The simulated back camera: NV12 and I420 at 640x480 (1–30 fps), 1280x720 (1–60 fps) and 1920x1080 (1–30 fps).
    public static let backCamera: SimulatedDeviceProfile = {
        var formats: [DeviceFormat] = []
        for (size, maxRate) in [(Dimensions(width: 640, height: 480), 30),
                                (Dimensions(width: 1280, height: 720), 60),
                                (Dimensions(width: 1920, height: 1080), 30)] {
            for pixelFormat in [PixelFormat.nv12, .yuv420] {
                formats.append(DeviceFormat(formatDescription: .video(pixelFormat: pixelFormat, dimensions: size),
                                            frameRateRanges: [FrameRateRange(minRate: 1, maxRate: maxRate)]))
            }
        }
        return SimulatedDeviceProfile(uniqueID: "sim:back", name: "Simulated Back Camera", position: .back,
                                      kind: .camera(formats: formats))
    }()

    /// The simulated microphone: 48 kHz mono float, a 1 kHz tone at −12 dBFS with 3 kHz sync bursts.
    public static let microphone = SimulatedDeviceProfile(
        uniqueID: "sim:mic", name: "Simulated Microphone", position: .unspecified,
        kind: .microphone(format: AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .float32),
                          tone: SyncToneSpec()))

    public static let builtIn: [SimulatedDeviceProfile] = [.backCamera, .microphone]
}
