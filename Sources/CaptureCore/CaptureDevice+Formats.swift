import Foundation

extension CaptureDevice {
    // MARK: Formats and frame durations

    /// Chooses the active format (under the configuration lock); resets both frame durations to
    /// the format's default and clamps the zoom factor to the new format's maximum. While the device
    /// streams, the change reaches the stream at its next frame boundary (no `stopRunning` needed);
    /// `completion` gets the PTS of the first frame delivered with it (`.invalid` when not streaming).
    public func setActiveFormat(_ format: DeviceFormat, completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard let index = formats.firstIndex(of: format) else {
            throw .formatNotSupported("\(format.formatDescription) is not one of \(uniqueID)'s formats")
        }
        let previous = try state.withLock { (s: inout State) throws(CaptureError) -> State in
            try requireLock(s, "setActiveFormat")
            let previous = s
            s.activeFormatIndex = index
            s.activeVideoMinFrameDuration = format.defaultFrameDuration ?? .invalid
            s.activeVideoMaxFrameDuration = format.defaultFrameDuration ?? .invalid
            if mediaType == .video, let driver = try? openLocked(&s),
               let zoom = try? driver.value(of: .zoomFactor).doubleValue, zoom > format.videoMaxZoomFactor {
                try driver.setValue(.real(format.videoMaxZoomFactor), for: .zoomFactor)
            }
            return previous
        }
        try publishStreamChange(restoring: previous, completion: completion)
    }

    /// Sets the shortest frame duration (under the lock). It must lie in one of the active
    /// format's ranges; `MediaTime.invalid` restores the default. A value above the current
    /// maximum raises the maximum with it.
    public func setActiveVideoMinFrameDuration(_ duration: MediaTime,
                                               completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        try setFrameDuration(duration, isMinimum: true, completion: completion)
    }

    /// Sets the longest frame duration (under the lock), validated like the minimum. A value below
    /// the current minimum lowers the minimum with it (so "set max, then min" recipes work).
    public func setActiveVideoMaxFrameDuration(_ duration: MediaTime,
                                               completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        try setFrameDuration(duration, isMinimum: false, completion: completion)
    }

    /// Frame durations, like formats, reach a running stream at its next frame boundary; the stream
    /// runs at `activeVideoMinFrameDuration` (the highest rate the app allows).
    private func setFrameDuration(_ duration: MediaTime, isMinimum: Bool,
                                  completion: (@Sendable (MediaTime) -> Void)?) throws(CaptureError) {
        let name = isMinimum ? "activeVideoMinFrameDuration" : "activeVideoMaxFrameDuration"
        let previous = try state.withLock { (s: inout State) throws(CaptureError) -> State in
            try requireLock(s, "set \(name)")
            let previous = s
            let format = formats[s.activeFormatIndex]
            guard duration.isValid else {
                let fallback = format.defaultFrameDuration ?? .invalid
                if isMinimum {
                    s.activeVideoMinFrameDuration = fallback
                    if s.activeVideoMaxFrameDuration < fallback { s.activeVideoMaxFrameDuration = fallback }
                } else {
                    s.activeVideoMaxFrameDuration = fallback
                    if s.activeVideoMinFrameDuration > fallback { s.activeVideoMinFrameDuration = fallback }
                }
                return previous
            }
            guard duration.isNumeric, duration.value > 0, format.supports(frameDuration: duration) else {
                throw .valueOutOfRange(control: name, value: "\(duration) (\(Self.fps(duration)) fps)",
                                       allowed: format.frameRateRanges.map(\.description).joined(separator: ", "))
            }
            if isMinimum {
                s.activeVideoMinFrameDuration = duration
                if s.activeVideoMaxFrameDuration < duration { s.activeVideoMaxFrameDuration = duration }
            } else {
                s.activeVideoMaxFrameDuration = duration
                if s.activeVideoMinFrameDuration > duration { s.activeVideoMinFrameDuration = duration }
            }
            return previous
        }
        try publishStreamChange(restoring: previous, completion: completion)
    }

    // MARK: Live reconfiguration

    /// Registers a running stream of this device (sessions do, for each stream they start); the
    /// handler receives every later format or frame-duration change. Returns a token for
    /// `removeLiveStream`.
    public func addLiveStream(_ handler: @escaping LiveStreamHandler) -> Int {
        liveStreams.withLock { l in
            defer { l.next += 1 }
            l.handlers[l.next] = handler
            return l.next
        }
    }

    public func removeLiveStream(_ token: Int) {
        _ = liveStreams.withLock { $0.handlers.removeValue(forKey: token) }
    }

    /// True while some session streams from this device.
    public var isStreaming: Bool { liveStreams.withLock { !$0.handlers.isEmpty } }

    /// Sends the active format and frame duration to every running stream. A stream that refuses
    /// them (a format the backend cannot switch to) restores the previous settings and throws.
    private func publishStreamChange(restoring previous: State, completion: (@Sendable (MediaTime) -> Void)?) throws(CaptureError) {
        let (format, duration) = state.withLock { (formats[$0.activeFormatIndex], $0.activeVideoMinFrameDuration) }
        let (handlers, generation) = liveStreams.withLock { l in
            l.published += 1
            return (Array(l.handlers.values), l.published)
        }
        guard mediaType == .video, !handlers.isEmpty else {
            if let completion { callbackQueue.async { completion(.invalid) } }
            return
        }
        let fired = Locked(false)
        let change = StreamReconfiguration(format: format, frameDuration: duration) { [weak self] pts in
            guard let self, !fired.withLock({ f in defer { f = true }; return f }) else { return }
            // Changes made between two frames reach the same frame: observers see the last one's values.
            if self.liveStreams.withLock({ $0.published }) == generation {
                self.observers.send(TimedControlValue(control: .activeFormat, value: .menu(Self.formatName(format)), presentationTime: pts))
                self.observers.send(TimedControlValue(control: .activeFrameDuration, value: .real(duration.seconds), presentationTime: pts))
            }
            if let completion { self.callbackQueue.async { completion(pts) } }
        }
        do {
            for handler in handlers { try handler(change) }
        } catch {
            state.withLock { s in
                s.activeFormatIndex = previous.activeFormatIndex
                s.activeVideoMinFrameDuration = previous.activeVideoMinFrameDuration
                s.activeVideoMaxFrameDuration = previous.activeVideoMaxFrameDuration
            }
            throw error
        }
    }

    // MARK: Stabilization

    /// Connections' preferred stabilization modes, by connection.
    private static let stabilizationRanks: [VideoStabilizationMode] = [.off, .standard, .auto, .cinematic, .cinematicExtended]

    /// A connection's preferred stabilization (`CaptureConnection.preferredVideoStabilizationMode`):
    /// the device's stream stabilizes with the strongest mode any connection asks for, resolved per
    /// frame against the active format (a mode the format lacks is off, `auto` is the best it has),
    /// where the driver can (`stabilization.mode`; the simulator). No configuration lock: this is
    /// the session's business, as in AVFoundation.
    public func requestStabilization(_ mode: VideoStabilizationMode, by connection: ObjectIdentifier) {
        func strongest(_ r: [ObjectIdentifier: VideoStabilizationMode]) -> VideoStabilizationMode {
            r.values.max { (Self.stabilizationRanks.firstIndex(of: $0) ?? 0) < (Self.stabilizationRanks.firstIndex(of: $1) ?? 0) } ?? .off
        }
        let (before, after) = stabilization.withLock { r -> (VideoStabilizationMode, VideoStabilizationMode) in
            let before = strongest(r)
            r[connection] = mode == .off ? nil : mode
            return (before, strongest(r))
        }
        // Nothing changed (e.g. a connection that never asked goes away): leave the driver alone.
        guard before != after || mode != .off else { return }
        guard controlDescription(.videoStabilizationMode) != nil, let driver = try? driverDevice() else { return }
        try? driver.setValue(.menu(after.rawValue), for: .videoStabilizationMode)
    }

    /// A format as `activeFormat` observations name it: `420v 1280x720`.
    public static func formatName(_ format: DeviceFormat) -> String {
        guard let pixelFormat = format.pixelFormat, let dimensions = format.dimensions else { return "\(format.formatDescription)" }
        return "\(pixelFormat) \(dimensions)"
    }

    static func fps(_ d: MediaTime) -> String { String(format: "%g", 1 / d.seconds) }

    /// The best format for a size and rate: exact size, the rate within a range, the given pixel
    /// format when asked for; nil if none fits.
    public func format(matching dimensions: Dimensions?, frameRate: Int?, pixelFormat: PixelFormat? = nil) -> DeviceFormat? {
        formats.first { format in
            if let dimensions, format.dimensions != dimensions { return false }
            if let pixelFormat, format.pixelFormat != pixelFormat { return false }
            if let frameRate, !format.supports(frameDuration: MediaTime(value: 1, timescale: Int32(frameRate))) { return false }
            return true
        }
    }
}
