import CFFmpeg
import CaptureCore
import Foundation

/// A recorded fixture: what one or more devices delivered, in one self-describing file.
///
/// Layout (format version 2; version 1 files are still read): a NUT container written by libavformat.
/// - Global metadata `capturekit.fixture.version` = `2`.
/// - The first packet of the record stream (below) is the profile, `{"profile": {"devices": [device…]}}`
///   (NUT's demuxer keeps metadata values only up to 1 KiB); a device is its description (unique ID, names, media type, position,
///   device type, default format, every format with frame-rate ranges and camera properties), the
///   active format index, the frame duration, its controls (kind, range, default, flags) and their
///   values when the recording started.
/// - Stream `i` (one per device, in profile order) holds every buffer as delivered: MJPEG bytes
///   untouched (codec `mjpeg`); raw video losslessly — version 2 codes YUYV, NV12, I420 and RGB24
///   frames of even size with FFV1 (level 3, slice CRCs, every frame a keyframe) on a planar layout
///   that is a byte shuffle of the delivered one (`FixtureLosslessLayout`), anything else (and all
///   of version 1) as tightly packed planes (codec `rawvideo` with the matching pix_fmt); audio as
///   interleaved PCM (`pcm_s16le` / `pcm_f32le`).
/// - The last stream is a UTF-8 text stream of JSON records, one per packet:
///   `{"s":i,"n":seq,"t":[value,timescale],"d":[value,timescale],"b":bytes,"c":crc32,"drop":[count,"reason"]}`
///   describes the next buffer of stream `i` (its original PTS and duration exactly, its sequence
///   number, the samples lost just before it; `b` and `c` are the size and CRC-32 of the bytes as
///   delivered, so for FFV1 of the packed frame after decoding);
///   `{"control":"exposure.iso","device":i,"t":[…],"value":{"real":…}}`
///   is a control change at a PTS; `{"end":[count per stream]}` closes a complete file.
/// - Packet timestamps are nanoseconds from the earliest buffer (time base 1/1e9, kept strictly
///   increasing per stream); the records carry the exact original times.
public enum FixtureFormat {
    /// The format version this build writes and reads.
    public static let version = 2
    /// Versions this build reads: 1 (raw video as rawvideo) and 2 (raw video as FFV1).
    public static let readableVersions = 1...2
    static let versionKey = "capturekit.fixture.version"
    static let nanoseconds: Int32 = 1_000_000_000
}

/// One recorded device: its profile as it was when the recording started.
public struct FixtureDevice: Sendable, Hashable {
    public var description: DeviceDescription
    /// Index into `description.formats` of the format the buffers are in.
    public var activeFormatIndex: Int
    /// Video: the configured frame duration (audio: zero).
    public var frameDuration: MediaTime
    public var controls: [ControlDescription]
    /// Control values when the recording started.
    public var controlValues: [ControlID: ControlValue]

    public init(description: DeviceDescription, activeFormatIndex: Int, frameDuration: MediaTime,
                controls: [ControlDescription] = [], controlValues: [ControlID: ControlValue] = [:]) {
        self.description = description
        self.activeFormatIndex = activeFormatIndex
        self.frameDuration = frameDuration
        self.controls = controls
        self.controlValues = controlValues
    }

    public var activeFormat: DeviceFormat { description.formats[activeFormatIndex] }
}

/// One recorded buffer.
public struct FixtureSample: Sendable {
    public var device: Int
    public var sequenceNumber: Int64
    /// The PTS the device gave it (absolute, exact).
    public var presentationTime: MediaTime
    public var duration: MediaTime
    public var discontinuity: Discontinuity?
    /// The bytes as delivered (packed planes for raw video, interleaved PCM for audio).
    public var data: [UInt8]
}

/// A control value that changed during the recording, at the PTS of the frame it was seen with.
public struct FixtureControlChange: Sendable, Hashable {
    public var device: Int
    public var presentationTime: MediaTime
    public var control: ControlID
    public var value: ControlValue

    public init(device: Int, presentationTime: MediaTime, control: ControlID, value: ControlValue) {
        self.device = device
        self.presentationTime = presentationTime
        self.control = control
        self.value = value
    }
}

/// Everything a fixture holds, validated.
public struct FixtureContents: Sendable {
    public var version: Int
    public var devices: [FixtureDevice]
    /// Per device, in delivery order.
    public var samples: [[FixtureSample]]
    public var controlChanges: [FixtureControlChange]

    /// The earliest PTS of any buffer: replay times are relative to it.
    public var origin: MediaTime {
        samples.compactMap { $0.first?.presentationTime }.min() ?? .zero
    }

    /// From the origin to the end of the last buffer of any stream.
    public var span: MediaTime {
        let ends = samples.compactMap { $0.last.map { $0.presentationTime + $0.duration } }
        guard let end = ends.max() else { return .zero }
        return end - origin
    }
}

// MARK: Profile JSON

extension ControlID {
    static let standard: [ControlID] = [.exposureMode, .exposureDuration, .iso, .exposureTargetBias, .focusMode, .lensPosition,
                                        .whiteBalanceMode, .whiteBalanceTemperature, .torchMode, .torchLevel, .zoomFactor,
                                        .brightness, .contrast, .saturation, .hue, .gain]

    /// The control a name (as `description` spells it) stands for.
    public init(name: String) {
        self = ControlID.standard.first { $0.description == name } ?? .custom(name)
    }
}

/// Reads and writes the profile JSON, naming the field path of anything malformed.
enum FixtureJSON {
    struct Problem: Error { var field: String; var problem: String }

    static func time(_ t: MediaTime) -> Any { t.isNumeric ? [t.value, Int64(t.timescale)] : NSNull() }

    static func value(_ v: ControlValue) -> [String: Any] {
        switch v {
        case .bool(let b): return ["bool": b]
        case .integer(let i): return ["integer": i]
        case .real(let d): return ["real": d]
        case .menu(let m): return ["menu": m]
        case .text(let t): return ["text": t]
        }
    }

    static func encode(_ devices: [FixtureDevice]) -> [String: Any] {
        ["devices": devices.map(encode)]
    }

    static func encode(_ d: FixtureDevice) -> [String: Any] {
        let desc = d.description
        return [
            "uniqueID": desc.uniqueID, "name": desc.localizedName, "modelID": desc.modelID,
            "mediaType": desc.mediaType.rawValue, "position": desc.position.rawValue, "deviceType": desc.deviceType.rawValue,
            "defaultFormat": desc.defaultFormatIndex, "activeFormat": d.activeFormatIndex, "frameDuration": time(d.frameDuration),
            "formats": desc.formats.map(encode),
            "controls": d.controls.map { c -> [String: Any] in
                var kind: [String: Any]
                switch c.kind {
                case .bool: kind = ["bool": true]
                case .integer(let lo, let hi, let step): kind = ["integer": [lo, hi, step]]
                case .real(let lo, let hi): kind = ["real": [lo, hi]]
                case .menu(let entries): kind = ["menu": entries]
                case .text: kind = ["text": true]
                }
                var entry: [String: Any] = ["id": c.id.description, "kind": kind, "default": value(c.defaultValue),
                                            "volatile": c.isVolatile, "readOnly": c.isReadOnly]
                if let current = d.controlValues[c.id] { entry["value"] = value(current) }
                return entry
            },
        ]
    }

    static func encode(_ f: DeviceFormat) -> [String: Any] {
        var out: [String: Any] = ["frameRateRanges": f.frameRateRanges.map { [time($0.minFrameDuration), time($0.maxFrameDuration)] }]
        switch f.formatDescription {
        case .video(let pixelFormat, let size):
            out["video"] = ["pixelFormat": pixelFormat.fourcc, "width": size.width, "height": size.height]
            let p = f.properties
            out["properties"] = [
                "fieldOfView": p.fieldOfView, "minExposure": time(p.minExposureDuration), "maxExposure": time(p.maxExposureDuration),
                "minISO": p.minISO, "maxISO": p.maxISO, "maxZoom": p.maxZoomFactor,
                "stabilization": p.stabilizationModes.map(\.rawValue),
                "highResolutionStill": p.highResolutionStillDimensions.map { [$0.width, $0.height] as Any } ?? NSNull(),
                "videoHDR": p.isVideoHDRSupported, "fullRange": p.isFullRange, "autoFocus": p.autoFocusSystem.rawValue,
            ] as [String: Any]
        case .audio(let a):
            out["audio"] = ["sampleRate": a.sampleRate, "channels": a.channelCount, "sampleFormat": a.sampleFormat.rawValue]
        }
        return out
    }

    // Decoding: every accessor names the field path it failed on.

    static func object(_ any: Any?, _ field: String) throws(Problem) -> [String: Any] {
        guard let o = any as? [String: Any] else { throw Problem(field: field, problem: "expected an object") }
        return o
    }

    static func array(_ any: Any?, _ field: String) throws(Problem) -> [Any] {
        guard let a = any as? [Any] else { throw Problem(field: field, problem: "expected an array") }
        return a
    }

    static func string(_ any: Any?, _ field: String) throws(Problem) -> String {
        guard let s = any as? String else { throw Problem(field: field, problem: "expected a string") }
        return s
    }

    static func int(_ any: Any?, _ field: String) throws(Problem) -> Int64 {
        guard let n = any as? NSNumber, n.doubleValue.isFinite, Double(n.int64Value) == n.doubleValue else {
            throw Problem(field: field, problem: "expected an integer")
        }
        return n.int64Value
    }

    static func double(_ any: Any?, _ field: String) throws(Problem) -> Double {
        guard let n = any as? NSNumber, n.doubleValue.isFinite else { throw Problem(field: field, problem: "expected a number") }
        return n.doubleValue
    }

    static func bool(_ any: Any?, _ field: String) throws(Problem) -> Bool {
        guard let b = any as? Bool else { throw Problem(field: field, problem: "expected true or false") }
        return b
    }

    static func enumeration<E: RawRepresentable>(_ any: Any?, _ field: String) throws(Problem) -> E where E.RawValue == String {
        let s = try string(any, field)
        guard let e = E(rawValue: s) else { throw Problem(field: field, problem: "unknown value '\(s)'") }
        return e
    }

    static func time(_ any: Any?, _ field: String) throws(Problem) -> MediaTime {
        if any is NSNull { return .invalid }
        let pair = try array(any, field)
        guard pair.count == 2 else { throw Problem(field: field, problem: "expected [value, timescale]") }
        let value = try int(pair[0], field + "[0]"), scale = try int(pair[1], field + "[1]")
        guard scale > 0, scale <= Int64(Int32.max) else { throw Problem(field: field, problem: "timescale \(scale) is not in 1…\(Int32.max)") }
        return MediaTime(value: value, timescale: Int32(scale))
    }

    static func controlValue(_ any: Any?, _ field: String) throws(Problem) -> ControlValue {
        let o = try object(any, field)
        guard o.count == 1, let (key, v) = o.first else { throw Problem(field: field, problem: "expected one of bool, integer, real, menu") }
        switch key {
        case "bool": return .bool(try bool(v, field + ".bool"))
        case "integer": return .integer(try int(v, field + ".integer"))
        case "real": return .real(try double(v, field + ".real"))
        case "menu": return .menu(try string(v, field + ".menu"))
        case "text": return .text(try string(v, field + ".text"))
        default: throw Problem(field: field, problem: "unknown value kind '\(key)'")
        }
    }

    static func decode(_ any: Any) throws(Problem) -> [FixtureDevice] {
        let root = try object(any, "profile")
        let list = try array(root["devices"], "devices")
        guard !list.isEmpty else { throw Problem(field: "devices", problem: "a fixture records at least one device") }
        var devices: [FixtureDevice] = []
        for (i, item) in list.enumerated() { devices.append(try device(item, "devices[\(i)]")) }
        return devices
    }

    static func device(_ any: Any, _ path: String) throws(Problem) -> FixtureDevice {
        let o = try object(any, path)
        let mediaType: MediaType = try enumeration(o["mediaType"], path + ".mediaType")
        var formats: [DeviceFormat] = []
        for (i, f) in try array(o["formats"], path + ".formats").enumerated() {
            formats.append(try format(f, "\(path).formats[\(i)]", mediaType: mediaType))
        }
        let defaultFormat = Int(try int(o["defaultFormat"], path + ".defaultFormat"))
        let active = Int(try int(o["activeFormat"], path + ".activeFormat"))
        guard formats.indices.contains(defaultFormat) else { throw Problem(field: path + ".defaultFormat", problem: "no format \(defaultFormat)") }
        guard formats.indices.contains(active) else { throw Problem(field: path + ".activeFormat", problem: "no format \(active)") }
        let description = DeviceDescription(
            uniqueID: try string(o["uniqueID"], path + ".uniqueID"), localizedName: try string(o["name"], path + ".name"),
            modelID: try string(o["modelID"], path + ".modelID"), mediaType: mediaType,
            position: try enumeration(o["position"], path + ".position"), formats: formats, defaultFormatIndex: defaultFormat,
            deviceType: try enumeration(o["deviceType"], path + ".deviceType") as DeviceType)
        var controls: [ControlDescription] = []
        var values: [ControlID: ControlValue] = [:]
        for (i, c) in try array(o["controls"], path + ".controls").enumerated() {
            let cp = "\(path).controls[\(i)]"
            let co = try object(c, cp)
            let id = ControlID(name: try string(co["id"], cp + ".id"))
            let kindObject = try object(co["kind"], cp + ".kind")
            let kind: ControlDescription.Kind
            if kindObject["bool"] != nil {
                kind = .bool
            } else if let r = kindObject["integer"] {
                let a = try array(r, cp + ".kind.integer")
                guard a.count == 3 else { throw Problem(field: cp + ".kind.integer", problem: "expected [min, max, step]") }
                kind = .integer(min: try int(a[0], cp + ".kind.integer[0]"), max: try int(a[1], cp + ".kind.integer[1]"),
                                step: try int(a[2], cp + ".kind.integer[2]"))
            } else if let r = kindObject["real"] {
                let a = try array(r, cp + ".kind.real")
                guard a.count == 2 else { throw Problem(field: cp + ".kind.real", problem: "expected [min, max]") }
                kind = .real(min: try double(a[0], cp + ".kind.real[0]"), max: try double(a[1], cp + ".kind.real[1]"))
            } else if let m = kindObject["menu"] {
                var entries: [String] = []
                for (j, e) in try array(m, cp + ".kind.menu").enumerated() { entries.append(try string(e, "\(cp).kind.menu[\(j)]")) }
                kind = .menu(entries)
            } else if kindObject["text"] != nil {
                kind = .text
            } else {
                throw Problem(field: cp + ".kind", problem: "expected one of bool, integer, real, menu")
            }
            controls.append(ControlDescription(id: id, kind: kind, defaultValue: try controlValue(co["default"], cp + ".default"),
                                               isVolatile: try bool(co["volatile"], cp + ".volatile"),
                                               isReadOnly: try bool(co["readOnly"], cp + ".readOnly")))
            if let v = co["value"] { values[id] = try controlValue(v, cp + ".value") }
        }
        let frameDuration = try time(o["frameDuration"], path + ".frameDuration")
        if mediaType == .video, !(frameDuration.isNumeric && frameDuration > .zero) {
            throw Problem(field: path + ".frameDuration", problem: "a video device needs a positive frame duration")
        }
        return FixtureDevice(description: description, activeFormatIndex: active, frameDuration: frameDuration,
                             controls: controls, controlValues: values)
    }

    static func format(_ any: Any, _ path: String, mediaType: MediaType) throws(Problem) -> DeviceFormat {
        let o = try object(any, path)
        var ranges: [FrameRateRange] = []
        for (i, r) in try array(o["frameRateRanges"], path + ".frameRateRanges").enumerated() {
            let rp = "\(path).frameRateRanges[\(i)]"
            let pair = try array(r, rp)
            guard pair.count == 2 else { throw Problem(field: rp, problem: "expected [minFrameDuration, maxFrameDuration]") }
            ranges.append(FrameRateRange(minFrameDuration: try time(pair[0], rp + "[0]"), maxFrameDuration: try time(pair[1], rp + "[1]")))
        }
        switch mediaType {
        case .video:
            let v = try object(o["video"], path + ".video")
            let fourcc = try string(v["pixelFormat"], path + ".video.pixelFormat")
            guard let pixelFormat = PixelFormat(name: fourcc) else { throw Problem(field: path + ".video.pixelFormat", problem: "unknown pixel format '\(fourcc)'") }
            let width = try int(v["width"], path + ".video.width"), height = try int(v["height"], path + ".video.height")
            guard (1...16384).contains(width), (1...16384).contains(height) else {
                throw Problem(field: path + ".video", problem: "size \(width)x\(height) is outside 1…16384")
            }
            let p = try object(o["properties"], path + ".properties")
            var modes: [VideoStabilizationMode] = []
            for (i, m) in try array(p["stabilization"], path + ".properties.stabilization").enumerated() {
                modes.append(try enumeration(m, "\(path).properties.stabilization[\(i)]"))
            }
            var still: Dimensions?
            if let s = p["highResolutionStill"], !(s is NSNull) {
                let a = try array(s, path + ".properties.highResolutionStill")
                guard a.count == 2 else { throw Problem(field: path + ".properties.highResolutionStill", problem: "expected [width, height]") }
                still = Dimensions(width: Int(try int(a[0], path + ".properties.highResolutionStill[0]")),
                                   height: Int(try int(a[1], path + ".properties.highResolutionStill[1]")))
            }
            let properties = VideoFormatProperties(
                fieldOfView: try double(p["fieldOfView"], path + ".properties.fieldOfView"),
                minExposureDuration: try time(p["minExposure"], path + ".properties.minExposure"),
                maxExposureDuration: try time(p["maxExposure"], path + ".properties.maxExposure"),
                minISO: try double(p["minISO"], path + ".properties.minISO"), maxISO: try double(p["maxISO"], path + ".properties.maxISO"),
                maxZoomFactor: try double(p["maxZoom"], path + ".properties.maxZoom"), stabilizationModes: modes,
                highResolutionStillDimensions: still, isVideoHDRSupported: try bool(p["videoHDR"], path + ".properties.videoHDR"),
                isFullRange: try bool(p["fullRange"], path + ".properties.fullRange"),
                autoFocusSystem: try enumeration(p["autoFocus"], path + ".properties.autoFocus"))
            return DeviceFormat(formatDescription: .video(pixelFormat: pixelFormat, dimensions: Dimensions(width: Int(width), height: Int(height))),
                                frameRateRanges: ranges, properties: properties)
        case .audio:
            let a = try object(o["audio"], path + ".audio")
            let rate = try int(a["sampleRate"], path + ".audio.sampleRate"), channels = try int(a["channels"], path + ".audio.channels")
            guard (1...768_000).contains(rate), (1...64).contains(channels) else {
                throw Problem(field: path + ".audio", problem: "\(rate) Hz with \(channels) channels is out of range")
            }
            let sampleFormat: AudioStreamFormat.SampleFormat = try enumeration(a["sampleFormat"], path + ".audio.sampleFormat")
            return DeviceFormat(formatDescription: .audio(AudioStreamFormat(sampleRate: Int(rate), channelCount: Int(channels), sampleFormat: sampleFormat)),
                                frameRateRanges: ranges)
        }
    }
}

/// CRC-32 (IEEE, as zlib) of each recorded buffer, so corrupted payloads are found on reading.
/// The CRC-32 of zlib and PNG (IEEE 802.3, reflected), through libavutil's `av_crc`: compiled C,
/// so checking a replayed fixture's buffers costs little next to decoding them.
enum CRC32 {
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { b in
            guard let base = b.baseAddress, !b.isEmpty else { return 0 }
            return av_crc(av_crc_get_table(AV_CRC_32_IEEE_LE), UInt32.max, base, b.count) ^ UInt32.max
        }
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` with a typed error (Array's own only rethrows `any Error`).
    func withRawBytes(_ body: (UnsafeRawBufferPointer) throws(CaptureError) -> Void) throws(CaptureError) {
        let result: Result<Void, CaptureError> = withUnsafeBytes { raw in
            do throws(CaptureError) {
                try body(raw)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }
}
