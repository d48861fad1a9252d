import CaptureCore
import Foundation

/// What a simulated camera can do beyond its formats: which modes and controls it has.
public struct SimulatedCameraCapabilities: Sendable, Hashable {
    /// Empty = a fixed-focus lens (always sharp, only `.locked` reported).
    public var focusModes: [FocusMode] = []
    public var defaultFocusMode: FocusMode = .locked
    public var hasLensPositionControl = false
    public var hasSmoothAutoFocus = false
    public var hasFocusPointOfInterest = false
    /// Metres; lens position 0 focuses here, 1 at infinity (linear in dioptres).
    public var closestFocusDistance = 0.1
    public var exposureModes: [ExposureMode] = [.continuousAutoExposure]
    public var defaultExposureMode: ExposureMode = .continuousAutoExposure
    public var hasExposurePointOfInterest = false
    public var exposureBias: ClosedRange<Double>?
    /// Exposure durations are multiples of this (UVC: 100 µs), or continuous when nil.
    public var exposureUnit: Double?
    public var whiteBalanceModes: [WhiteBalanceMode] = [.continuousAutoWhiteBalance]
    public var defaultWhiteBalanceMode: WhiteBalanceMode = .continuousAutoWhiteBalance
    public var hasWhiteBalanceGains = false
    public var maxWhiteBalanceGain = 4.0
    /// A kelvin control (UVC webcams) instead of gains.
    public var whiteBalanceTemperature: ClosedRange<Double>?
    /// Empty = no torch.
    public var torchModes: [TorchMode] = []
    public var hasZoom = false

    public init() {}
}

/// The simulated world a camera looks at; each is also a `scene.*` control.
public struct SimulatedScene: Sendable, Hashable {
    /// Colour temperature of the light, kelvin.
    public var illuminant = 6500.0
    /// Distance to the subject, metres.
    public var subjectDistance = 1.0
    /// Scene brightness (1 = a lit room: 1/100 s at ISO 100 renders reflectances as they are).
    public var luminance = 1.0
    /// The simulated thermal state: the highest torch level available.
    public var maxTorchLevel = 1.0
    /// A QR code and a face in view (profile keys as the controls without `scene.`: `qrCode`,
    /// `qrCode.x`…, `face`, `face.x`…); none by default.
    public var items = SceneItemSettings()

    public init() {}
}

/// A simulated device described by data (a JSON profile under `Simulator/Profiles`, or a user's).
public struct SimulatedDeviceProfile: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case camera(SimulatedCameraCapabilities)
        case microphone(format: AudioStreamFormat, tone: SyncToneSpec)
    }

    public var uniqueID: String
    public var name: String
    public var modelID: String
    public var position: DeviceDescription.Position
    public var deviceType: DeviceType
    public var formats: [DeviceFormat]
    public var defaultFormatIndex: Int
    public var kind: Kind
    public var scene: SimulatedScene
    /// Where the profile came from (a file path, or "built-in").
    public var source: String
    /// A microphone's audio-session port: its type and data sources (each with its own tone
    /// frequency, so recordings tell them apart).
    public var port = SimulatedMicrophonePort()
    /// False for a device that starts unplugged (the USB microphone): `SimulatorScenario.connect` plugs it in.
    public var pluggedIn = true

    public var mediaType: MediaType {
        if case .camera = kind { return .video }
        return .audio
    }

    public var deviceDescription: DeviceDescription {
        DeviceDescription(uniqueID: uniqueID, localizedName: name, modelID: modelID, mediaType: mediaType,
                          position: position, formats: formats, defaultFormatIndex: defaultFormatIndex, deviceType: deviceType)
    }

    /// The environment variable naming extra profile files or folders (separated by `:`).
    public static let environmentVariable = "CAPTUREKIT_PROFILES"

    /// The profiles shipped with the simulator (`sim:back`, `sim:front`, `sim:webcam`, `sim:mic`, and
    /// `sim:usbmic`, which starts unplugged).
    public static func builtIn() throws(CaptureError) -> [SimulatedDeviceProfile] {
        try builtInProfiles.get()
    }

    /// The bundle's profiles, read and parsed once per process: they are part of the installed
    /// library, and parsing them was most of a registry's (so of each session's) set-up time.
    private static let builtInProfiles: Result<[SimulatedDeviceProfile], CaptureError> = {
        guard let folder = Bundle.module.resourceURL?.appendingPathComponent("Profiles").path else {
            return .failure(.invalidProfile(file: "Simulator/Profiles", field: "(bundle)", problem: "the simulator's resource bundle is missing"))
        }
        do throws(CaptureError) { return .success(try load(paths: [folder])) } catch { return .failure(error) }
    }()

    /// Built-in profiles plus those named by `CAPTUREKIT_PROFILES` (a user profile with the ID of a
    /// built-in one replaces it).
    public static func builtInAndEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(CaptureError) -> [SimulatedDeviceProfile] {
        var profiles = try builtIn()
        let extra = (environment[environmentVariable] ?? "").split(separator: ":").map(String.init).filter { !$0.isEmpty }
        for profile in try load(paths: extra) {
            if let i = profiles.firstIndex(where: { $0.uniqueID == profile.uniqueID }) { profiles[i] = profile } else { profiles.append(profile) }
        }
        return profiles
    }

    /// Loads profile files; a folder contributes its `*.json` files in name order.
    public static func load(paths: [String]) throws(CaptureError) -> [SimulatedDeviceProfile] {
        var result: [SimulatedDeviceProfile] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw .invalidProfile(file: path, field: "(file)", problem: "no such file or folder")
            }
            if isDirectory.boolValue {
                let names = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
                for name in names { result.append(try load(file: path + "/" + name)) }
            } else {
                result.append(try load(file: path))
            }
        }
        var seen = Set<String>()
        for profile in result where !seen.insert(profile.uniqueID).inserted {
            throw .invalidProfile(file: profile.source, field: "uniqueID", problem: "'\(profile.uniqueID)' is defined twice")
        }
        return result
    }

    public static func load(file: String) throws(CaptureError) -> SimulatedDeviceProfile {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw .invalidProfile(file: file, field: "(file)", problem: "cannot read the file")
        }
        return try parse(data, file: file)
    }

    public static func parse(_ data: Data, file: String) throws(CaptureError) -> SimulatedDeviceProfile {
        let json: Any
        do {
            json = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw .invalidProfile(file: file, field: "(document)", problem: "not valid JSON: \(error.localizedDescription)")
        }
        return try ProfileParser(file: file).profile(json)
    }
}

/// Reads a profile document, naming the exact field of any problem.
struct ProfileParser {
    let file: String

    func fail(_ field: String, _ problem: String) -> CaptureError { .invalidProfile(file: file, field: field, problem: problem) }

    func object(_ value: Any?, _ field: String, allowed: Set<String>) throws(CaptureError) -> [String: Any] {
        guard let object = value as? [String: Any] else { throw fail(field, "must be an object") }
        for key in object.keys.sorted() where !allowed.contains(key) {
            throw fail(field.isEmpty ? key : "\(field).\(key)", "unknown field (known: \(allowed.sorted().joined(separator: ", ")))")
        }
        return object
    }

    func string(_ o: [String: Any], _ key: String, _ path: String, default d: String? = nil) throws(CaptureError) -> String {
        guard let v = o[key] else {
            if let d { return d }
            throw fail(path + key, "is required")
        }
        guard let s = v as? String, !s.isEmpty else { throw fail(path + key, "must be a non-empty string") }
        return s
    }

    func number(_ o: [String: Any], _ key: String, _ path: String, default d: Double? = nil) throws(CaptureError) -> Double {
        guard let v = o[key], !(v is NSNull) else {
            if let d { return d }
            throw fail(path + key, "is required")
        }
        guard let n = Self.numeric(v), n.isFinite else { throw fail(path + key, "must be a number") }
        return n
    }

    /// A JSON number (not a boolean) as a Double, whichever way Foundation represented it.
    static func numeric(_ v: Any) -> Double? {
        // Booleans, integers and decimals as JSONNumber tells them apart (Linux gives all NSNumbers).
        JSONNumber.double(v)
    }

    static func isBoolean(_ n: NSNumber) -> Bool { JSONNumber.isBoolean(n) }

    func bool(_ o: [String: Any], _ key: String, _ path: String) throws(CaptureError) -> Bool {
        guard let v = o[key] else { return false }
        guard let n = v as? NSNumber, Self.isBoolean(n) else { throw fail(path + key, "must be true or false") }
        return n.boolValue
    }

    func pair(_ o: [String: Any], _ key: String, _ path: String, positive: Bool = true, ordered: Bool = true) throws(CaptureError) -> (Double, Double)? {
        guard let v = o[key], !(v is NSNull) else { return nil }
        guard let a = v as? [Any], a.count == 2, let lo = Self.numeric(a[0]), let hi = Self.numeric(a[1]) else {
            throw fail(path + key, "must be a [min, max] pair of numbers")
        }
        if ordered && lo > hi { throw fail(path + key, "min \(lo) is greater than max \(hi)") }
        if positive && lo <= 0 { throw fail(path + key, "values must be positive, got \(lo)") }
        return (lo, hi)
    }

    func names<T: RawRepresentable>(_ o: [String: Any], _ key: String, _ path: String, _: T.Type) throws(CaptureError) -> [T] where T.RawValue == String {
        guard let v = o[key] else { return [] }
        guard let list = v as? [String] else { throw fail(path + key, "must be a list of names") }
        var result: [T] = []
        for (i, name) in list.enumerated() {
            guard let value = T(rawValue: name) else { throw fail("\(path)\(key)[\(i)]", "unknown value '\(name)'") }
            result.append(value)
        }
        return result
    }

    func profile(_ json: Any) throws(CaptureError) -> SimulatedDeviceProfile {
        let top = try object(json, "", allowed: ["uniqueID", "name", "modelID", "mediaType", "position", "deviceType",
                                                 "defaultFormat", "formats", "camera", "scene", "audio", "tone", "port", "pluggedIn"])
        let uniqueID = try string(top, "uniqueID", "")
        guard uniqueID.hasPrefix("sim:"), uniqueID.count > 4 else { throw fail("uniqueID", "must start with 'sim:' (got '\(uniqueID)')") }
        let name = try string(top, "name", "")
        let modelID = try string(top, "modelID", "", default: "CaptureKit Simulator")
        let mediaTypeName = try string(top, "mediaType", "")
        guard let mediaType = MediaType(rawValue: mediaTypeName) else { throw fail("mediaType", "must be video or audio, not '\(mediaTypeName)'") }
        let positionName = try string(top, "position", "", default: "unspecified")
        guard let position = DeviceDescription.Position(rawValue: positionName) else {
            throw fail("position", "must be front, back, external or unspecified, not '\(positionName)'")
        }
        var deviceType: DeviceType?
        if top["deviceType"] != nil {
            let typeName = try string(top, "deviceType", "")
            guard let t = DeviceType(rawValue: typeName) else {
                throw fail("deviceType", "unknown device type '\(typeName)' (known: \(DeviceType.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            deviceType = t
        }
        let description = DeviceDescription(uniqueID: uniqueID, localizedName: name, modelID: modelID, mediaType: mediaType,
                                            position: position, formats: [], deviceType: deviceType)
        let scene = try self.scene(top["scene"])
        switch mediaType {
        case .audio:
            let audio = try object(top["audio"], "audio", allowed: ["sampleRate", "channels", "sampleFormat"])
            let rate = try number(audio, "sampleRate", "audio.")
            guard rate >= 8000, rate <= 192_000, rate == rate.rounded() else { throw fail("audio.sampleRate", "must be a whole number of Hz in 8000…192000") }
            let channels = try number(audio, "channels", "audio.")
            guard (1...8).contains(channels), channels == channels.rounded() else { throw fail("audio.channels", "must be 1…8") }
            let formatName = try string(audio, "sampleFormat", "audio.")
            guard let sampleFormat = AudioStreamFormat.SampleFormat(rawValue: formatName) else {
                throw fail("audio.sampleFormat", "must be f32 or s16, not '\(formatName)'")
            }
            var tone = SyncToneSpec()
            if top["tone"] != nil {
                let t = try object(top["tone"], "tone", allowed: ["frequency", "levelDBFS", "burstFrequency", "burstDuration"])
                tone.toneFrequency = try number(t, "frequency", "tone.", default: tone.toneFrequency)
                tone.toneLevelDBFS = try number(t, "levelDBFS", "tone.", default: tone.toneLevelDBFS)
                tone.burstFrequency = try number(t, "burstFrequency", "tone.", default: tone.burstFrequency)
                tone.burstDuration = try number(t, "burstDuration", "tone.", default: tone.burstDuration)
                guard tone.toneFrequency > 0, tone.burstFrequency > 0, tone.toneFrequency < rate / 2, tone.burstFrequency < rate / 2 else {
                    throw fail("tone.frequency", "frequencies must be positive and below half the sample rate")
                }
            }
            let format = AudioStreamFormat(sampleRate: Int(rate), channelCount: Int(channels), sampleFormat: sampleFormat)
            var profile = SimulatedDeviceProfile(uniqueID: uniqueID, name: name, modelID: modelID, position: position,
                                          deviceType: description.deviceType, formats: [DeviceFormat(formatDescription: .audio(format))],
                                          defaultFormatIndex: 0, kind: .microphone(format: format, tone: tone), scene: scene, source: file)
            profile.port = try port(top["port"], rate: rate)
            if top["pluggedIn"] != nil { profile.pluggedIn = try bool(top, "pluggedIn", "") }
            return profile
        case .video:
            guard let list = top["formats"] as? [Any], !list.isEmpty else { throw fail("formats", "must be a non-empty list of formats") }
            var formats: [DeviceFormat] = []
            for (i, entry) in list.enumerated() { formats.append(try format(entry, "formats[\(i)]")) }
            let defaultIndex = try number(top, "defaultFormat", "", default: 0)
            guard defaultIndex >= 0, Int(defaultIndex) < formats.count, defaultIndex == defaultIndex.rounded() else {
                throw fail("defaultFormat", "must be an index into formats (0…\(formats.count - 1))")
            }
            let capabilities = try camera(top["camera"])
            return SimulatedDeviceProfile(uniqueID: uniqueID, name: name, modelID: modelID, position: position,
                                          deviceType: description.deviceType, formats: formats, defaultFormatIndex: Int(defaultIndex),
                                          kind: .camera(capabilities), scene: scene, source: file)
        }
    }

    func port(_ value: Any?, rate: Double) throws(CaptureError) -> SimulatedMicrophonePort {
        var port = SimulatedMicrophonePort()
        guard value != nil else { return port }
        let o = try object(value, "port", allowed: ["type", "dataSources", "defaultDataSource"])
        let typeName = try string(o, "type", "port.", default: port.portType.rawValue)
        guard let type = AudioSessionPortType(rawValue: typeName) else {
            throw fail("port.type", "unknown port type '\(typeName)' (known: \(AudioSessionPortType.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        port.portType = type
        if let list = o["dataSources"] {
            guard let list = list as? [Any] else { throw fail("port.dataSources", "must be a list") }
            for (i, item) in list.enumerated() {
                let d = try object(item, "port.dataSources[\(i)]", allowed: ["id", "name", "orientation", "frequency"])
                let id = try number(d, "id", "port.dataSources[\(i)].")
                let name = try string(d, "name", "port.dataSources[\(i)].")
                var orientation: AudioSessionOrientation?
                if d["orientation"] != nil {
                    let text = try string(d, "orientation", "port.dataSources[\(i)].")
                    guard let o = AudioSessionOrientation(rawValue: text) else {
                        throw fail("port.dataSources[\(i)].orientation", "unknown orientation '\(text)'")
                    }
                    orientation = o
                }
                let frequency = try number(d, "frequency", "port.dataSources[\(i)].")
                guard frequency > 0, frequency < rate / 2, frequency == frequency.rounded() else {
                    throw fail("port.dataSources[\(i)].frequency", "must be a whole number of Hz below half the sample rate")
                }
                guard id == id.rounded(), abs(id) < 1e9 else { throw fail("port.dataSources[\(i)].id", "must be a whole number") }
                port.dataSources.append(SimulatedDataSource(
                    description: AudioSessionDataSourceDescription(dataSourceID: Int(id), dataSourceName: name, orientation: orientation),
                    frequency: frequency))
            }
        }
        if o["defaultDataSource"] != nil {
            let id = Int(try number(o, "defaultDataSource", "port."))
            guard port.dataSources.contains(where: { $0.description.dataSourceID == id }) else {
                throw fail("port.defaultDataSource", "names no data source of the port")
            }
            port.defaultDataSourceID = id
        } else {
            port.defaultDataSourceID = port.dataSources.first?.description.dataSourceID
        }
        return port
    }

    func format(_ value: Any, _ field: String) throws(CaptureError) -> DeviceFormat {
        let f = try object(value, field, allowed: ["pixelFormat", "width", "height", "frameRates", "fieldOfView", "exposureDuration",
                                                   "iso", "maxZoom", "stabilization", "highResolutionStill", "videoHDR", "autoFocusSystem"])
        let p = field + "."
        let pfName = try string(f, "pixelFormat", p)
        guard let pixelFormat = PixelFormat(name: pfName) else {
            throw fail(p + "pixelFormat", "unknown pixel format '\(pfName)' (known: 420v, 420f, NV12, I420, YUYV, MJPG)")
        }
        let width = try number(f, "width", p), height = try number(f, "height", p)
        guard width >= 64, height >= 64, width == width.rounded(), height == height.rounded(),
              Int(width) % 2 == 0, Int(height) % 2 == 0 else {
            throw fail(p + "width", "frames must be even-sized and at least 64x64, got \(width)x\(height)")
        }
        guard let rateList = f["frameRates"] as? [Any], !rateList.isEmpty else {
            throw fail(p + "frameRates", "must be a non-empty list of [minFPS, maxFPS] pairs")
        }
        var ranges: [FrameRateRange] = []
        for (i, entry) in rateList.enumerated() {
            guard let pair = entry as? [Any], pair.count == 2, let a = Self.numeric(pair[0]), let b = Self.numeric(pair[1]),
                  a == a.rounded(), b == b.rounded(), abs(a) < 1e6, abs(b) < 1e6 else {
                throw fail("\(p)frameRates[\(i)]", "must be a [minFPS, maxFPS] pair of whole numbers")
            }
            let lo = Int(a), hi = Int(b)
            guard lo >= 1, lo <= hi, hi <= 1000 else { throw fail("\(p)frameRates[\(i)]", "needs 1 ≤ min ≤ max ≤ 1000, got [\(lo), \(hi)]") }
            ranges.append(FrameRateRange(minRate: lo, maxRate: hi))
        }
        var props = VideoFormatProperties()
        props.fieldOfView = try number(f, "fieldOfView", p, default: 60)
        if let (lo, hi) = try pair(f, "exposureDuration", p) {
            props.minExposureDuration = MediaTime(seconds: lo, preferredTimescale: 1_000_000_000)
            props.maxExposureDuration = MediaTime(seconds: hi, preferredTimescale: 1_000_000_000)
        }
        if let (lo, hi) = try pair(f, "iso", p) { props.minISO = lo; props.maxISO = hi }
        props.maxZoomFactor = try number(f, "maxZoom", p, default: 1)
        guard props.maxZoomFactor >= 1 else { throw fail(p + "maxZoom", "must be at least 1") }
        props.stabilizationModes = try names(f, "stabilization", p, VideoStabilizationMode.self)
        if let (w, h) = try pair(f, "highResolutionStill", p, ordered: false) { props.highResolutionStillDimensions = Dimensions(width: Int(w), height: Int(h)) }
        props.isVideoHDRSupported = try bool(f, "videoHDR", p)
        props.isFullRange = pfName.lowercased() == "420f"
        if f["autoFocusSystem"] != nil {
            let name = try string(f, "autoFocusSystem", p)
            guard let system = AutoFocusSystem(rawValue: name) else { throw fail(p + "autoFocusSystem", "unknown value '\(name)'") }
            props.autoFocusSystem = system
        }
        return DeviceFormat(formatDescription: .video(pixelFormat: pixelFormat, dimensions: Dimensions(width: Int(width), height: Int(height))),
                            frameRateRanges: ranges, properties: props)
    }

    func camera(_ value: Any?) throws(CaptureError) -> SimulatedCameraCapabilities {
        var c = SimulatedCameraCapabilities()
        guard let value else { return c }
        let o = try object(value, "camera", allowed: [
            "focusModes", "defaultFocusMode", "lensPositionControl", "smoothAutoFocus", "focusPointOfInterest", "closestFocusDistance",
            "exposureModes", "defaultExposureMode", "exposurePointOfInterest", "exposureBias", "exposureUnit",
            "whiteBalanceModes", "defaultWhiteBalanceMode", "whiteBalanceGains", "maxWhiteBalanceGain", "whiteBalanceTemperature",
            "torchModes", "zoom"])
        let p = "camera."
        c.focusModes = try names(o, "focusModes", p, FocusMode.self)
        if !c.focusModes.isEmpty {
            let name = try string(o, "defaultFocusMode", p, default: c.focusModes[0].rawValue)
            guard let mode = FocusMode(rawValue: name), c.focusModes.contains(mode) else { throw fail(p + "defaultFocusMode", "'\(name)' is not one of focusModes") }
            c.defaultFocusMode = mode
        }
        c.hasLensPositionControl = try bool(o, "lensPositionControl", p)
        c.hasSmoothAutoFocus = try bool(o, "smoothAutoFocus", p)
        c.hasFocusPointOfInterest = try bool(o, "focusPointOfInterest", p)
        c.closestFocusDistance = try number(o, "closestFocusDistance", p, default: 0.1)
        guard c.closestFocusDistance > 0 else { throw fail(p + "closestFocusDistance", "must be positive") }
        c.exposureModes = try names(o, "exposureModes", p, ExposureMode.self)
        guard !c.exposureModes.isEmpty else { throw fail(p + "exposureModes", "must list at least one mode") }
        let exposureName = try string(o, "defaultExposureMode", p, default: c.exposureModes[0].rawValue)
        guard let exposureMode = ExposureMode(rawValue: exposureName), c.exposureModes.contains(exposureMode) else {
            throw fail(p + "defaultExposureMode", "'\(exposureName)' is not one of exposureModes")
        }
        c.defaultExposureMode = exposureMode
        c.hasExposurePointOfInterest = try bool(o, "exposurePointOfInterest", p)
        if let (lo, hi) = try pair(o, "exposureBias", p, positive: false) { c.exposureBias = lo...hi }
        if o["exposureUnit"] != nil {
            let unit = try number(o, "exposureUnit", p)
            guard unit > 0 else { throw fail(p + "exposureUnit", "must be positive (seconds)") }
            c.exposureUnit = unit
        }
        c.whiteBalanceModes = try names(o, "whiteBalanceModes", p, WhiteBalanceMode.self)
        guard !c.whiteBalanceModes.isEmpty else { throw fail(p + "whiteBalanceModes", "must list at least one mode") }
        let wbName = try string(o, "defaultWhiteBalanceMode", p, default: c.whiteBalanceModes[0].rawValue)
        guard let wbMode = WhiteBalanceMode(rawValue: wbName), c.whiteBalanceModes.contains(wbMode) else {
            throw fail(p + "defaultWhiteBalanceMode", "'\(wbName)' is not one of whiteBalanceModes")
        }
        c.defaultWhiteBalanceMode = wbMode
        c.hasWhiteBalanceGains = try bool(o, "whiteBalanceGains", p)
        c.maxWhiteBalanceGain = try number(o, "maxWhiteBalanceGain", p, default: 4)
        guard c.maxWhiteBalanceGain >= 1 else { throw fail(p + "maxWhiteBalanceGain", "must be at least 1") }
        if let (lo, hi) = try pair(o, "whiteBalanceTemperature", p) { c.whiteBalanceTemperature = lo...hi }
        c.torchModes = try names(o, "torchModes", p, TorchMode.self)
        if !c.torchModes.isEmpty && !c.torchModes.contains(.off) { throw fail(p + "torchModes", "a torch must support off") }
        c.hasZoom = try bool(o, "zoom", p)
        return c
    }

    func scene(_ value: Any?) throws(CaptureError) -> SimulatedScene {
        var s = SimulatedScene()
        guard let value else { return s }
        let itemKeys = ["qrCode", "face"] + ControlID.sceneItemNumberKeys.map { String($0.dropFirst("scene.".count)) }
        let o = try object(value, "scene", allowed: Set(["illuminant", "subjectDistance", "luminance", "maxTorchLevel"] + itemKeys))
        s.illuminant = try number(o, "illuminant", "scene.", default: s.illuminant)
        guard (1000...15000).contains(s.illuminant) else { throw fail("scene.illuminant", "must be 1000…15000 K") }
        s.subjectDistance = try number(o, "subjectDistance", "scene.", default: s.subjectDistance)
        guard s.subjectDistance > 0 else { throw fail("scene.subjectDistance", "must be positive (metres)") }
        s.luminance = try number(o, "luminance", "scene.", default: s.luminance)
        guard s.luminance > 0 else { throw fail("scene.luminance", "must be positive") }
        s.maxTorchLevel = try number(o, "maxTorchLevel", "scene.", default: s.maxTorchLevel)
        guard (0...1).contains(s.maxTorchLevel) else { throw fail("scene.maxTorchLevel", "must be 0…1") }
        s.items.qrCode = try string(o, "qrCode", "scene.", default: "")
        s.items.face = try bool(o, "face", "scene.")
        for (item, placement) in [("qrCode", s.items.qr), ("face", s.items.facePlacement)] {
            var p = placement
            p.x = try number(o, item + ".x", "scene.", default: p.x)
            p.y = try number(o, item + ".y", "scene.", default: p.y)
            p.size = try number(o, item + ".size", "scene.", default: p.size)
            guard p.size > 0.01, p.size <= 2 else { throw fail("scene.\(item).size", "must be 0.01…2 (a fraction of the frame height)") }
            p.rotation = try number(o, item + ".rotation", "scene.", default: p.rotation)
            p.motion = try number(o, item + ".motion", "scene.", default: p.motion)
            guard (-1...2).contains(p.x), (-1...2).contains(p.y) else { throw fail("scene.\(item).x/y", "must be -1…2 (fractions of the frame)") }
            guard (-360...360).contains(p.rotation) else { throw fail("scene.\(item).rotation", "must be -360…360 degrees") }
            guard (-10...10).contains(p.motion) else { throw fail("scene.\(item).motion", "must be -10…10 frame widths per second") }
            if item == "qrCode" { s.items.qr = p } else { s.items.facePlacement = p }
        }
        return s
    }
}

/// One microphone of a simulated port: what the audio session sees, and the tone it hears.
public struct SimulatedDataSource: Sendable, Hashable {
    public var description: AudioSessionDataSourceDescription
    /// Replaces the profile's tone frequency while this data source is selected (the burst stays).
    public var frequency: Double
}

/// A simulated microphone's audio-session port.
public struct SimulatedMicrophonePort: Sendable, Hashable {
    public var portType = AudioSessionPortType.builtInMic
    public var dataSources: [SimulatedDataSource] = []
    public var defaultDataSourceID: Int?

    public init() {}
}
