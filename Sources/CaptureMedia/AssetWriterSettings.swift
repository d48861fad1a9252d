import CaptureCore
import Foundation

/// One value in an output-settings dictionary (what AVFoundation's `NSDictionary` values are).
public enum SettingValue: Sendable, Hashable, CustomStringConvertible, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByDictionaryLiteral {
    case int(Int)
    case double(Double)
    case string(String)
    case dictionary([String: SettingValue])

    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(dictionaryLiteral elements: (String, SettingValue)...) {
        self = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    /// The number this value holds (integers and doubles alike).
    public var number: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .string(let s): return s
        case .dictionary(let d): return "{" + d.keys.sorted().map { "\($0): \(d[$0]!)" }.joined(separator: ", ") + "}"
        }
    }
}

/// An output-settings dictionary for `AssetWriterInput` (nil settings = pass-through).
public typealias OutputSettings = [String: SettingValue]

/// Keys of video output settings, spelled as AVFoundation's constants.
public enum VideoSettingsKey {
    public static let codec = "AVVideoCodecKey"
    public static let width = "AVVideoWidthKey"
    public static let height = "AVVideoHeightKey"
    public static let scalingMode = "AVVideoScalingModeKey"
    public static let compressionProperties = "AVVideoCompressionPropertiesKey"
    // Inside `compressionProperties`:
    public static let averageBitRate = "AVVideoAverageBitRateKey"
    public static let maxKeyFrameInterval = "AVVideoMaxKeyFrameIntervalKey"
    public static let expectedSourceFrameRate = "AVVideoExpectedSourceFrameRateKey"
    public static let profileLevel = "AVVideoProfileLevelKey"

    static let topLevel: Set<String> = [codec, width, height, scalingMode, compressionProperties]
    static let compression: Set<String> = [averageBitRate, maxKeyFrameInterval, expectedSourceFrameRate, profileLevel]
}

/// Values for `VideoSettingsKey.codec`.
public enum VideoCodecType {
    public static let h264 = "avc1"
    public static let hevc = "hvc1"
    public static let jpeg = "jpeg"
}

/// Values for `VideoSettingsKey.scalingMode`.
public enum VideoScalingMode: String, Sendable, Hashable, CaseIterable {
    /// Scale to fit inside the output size, keeping the aspect ratio; black bars fill the rest.
    case fit = "AVVideoScalingModeResizeAspect"
    /// Scale to cover the output size, keeping the aspect ratio; the overflow is cropped (centred).
    case fill = "AVVideoScalingModeResizeAspectFill"
    /// Stretch to the output size.
    case resize = "AVVideoScalingModeResize"
}

/// Values for `VideoSettingsKey.profileLevel`.
public enum VideoProfileLevel {
    public static let h264BaselineAutoLevel = "H264_Baseline_AutoLevel"
    public static let h264MainAutoLevel = "H264_Main_AutoLevel"
    public static let h264HighAutoLevel = "H264_High_AutoLevel"
    public static let h264Baseline31 = "H264_Baseline_3_1"
    public static let h264Main31 = "H264_Main_3_1"
    public static let h264Main41 = "H264_Main_4_1"
    public static let h264High40 = "H264_High_4_0"
    public static let h264High41 = "H264_High_4_1"
    public static let hevcMainAutoLevel = "HEVC_Main_AutoLevel"

    /// (codec family, encoder profile, level or nil) for a profile-level string such as `H264_Main_3_1`.
    static func parse(_ text: String) -> (family: String, profile: String, level: String?)? {
        let parts = text.split(separator: "_").map(String.init)
        guard parts.count >= 3, ["H264", "HEVC"].contains(parts[0]) else { return nil }
        let profiles = parts[0] == "H264" ? ["Baseline": "baseline", "Main": "main", "High": "high"] : ["Main": "main"]
        guard let profile = profiles[parts[1]] else { return nil }
        if parts.count == 3, parts[2] == "AutoLevel" { return (parts[0], profile, nil) }
        guard parts.count == 4, let major = Int(parts[2]), let minor = Int(parts[3]), (1...6).contains(major), (0...2).contains(minor) else {
            return nil
        }
        return (parts[0], profile, "\(major).\(minor)")
    }
}

/// Keys of audio output settings, spelled as AVFoundation's constants.
public enum AudioSettingsKey {
    public static let formatID = "AVFormatIDKey"
    public static let sampleRate = "AVSampleRateKey"
    public static let numberOfChannels = "AVNumberOfChannelsKey"
    public static let encoderBitRate = "AVEncoderBitRateKey"
    public static let encoderBitRatePerChannel = "AVEncoderBitRatePerChannelKey"
    public static let linearPCMBitDepth = "AVLinearPCMBitDepthKey"
    public static let linearPCMIsFloat = "AVLinearPCMIsFloatKey"

    static let all: Set<String> = [formatID, sampleRate, numberOfChannels, encoderBitRate, encoderBitRatePerChannel,
                                   linearPCMBitDepth, linearPCMIsFloat]
}

/// Values for `AudioSettingsKey.formatID` (kAudioFormatMPEG4AAC, kAudioFormatLinearPCM).
public enum AudioFormatID {
    public static let mpeg4AAC = "aac "
    public static let linearPCM = "lpcm"
}

/// Validated video settings: what the encoder will be given.
public struct VideoOutputSettings: Sendable, Hashable {
    public var codec: VideoCodec
    public var dimensions: Dimensions
    public var scalingMode: VideoScalingMode
    public var averageBitRate: Int?
    public var maxKeyFrameInterval: Int?
    public var expectedFrameRate: Double?
    public var profile: String?
    public var level: String?

    /// Parses and checks a settings dictionary; the error names the offending key or value.
    public init(_ settings: OutputSettings) throws(CaptureError) {
        for key in settings.keys where !VideoSettingsKey.topLevel.contains(key) {
            throw .invalidArgument("unknown video output setting '\(key)'")
        }
        guard case .string(let codecName)? = settings[VideoSettingsKey.codec] else {
            throw .invalidArgument("video output settings need \(VideoSettingsKey.codec)")
        }
        switch codecName {
        case VideoCodecType.h264, "h264": codec = .h264
        case VideoCodecType.hevc, "hevc": codec = .hevc
        case VideoCodecType.jpeg, "mjpeg": codec = .mjpeg
        default: throw .invalidArgument("\(VideoSettingsKey.codec) '\(codecName)' is not a codec CaptureKit writes (avc1, hvc1, jpeg)")
        }
        guard codec.isAvailable else { throw .encoderUnavailable(codec.encoderName) }
        guard let w = settings[VideoSettingsKey.width]?.number, let h = settings[VideoSettingsKey.height]?.number else {
            throw .invalidArgument("video output settings need \(VideoSettingsKey.width) and \(VideoSettingsKey.height)")
        }
        guard w >= 16, h >= 16, w <= 8192, h <= 8192, w == w.rounded(), h == h.rounded(), Int(w) % 2 == 0, Int(h) % 2 == 0 else {
            throw .invalidArgument("\(VideoSettingsKey.width)×\(VideoSettingsKey.height) \(w)×\(h) must be even whole numbers in 16…8192")
        }
        dimensions = Dimensions(width: Int(w), height: Int(h))
        switch settings[VideoSettingsKey.scalingMode] {
        case nil: scalingMode = .fill
        case .string(let mode)?:
            switch mode {
            case VideoScalingMode.fit.rawValue, "AVVideoScalingModeFit", "fit": scalingMode = .fit
            case VideoScalingMode.fill.rawValue, "fill": scalingMode = .fill
            case VideoScalingMode.resize.rawValue, "resize": scalingMode = .resize
            default: throw .invalidArgument("\(VideoSettingsKey.scalingMode) '\(mode)' is unknown")
            }
        case let other?: throw .invalidArgument("\(VideoSettingsKey.scalingMode) must be a string, not \(other)")
        }
        switch settings[VideoSettingsKey.compressionProperties] {
        case nil: break
        case .dictionary(let properties)?:
            for key in properties.keys where !VideoSettingsKey.compression.contains(key) {
                throw .invalidArgument("unknown video compression property '\(key)'")
            }
            if let value = properties[VideoSettingsKey.averageBitRate] {
                guard let bps = value.number, bps >= 1000, bps <= 500_000_000 else {
                    throw .invalidArgument("\(VideoSettingsKey.averageBitRate) \(value) must be 1000…500000000 bits/s")
                }
                averageBitRate = Int(bps)
            }
            if let value = properties[VideoSettingsKey.maxKeyFrameInterval] {
                guard let frames = value.number, frames >= 1, frames == frames.rounded() else {
                    throw .invalidArgument("\(VideoSettingsKey.maxKeyFrameInterval) \(value) must be a whole number ≥ 1")
                }
                maxKeyFrameInterval = Int(frames)
            }
            if let value = properties[VideoSettingsKey.expectedSourceFrameRate] {
                guard let fps = value.number, fps > 0, fps <= 1000 else {
                    throw .invalidArgument("\(VideoSettingsKey.expectedSourceFrameRate) \(value) must be in (0, 1000]")
                }
                expectedFrameRate = fps
            }
            if let value = properties[VideoSettingsKey.profileLevel] {
                guard case .string(let text) = value, let parsed = VideoProfileLevel.parse(text) else {
                    throw .invalidArgument("\(VideoSettingsKey.profileLevel) '\(value)' is not a known profile level")
                }
                guard (parsed.family == "H264" && codec == .h264) || (parsed.family == "HEVC" && codec == .hevc) else {
                    throw .invalidArgument("\(VideoSettingsKey.profileLevel) \(text) does not fit codec \(codecName)")
                }
                profile = parsed.profile
                level = parsed.level
            }
        case let other?:
            throw .invalidArgument("\(VideoSettingsKey.compressionProperties) must be a dictionary, not \(other)")
        }
        if codec == .mjpeg, profile != nil { throw .invalidArgument("JPEG video has no profile level") }
    }

    /// The settings as a dictionary again (what a recommendation returns).
    public var dictionary: OutputSettings {
        var compression: [String: SettingValue] = [:]
        if let averageBitRate { compression[VideoSettingsKey.averageBitRate] = .int(averageBitRate) }
        if let maxKeyFrameInterval { compression[VideoSettingsKey.maxKeyFrameInterval] = .int(maxKeyFrameInterval) }
        if let expectedFrameRate { compression[VideoSettingsKey.expectedSourceFrameRate] = .double(expectedFrameRate) }
        var result: OutputSettings = [
            VideoSettingsKey.codec: .string(codec == .h264 ? VideoCodecType.h264 : codec == .hevc ? VideoCodecType.hevc : VideoCodecType.jpeg),
            VideoSettingsKey.width: .int(dimensions.width),
            VideoSettingsKey.height: .int(dimensions.height),
            VideoSettingsKey.scalingMode: .string(scalingMode.rawValue),
        ]
        if !compression.isEmpty { result[VideoSettingsKey.compressionProperties] = .dictionary(compression) }
        return result
    }
}

/// Validated audio settings.
public struct AudioOutputSettings: Sendable, Hashable {
    public var codec: AudioCodec
    public var sampleRate: Int?
    public var channelCount: Int?
    /// Total bits per second (AAC only).
    public var bitRate: Int?

    /// AAC sample rates FFmpeg's encoder takes.
    static let aacRates: Set<Int> = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000]

    public init(_ settings: OutputSettings) throws(CaptureError) {
        for key in settings.keys where !AudioSettingsKey.all.contains(key) {
            throw .invalidArgument("unknown audio output setting '\(key)'")
        }
        guard case .string(let format)? = settings[AudioSettingsKey.formatID] else {
            throw .invalidArgument("audio output settings need \(AudioSettingsKey.formatID)")
        }
        if let value = settings[AudioSettingsKey.sampleRate] {
            guard let rate = value.number, rate >= 8000, rate <= 192_000, rate == rate.rounded() else {
                throw .invalidArgument("\(AudioSettingsKey.sampleRate) \(value) must be a whole number of Hz in 8000…192000")
            }
            sampleRate = Int(rate)
        }
        if let value = settings[AudioSettingsKey.numberOfChannels] {
            guard let channels = value.number, channels >= 1, channels <= 8, channels == channels.rounded() else {
                throw .invalidArgument("\(AudioSettingsKey.numberOfChannels) \(value) must be 1…8")
            }
            channelCount = Int(channels)
        }
        let hasBitRate = settings[AudioSettingsKey.encoderBitRate] != nil || settings[AudioSettingsKey.encoderBitRatePerChannel] != nil
        switch format {
        case AudioFormatID.mpeg4AAC, "aac":
            codec = .aac
            if let rate = sampleRate, !Self.aacRates.contains(rate) {
                throw .invalidArgument("AAC cannot be written at \(AudioSettingsKey.sampleRate) \(rate)")
            }
            for key in [AudioSettingsKey.linearPCMBitDepth, AudioSettingsKey.linearPCMIsFloat] where settings[key] != nil {
                throw .invalidArgument("\(key) applies to linear PCM, not AAC")
            }
            if settings[AudioSettingsKey.encoderBitRate] != nil, settings[AudioSettingsKey.encoderBitRatePerChannel] != nil {
                throw .invalidArgument("give \(AudioSettingsKey.encoderBitRate) or \(AudioSettingsKey.encoderBitRatePerChannel), not both")
            }
            if let value = settings[AudioSettingsKey.encoderBitRate] {
                guard let bps = value.number, bps >= 8000, bps <= 1_536_000 else {
                    throw .invalidArgument("\(AudioSettingsKey.encoderBitRate) \(value) must be 8000…1536000")
                }
                bitRate = Int(bps)
            }
            if let value = settings[AudioSettingsKey.encoderBitRatePerChannel] {
                guard let bps = value.number, bps >= 8000, bps <= 320_000 else {
                    throw .invalidArgument("\(AudioSettingsKey.encoderBitRatePerChannel) \(value) must be 8000…320000")
                }
                // Resolved against the channel count when the track is opened (see `resolved`).
                bitRate = -Int(bps)
            }
        case AudioFormatID.linearPCM, "lpcm":
            if hasBitRate { throw .invalidArgument("linear PCM has no encoder bit rate") }
            let depth = settings[AudioSettingsKey.linearPCMBitDepth]?.number ?? 16
            let isFloat = (settings[AudioSettingsKey.linearPCMIsFloat]?.number ?? 0) != 0
            switch (depth, isFloat) {
            case (16, false): codec = .pcmS16
            case (32, true): codec = .pcmFloat32
            default: throw .invalidArgument("linear PCM of \(Int(depth)) bits \(isFloat ? "float" : "integer") is not supported (16-bit integer or 32-bit float)")
            }
        default:
            throw .invalidArgument("\(AudioSettingsKey.formatID) '\(format)' is not a format CaptureKit writes (aac, lpcm)")
        }
    }

    /// Encoder settings for audio arriving in `input`.
    func encoderSettings(for input: AudioStreamFormat) -> AudioEncoderSettings {
        let channels = channelCount ?? input.channelCount
        let bitrate: Int? = bitRate.map { $0 < 0 ? -$0 * channels : $0 }
        return AudioEncoderSettings(input: input, sampleRate: sampleRate ?? input.sampleRate, channelCount: channels,
                                    bitrate: bitrate, codec: codec)
    }
}

/// A 2-D affine transform (CGAffineTransform) for a track's preferred transform; only right-angle
/// rotations, optionally mirrored, can be written to a file's display matrix.
public struct AffineTransform: Sendable, Hashable {
    public var a, b, c, d, tx, ty: Double

    public init(a: Double, b: Double, c: Double, d: Double, tx: Double, ty: Double) {
        (self.a, self.b, self.c, self.d, self.tx, self.ty) = (a, b, c, d, tx, ty)
    }

    public static let identity = AffineTransform(a: 1, b: 0, c: 0, d: 1, tx: 0, ty: 0)

    /// CGAffineTransformMakeRotation: with y pointing down (as in images) a positive angle turns clockwise.
    public init(rotationAngle radians: Double) {
        let (s, co) = (sin(radians), cos(radians))
        self.init(a: co, b: s, c: -s, d: co, tx: 0, ty: 0)
    }

    /// A clockwise rotation in whole degrees.
    public init(rotationDegrees degrees: Int) {
        self.init(rotationAngle: Double(degrees) * .pi / 180)
    }

    /// Clockwise degrees (0, 90, 180, 270) and mirroring, or nil when this is not a right-angle
    /// rotation (with or without a left-right flip).
    public var rightAngleRotation: (degrees: Int, mirrored: Bool)? {
        let det = a * d - b * c
        guard abs(abs(det) - 1) < 1e-6 else { return nil }
        let mirrored = det < 0
        // Mirroring is applied after the rotation: undo it (negate the first column).
        let (ra, rb) = mirrored ? (-a, -b) : (a, b)
        let degrees = atan2(rb, ra) * 180 / .pi
        let rounded = Int((degrees / 90).rounded()) * 90
        guard abs(degrees - Double(rounded)) < 1e-6 else { return nil }
        return ((rounded % 360 + 360) % 360, mirrored)
    }
}
