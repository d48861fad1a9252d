import CaptureKit
import Foundation

/// Walks a scenario document, naming the JSON path of every problem.
struct ScenarioParser {
    let file: String
    let directory: String

    func fail(_ field: String, _ problem: String) -> CaptureError { .invalidScenario(file: file, field: field, problem: problem) }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func object(_ value: Any?, _ path: String, allowed: [String]) throws(CaptureError) -> [String: Any] {
        guard let object = value as? [String: Any] else { throw fail(path.isEmpty ? "(document)" : path, "must be an object, not \(Self.kind(value))") }
        for key in object.keys.sorted() where !allowed.contains(key) {
            // An empty key is shown as "" (it would otherwise name no field at all).
            throw fail(Self.join(path, key.isEmpty ? "\"\"" : key), "unknown key (allowed here: \(allowed.joined(separator: ", ")))")
        }
        return object
    }

    static func kind(_ value: Any?) -> String {
        switch value {
        case nil: return "nothing"
        case is NSNull: return "null"
        case let n as NSNumber: return isBool(n) ? "a boolean" : "a number"
        case is String: return "a string"
        case is [Any]: return "an array"
        case is [String: Any]: return "an object"
        default: return "\(type(of: value!))"
        }
    }

    /// On Linux every JSON number is an NSNumber that also casts to Bool: tell them apart by type code
    /// (as the profile parser does).
    static func isBool(_ value: Any) -> Bool { JSONNumber.isBoolean(value) }

    func number(_ value: Any?, _ path: String) throws(CaptureError) -> Double {
        guard let d = JSONNumber.double(value), d.isFinite else { throw fail(path, "must be a number, not \(Self.kind(value))") }
        return d
    }

    func integer(_ value: Any?, _ path: String, min lower: Int64 = .min) throws(CaptureError) -> Int64 {
        let d = try number(value, path)
        guard let n = JSONNumber.integer(value) else {
            throw fail(path, d == d.rounded() ? "\(Self.text(value)) is out of range (allowed: whole numbers from \(max(lower, Int64.min)) to \(Int64.max))"
                                              : "must be a whole number, not \(Self.text(value))")
        }
        guard n >= lower else { throw fail(path, "must be \(lower) or more, not \(n)") }
        return n
    }

    func string(_ value: Any?, _ path: String) throws(CaptureError) -> String {
        if let s = value as? String, s.isEmpty { throw fail(path, "must not be empty") }
        guard let s = value as? String else { throw fail(path, "must be a non-empty string, not \(Self.kind(value))") }
        return s
    }

    func bool(_ value: Any?, _ path: String) throws(CaptureError) -> Bool {
        guard let value, Self.isBool(value), let n = value as? NSNumber else { throw fail(path, "must be true or false, not \(Self.kind(value))") }
        return n.boolValue
    }

    func array(_ value: Any?, _ path: String) throws(CaptureError) -> [Any] {
        guard let a = value as? [Any] else { throw fail(path, "must be an array, not \(Self.kind(value))") }
        return a
    }

    func choice(_ value: Any?, _ path: String, _ allowed: [String]) throws(CaptureError) -> String {
        let s = try string(value, path)
        guard allowed.contains(s) else { throw fail(path, "'\(s)' is not allowed (allowed: \(allowed.joined(separator: ", ")))") }
        return s
    }

    /// A bare number (exact) or `{"min": …, "max": …}`.
    func range(_ value: Any?, _ path: String) throws(CaptureError) -> Scenario.Range {
        if let value, !(value is [String: Any]) {
            let v = try number(value, path)
            return Scenario.Range(min: v, max: v)
        }
        let o = try object(value, path, allowed: ["min", "max"])
        let r = Scenario.Range(min: try o["min"].map { (v: Any) throws(CaptureError) in try number(v, Self.join(path, "min")) },
                               max: try o["max"].map { (v: Any) throws(CaptureError) in try number(v, Self.join(path, "max")) })
        guard r.min != nil || r.max != nil else { throw fail(path, "needs min, max or both (or a bare number for an exact value)") }
        if let a = r.min, let b = r.max, a > b { throw fail(path, "min \(a) is above max \(b)") }
        return r
    }

    static let topKeys = ["version", "name", "description", "seed", "pace", "duration", "devices", "outputs", "controls", "faults", "expectations"]

    func scenario(_ json: Any, defaultName: String) throws(CaptureError) -> Scenario {
        let top = try object(json, "", allowed: Self.topKeys)
        guard let versionValue = top["version"] else { throw fail("version", "is required (this build reads version \(Scenario.version))") }
        let version = try integer(versionValue, "version")
        guard version == Int64(Scenario.version) else { throw fail("version", "\(version) is not supported (this build reads version \(Scenario.version))") }
        guard let durationValue = top["duration"] else { throw fail("duration", "is required (seconds of media, e.g. 3)") }
        let duration = try number(durationValue, "duration")
        guard duration > 0, duration <= 3600 else { throw fail("duration", "must be more than 0 and at most 3600 seconds, not \(duration)") }
        var s = Scenario(file: file, name: defaultName, duration: duration)
        if let v = top["name"] {
            s.name = try string(v, "name")
            if let problem = Scenario.nameProblem(s.name) { throw fail("name", problem) }
        }
        if let v = top["description"] { s.summary = try string(v, "description") }
        if let v = top["seed"] { s.seed = try seed(v) }
        if let v = top["pace"] { s.pace = CapturePace(rawValue: try choice(v, "pace", CapturePace.allCases.map(\.rawValue)))! }
        guard let devicesValue = top["devices"] else { throw fail("devices", "is required: {\"camera\": {\"device\": \"sim:back\"}} and/or \"microphone\"") }
        let devices = try object(devicesValue, "devices", allowed: ["camera", "microphone"])
        if let v = devices["camera"] { s.camera = try device(v, "devices.camera", video: true) }
        if let v = devices["microphone"] { s.microphone = try device(v, "devices.microphone", video: false) }
        guard s.camera != nil || s.microphone != nil else { throw fail("devices", "needs a camera, a microphone or both") }
        if let v = top["outputs"] { s.outputs = try outputs(v, "outputs") }
        if s.camera == nil { s.outputs.videoData = false }
        if s.microphone == nil { s.outputs.audioData = false }
        if let v = top["controls"] {
            guard s.camera != nil else { throw fail("controls", "needs a camera (devices.camera)") }
            for (i, entry) in try array(v, "controls").enumerated() {
                let path = "controls[\(i)]"
                let text = try string(entry, path)
                let parsed: ControlTimeline.Entry
                do { parsed = try ControlTimeline.parse(text) } catch { throw fail(path, "\(error)") }
                guard parsed.time < duration else { throw fail(path, "at \(parsed.time) s is past the end (duration \(duration) s)") }
                s.controls.append(text)
            }
        }
        if let v = top["faults"] {
            for (i, entry) in try array(v, "faults").enumerated() {
                s.faults.events.append(try fault(entry, "faults[\(i)]", scenario: s))
            }
        }
        // The simulator's own rules on top (corruptFrame needs MJPEG; an end needs its beginning…).
        var known: [FaultTimeline.Device] = []
        if let c = s.camera {
            let request = c.format.flatMap(FormatRequest.init)
            known.append(FaultTimeline.Device(uniqueID: c.uniqueID, mediaType: .video, pixelFormat: request?.fourcc.flatMap(PixelFormat.init(name:)),
                                              frameDuration: request?.frameDuration))
        }
        if let m = s.microphone { known.append(FaultTimeline.Device(uniqueID: m.uniqueID, mediaType: .audio)) }
        do {
            try s.faults.validate(devices: known, duration: MediaTime(seconds: duration, preferredTimescale: 1_000_000))
        } catch {
            if case .invalidFaultEvent(let index, let problem, let allowed) = error { throw fail("faults[\(index)]", "\(problem) (allowed: \(allowed))") }
            throw fail("faults", "\(error)")
        }
        try checkWallTime(s)
        guard let expectationsValue = top["expectations"] else { throw fail("expectations", "is required: what must come out (e.g. {\"frames\": 90})") }
        s.expectations = try expectations(expectationsValue, "expectations", scenario: s)
        guard !s.expectations.isEmpty else { throw fail("expectations", "states nothing; give at least one expectation") }
        return s
    }

    static let deviceKeys = ["device", "fixture", "format", "controls"]
    /// The built-in simulator devices' IDs (read once per process).
    static let simulatedDevices: (cameras: [String], microphones: [String]) = {
        let profiles = (try? SimulatedDeviceProfile.builtIn()) ?? []
        return (profiles.filter { $0.mediaType == .video }.map(\.uniqueID).sorted(),
                profiles.filter { $0.mediaType == .audio }.map(\.uniqueID).sorted())
    }()

    func device(_ value: Any, _ path: String, video: Bool) throws(CaptureError) -> Scenario.Device {
        let o = try object(value, path, allowed: video ? Self.deviceKeys : ["device"])
        let id: String
        switch (o["device"], o["fixture"]) {
        case (let d?, nil):
            id = try string(d, Self.join(path, "device"))
            if id.hasPrefix("sim:") {
                let known = (video ? Self.simulatedDevices.cameras : Self.simulatedDevices.microphones)
                guard known.contains(id) else {
                    throw fail(Self.join(path, "device"), "unknown \(video ? "camera" : "microphone") '\(id)' (simulated ones: \(known.joined(separator: ", ")); or /dev/videoN, hw:CARD,DEV\(video ? ", or \"fixture\": PATH" : ""))")
                }
            } else if !(video ? id.hasPrefix("/dev/video") || id.hasPrefix("fixture:") : id.hasPrefix("hw:") || id.hasPrefix("plughw:") || id.hasPrefix("default")) {
                throw fail(Self.join(path, "device"), "unknown \(video ? "camera" : "microphone") '\(id)' (allowed: a simulator ID such as \(video ? "sim:back" : "sim:mic"), \(video ? "/dev/videoN or fixture:PATH" : "hw:CARD,DEV"))")
            }
        case (nil, let f?):
            let fixture = try string(f, Self.join(path, "fixture"))
            let resolved = fixture.hasPrefix("/") ? fixture : (directory as NSString).appendingPathComponent(fixture)
            guard FileManager.default.fileExists(atPath: resolved) else {
                throw fail(Self.join(path, "fixture"), "no fixture at \(resolved) (record one with `capture fixture record`)")
            }
            try requireRegularFixture(resolved, field: Self.join(path, "fixture"))
            id = "fixture:" + resolved
        case (nil, nil): throw fail(path, "needs \"device\" (a unique ID such as \(video ? "sim:back" : "sim:mic"))\(video ? " or \"fixture\" (a fixture file)" : "")")
        default: throw fail(path, "gives both \"device\" and \"fixture\"; give one")
        }
        var d = Scenario.Device(uniqueID: id)
        if let f = o["format"] {
            let text = try string(f, Self.join(path, "format"))
            guard FormatRequest(text) != nil else { throw fail(Self.join(path, "format"), "'\(text)' must look like 640x480@30 or 640x480@30:MJPG") }
            d.format = text
        }
        if let c = o["controls"] {
            for (i, entry) in try array(c, Self.join(path, "controls")).enumerated() {
                let text = try string(entry, "\(path).controls[\(i)]")
                guard let eq = text.firstIndex(of: "="), eq != text.startIndex else {
                    throw fail("\(path).controls[\(i)]", "'\(text)' must look like KEY=VALUE")
                }
                d.controls.append(text)
            }
        }
        return d
    }

    func outputs(_ value: Any, _ path: String) throws(CaptureError) -> Scenario.Outputs {
        let o = try object(value, path, allowed: ["movie", "videoData", "audioData", "metadata"])
        var out = Scenario.Outputs()
        if let m = o["movie"] {
            if Self.isBool(m) {
                out.movieContainer = try bool(m, Self.join(path, "movie")) ? "mp4" : nil
            } else {
                let mp = Self.join(path, "movie")
                let movie = try object(m, mp, allowed: ["container", "codec", "fragmentInterval"])
                if let c = movie["container"] { out.movieContainer = try choice(c, Self.join(mp, "container"), ["mp4", "mov", "mkv"]) }
                if let c = movie["codec"] { out.movieCodec = try choice(c, Self.join(mp, "codec"), ["copy", "h264", "mjpeg", "hevc"]) }
                if let f = movie["fragmentInterval"] {
                    out.fragmentInterval = try number(f, Self.join(mp, "fragmentInterval"))
                    guard out.fragmentInterval >= 0 else { throw fail(Self.join(mp, "fragmentInterval"), "must be 0 (unfragmented) or more seconds") }
                }
            }
        }
        if let v = o["videoData"] { out.videoData = try bool(v, Self.join(path, "videoData")) }
        if let v = o["audioData"] { out.audioData = try bool(v, Self.join(path, "audioData")) }
        if let v = o["metadata"] {
            let known = MetadataOutput.supportedMetadataObjectTypes.map(\.name)
            for (i, t) in try array(v, Self.join(path, "metadata")).enumerated() {
                out.metadataTypes.append(try choice(t, "\(path).metadata[\(i)]", known))
            }
        }
        return out
    }

    /// Each kind's own keys beside `at`/`frame`, `device` and `kind`.
    static let faultKinds: [String: [String]] = [
        "dropFrames": ["count"], "jitter": ["microseconds", "frames"], "stall": ["milliseconds"], "corruptFrame": ["corruption"],
        "duplicateFrame": [], "bufferError": [], "unplug": [], "replug": [], "configurationPriorityTaken": ["holder"], "configurationPriorityReleased": [],
        "audioGap": ["milliseconds"], "clockDrift": ["ppm"], "interruptionBegan": [], "interruptionEnded": [],
        "authorization": ["mediaType", "status"], "diskFull": ["bytes"], "slowDisk": ["milliseconds"], "slowEncoder": ["milliseconds"],
    ]
    static let videoFaults: Set<String> = ["dropFrames", "jitter", "stall", "corruptFrame", "duplicateFrame", "bufferError"]
    static let audioFaults: Set<String> = ["audioGap", "clockDrift"]
    static let anyDeviceFaults: Set<String> = ["unplug", "replug", "configurationPriorityTaken", "configurationPriorityReleased"]

    func fault(_ value: Any, _ path: String, scenario s: Scenario) throws(CaptureError) -> FaultEvent {
        let kinds = Self.faultKinds.keys.sorted()
        guard let raw = value as? [String: Any] else { throw fail(path, "must be an object, not \(Self.kind(value))") }
        let kind = try choice(raw["kind"], Self.join(path, "kind"), kinds)
        let o = try object(value, path, allowed: ["at", "frame", "device", "kind"] + Self.faultKinds[kind]!)
        // When.
        let at: FaultTime
        switch (o["at"], o["frame"]) {
        case (let t?, nil):
            let seconds = try number(t, Self.join(path, "at"))
            guard seconds >= 0 else { throw fail(Self.join(path, "at"), "must be 0 or more seconds, not \(seconds)") }
            guard seconds < s.duration else { throw fail(Self.join(path, "at"), "\(seconds) s is past the end (duration \(s.duration) s; allowed: 0 ≤ at < \(s.duration))") }
            at = .time(MediaTime(seconds: seconds, preferredTimescale: 1_000_000))
        case (nil, let f?):
            guard s.camera != nil else { throw fail(Self.join(path, "frame"), "frame indices need a camera; give \"at\" in seconds") }
            let frame = try integer(f, Self.join(path, "frame"), min: 0)
            let frames = Int64((s.duration * s.frameRate).rounded(.up))
            guard frame < frames else { throw fail(Self.join(path, "frame"), "frame \(frame) is past the end (\(frames) frames at \(s.frameRate) fps; allowed: 0…\(frames - 1))") }
            at = .frame(frame)
        case (nil, nil): throw fail(path, "needs \"at\" (seconds of virtual time) or \"frame\" (a frame index)")
        default: throw fail(path, "gives both \"at\" and \"frame\"; give one")
        }
        // Which device.
        var roles: [(String, String)] = []
        if let c = s.camera { roles.append(("camera", c.uniqueID)) }
        if let m = s.microphone { roles.append(("microphone", m.uniqueID)) }
        var device: String?
        if let d = o["device"] {
            let name = try string(d, Self.join(path, "device"))
            guard let match = roles.first(where: { $0.0 == name || $0.1 == name }) else {
                throw fail(Self.join(path, "device"), "unknown device '\(name)' (allowed: \(roles.map { "\($0.0) (\($0.1))" }.joined(separator: ", ")))")
            }
            device = match.1
        }
        if Self.videoFaults.contains(kind) {
            guard let camera = s.camera else { throw fail(path, "\(kind) needs a camera (devices.camera)") }
            if device == nil { device = camera.uniqueID }
            guard device == camera.uniqueID else { throw fail(Self.join(path, "device"), "\(kind) applies to the camera only") }
        } else if Self.audioFaults.contains(kind) {
            guard let mic = s.microphone else { throw fail(path, "\(kind) needs a microphone (devices.microphone)") }
            if device == nil { device = mic.uniqueID }
            guard device == mic.uniqueID else { throw fail(Self.join(path, "device"), "\(kind) applies to the microphone only") }
        } else if Self.anyDeviceFaults.contains(kind) {
            if device == nil { device = (s.camera ?? s.microphone)?.uniqueID }
        } else if o["device"] != nil {
            throw fail(Self.join(path, "device"), "\(kind) concerns the session or the outputs, not a device; remove \"device\"")
        }
        func positive(_ key: String, default d: Int64? = nil) throws(CaptureError) -> Int64 {
            guard let v = o[key] else {
                if let d { return d }
                throw fail(Self.join(path, key), "is required for \(kind)")
            }
            return try integer(v, Self.join(path, key), min: 1)
        }
        let fault: Fault
        switch kind {
        case "dropFrames": fault = .dropFrames(count: Int(try positive("count", default: 1)))
        case "jitter":
            fault = .jitter(microseconds: try positive("microseconds"),
                            frames: try o["frames"].map { (v: Any) throws(CaptureError) in Int(try integer(v, Self.join(path, "frames"), min: 0)) } ?? 0)
        case "stall": fault = .stall(milliseconds: Int(try positive("milliseconds")))
        case "corruptFrame":
            let c = try choice(o["corruption"] ?? "garbage", Self.join(path, "corruption"), FrameCorruption.allCases.map(\.rawValue))
            fault = .corruptFrame(FrameCorruption(rawValue: c)!)
        case "duplicateFrame": fault = .duplicateFrame
        case "bufferError": fault = .bufferError
        case "unplug": fault = .unplug
        case "replug": fault = .replug
        case "configurationPriorityTaken":
            fault = .configurationPriorityTaken(holder: try o["holder"].map { (v: Any) throws(CaptureError) in try string(v, Self.join(path, "holder")) } ?? "another process")
        case "configurationPriorityReleased": fault = .configurationPriorityReleased
        case "audioGap": fault = .audioGap(milliseconds: Int(try positive("milliseconds")))
        case "clockDrift":
            guard let v = o["ppm"] else { throw fail(Self.join(path, "ppm"), "is required for clockDrift") }
            let ppm = try number(v, Self.join(path, "ppm"))
            guard abs(ppm) <= 100_000 else { throw fail(Self.join(path, "ppm"), "must be within ±100000, not \(ppm)") }
            fault = .clockDrift(ppm: ppm)
        case "interruptionBegan": fault = .interruptionBegan
        case "interruptionEnded": fault = .interruptionEnded
        case "authorization":
            let media = try choice(o["mediaType"], Self.join(path, "mediaType"), ["video", "audio"])
            let status = try choice(o["status"], Self.join(path, "status"), ["authorized", "denied", "restricted", "notDetermined"])
            fault = .authorization(mediaType: media == "video" ? .video : .audio, status: AuthorizationStatus(rawValue: status)!)
        case "diskFull": fault = .diskFull(bytes: try positive("bytes"))
        case "slowDisk": fault = .slowDisk(milliseconds: Int(try positive("milliseconds")))
        default: fault = .slowEncoder(milliseconds: Int(try positive("milliseconds")))
        }
        return FaultEvent(at: at, device: device, fault: fault)
    }

    static let expectationKeys = ["frames", "deliveredFrames", "missingFrames", "duplicatedFrames", "maxAVOffset", "stopReason", "playable",
                                  "gstreamer", "errors", "metadata", "audio", "jitterMicroseconds", "invalidFramesSkipped", "damagedFrames"]
    static let stopReasons = ["requested", "sessionStopped", "maximumDuration", "maximumFileSize", "diskFull", "writeFailed",
                              "configurationChanged", "error"]

    func expectations(_ value: Any, _ path: String, scenario s: Scenario) throws(CaptureError) -> Scenario.Expectations {
        let o = try object(value, path, allowed: Self.expectationKeys)
        var e = Scenario.Expectations()
        let movie = s.outputs.movieContainer != nil
        func needsMovie(_ key: String) throws(CaptureError) {
            guard movie else { throw fail(Self.join(path, key), "needs a movie output (outputs.movie)") }
        }
        func indices(_ key: String) throws(CaptureError) -> [Int]? {
            guard let v = o[key] else { return nil }
            var list: [Int] = []
            for (i, n) in try array(v, Self.join(path, key)).enumerated() {
                list.append(Int(try integer(n, "\(path).\(key)[\(i)]", min: 0)))
            }
            return list.sorted()
        }
        if let v = o["frames"] { e.frames = try range(v, Self.join(path, "frames")) }
        if let v = o["deliveredFrames"] {
            guard s.outputs.videoData else { throw fail(Self.join(path, "deliveredFrames"), "needs a video data output (outputs.videoData)") }
            e.deliveredFrames = try range(v, Self.join(path, "deliveredFrames"))
        }
        e.missingFrames = try indices("missingFrames")
        e.duplicatedFrames = try indices("duplicatedFrames")
        if let v = o["maxAVOffset"] {
            try needsMovie("maxAVOffset")
            guard s.camera != nil, s.microphone != nil else { throw fail(Self.join(path, "maxAVOffset"), "needs a camera and a microphone") }
            e.maxAVOffset = try number(v, Self.join(path, "maxAVOffset"))
            guard e.maxAVOffset! >= 0 else { throw fail(Self.join(path, "maxAVOffset"), "must be 0 or more seconds") }
        }
        if let v = o["stopReason"] {
            try needsMovie("stopReason")
            e.stopReason = try choice(v, Self.join(path, "stopReason"), Self.stopReasons)
        }
        if let v = o["playable"] { try needsMovie("playable"); e.playable = try bool(v, Self.join(path, "playable")) }
        if let v = o["gstreamer"] { try needsMovie("gstreamer"); e.gstreamer = try bool(v, Self.join(path, "gstreamer")) }
        if let v = o["errors"] {
            var list: [Scenario.ExpectedError] = []
            for (i, item) in try array(v, Self.join(path, "errors")).enumerated() {
                let ip = "\(path).errors[\(i)]"
                let eo = try object(item, ip, allowed: ["type", "at", "tolerance"])
                var expected = Scenario.ExpectedError(type: try string(eo["type"], Self.join(ip, "type")))
                if let a = eo["at"] { expected.at = try number(a, Self.join(ip, "at")) }
                if let t = eo["tolerance"] {
                    expected.tolerance = try number(t, Self.join(ip, "tolerance"))
                    guard expected.tolerance >= 0 else { throw fail(Self.join(ip, "tolerance"), "must be 0 or more seconds") }
                }
                list.append(expected)
            }
            e.errors = list
        }
        if let v = o["metadata"] {
            let mp = Self.join(path, "metadata")
            let known = s.outputs.metadataTypes
            guard !known.isEmpty else { throw fail(mp, "needs a metadata output (outputs.metadata: [\"qr\", …])") }
            let mo = try object(v, mp, allowed: known)
            var result: [String: Scenario.Range] = [:]
            for (key, r) in mo { result[key] = try range(r, Self.join(mp, key)) }
            e.metadata = result
        }
        if let v = o["audio"] {
            let ap = Self.join(path, "audio")
            guard s.microphone != nil else { throw fail(ap, "needs a microphone (devices.microphone)") }
            let ao = try object(v, ap, allowed: ["frequency", "level", "gapMilliseconds"])
            if let f = ao["frequency"] { try needsMovie("audio.frequency"); e.audioFrequency = try range(f, Self.join(ap, "frequency")) }
            if let l = ao["level"] { try needsMovie("audio.level"); e.audioLevel = try range(l, Self.join(ap, "level")) }
            if let g = ao["gapMilliseconds"] {
                guard s.outputs.audioData else { throw fail(Self.join(ap, "gapMilliseconds"), "needs an audio data output (outputs.audioData)") }
                e.audioGapMilliseconds = try range(g, Self.join(ap, "gapMilliseconds"))
            }
        }
        if let v = o["jitterMicroseconds"] {
            guard s.outputs.videoData else { throw fail(Self.join(path, "jitterMicroseconds"), "needs a video data output (outputs.videoData)") }
            e.jitterMicroseconds = try range(v, Self.join(path, "jitterMicroseconds"))
        }
        if let v = o["damagedFrames"] {
            guard s.camera != nil else { throw fail(Self.join(path, "damagedFrames"), "needs a camera (devices.camera)") }
            e.damagedFrames = try range(v, Self.join(path, "damagedFrames"))
        }
        if let v = o["invalidFramesSkipped"] {
            try needsMovie("invalidFramesSkipped")
            e.invalidFramesSkipped = try range(v, Self.join(path, "invalidFramesSkipped"))
        }
        return e
    }
}
