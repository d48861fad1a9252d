import Foundation

extension CaptureSession {
    // MARK: Configuration

    public func beginConfiguration() {
        state.withLock { $0.configurationDepth += 1 }
    }

    /// Applies everything changed since the outermost `beginConfiguration`.
    public func commitConfiguration() {
        let outermost = state.withLock { s -> Bool in
            guard s.configurationDepth > 0 else { return false }
            s.configurationDepth -= 1
            return s.configurationDepth == 0
        }
        if outermost { applyChanges() }
    }

    private func changed() {
        if state.withLock({ $0.configurationDepth == 0 }) { applyChanges() }
    }

    /// The preset in force; `inputPriority` once an app has chosen a device format itself.
    public var sessionPreset: SessionPreset {
        state.withLock { s in
            guard s.preset != .inputPriority else { return .inputPriority }
            for input in s.inputs where input.mediaType == .video {
                if let chosen = s.presetFormats[input.device.uniqueID], chosen != input.device.activeFormat {
                    return .inputPriority
                }
            }
            return s.preset
        }
    }

    /// True when every video input has a format for the preset.
    public func canSetSessionPreset(_ preset: SessionPreset) -> Bool {
        preset == .inputPriority || inputs.filter { $0.mediaType == .video }.allSatisfy { preset.format(for: $0.device) != nil }
    }

    public func setSessionPreset(_ preset: SessionPreset) throws(CaptureError) {
        guard canSetSessionPreset(preset) else {
            throw .invalidArgument("preset \(preset.rawValue) is not supported by the session's video devices; check canSetSessionPreset first")
        }
        state.withLock {
            $0.preset = preset
            $0.presetFormats = [:]
        }
        changed()
    }

    // MARK: Inputs and outputs

    public func canAddInput(_ input: CaptureDeviceInput) -> Bool {
        state.withLock { s in input.device.isConnected && !s.inputs.contains { $0.device === input.device } }
    }

    public func addInput(_ input: CaptureDeviceInput) throws(CaptureError) {
        // Check and add in one step: two threads adding the same camera must not both succeed.
        let added = state.withLock { s -> Bool in
            guard input.device.isConnected, !s.inputs.contains(where: { $0.device === input.device }) else { return false }
            s.inputs.append(input)
            return true
        }
        guard added else {
            throw .invalidArgument("cannot add input \(input.device): it is already in the session or disconnected; check canAddInput first")
        }
        changed()
    }

    public func removeInput(_ input: CaptureDeviceInput) {
        state.withLock { s in s.inputs.removeAll { $0 === input } }
        changed()
    }

    public func canAddOutput(_ output: any CaptureOutput) -> Bool {
        state.withLock { s in !s.outputs.contains { $0 === output } && output.attachment.connections.isEmpty }
    }

    public func addOutput(_ output: any CaptureOutput) throws(CaptureError) {
        // Check and add in one step: two threads adding the same output must not both succeed.
        let added = state.withLock { s -> Bool in
            guard !s.outputs.contains(where: { $0 === output }), output.attachment.connections.isEmpty else { return false }
            s.outputs.append(output)
            return true
        }
        guard added else {
            throw .invalidArgument("cannot add output \(type(of: output)): it is already in a session; check canAddOutput first")
        }
        changed()
    }

    public func removeOutput(_ output: any CaptureOutput) {
        attachments.lock()
        let removed = state.withLock { s -> Bool in
            guard s.outputs.contains(where: { $0 === output }) else { return false }
            s.outputs.removeAll { $0 === output }
            return true
        }
        guard removed else { attachments.unlock(); return }
        output.sessionDidStop()
        output.attachment.detach()
        attachments.unlock()
        changed()
    }

    /// Rebuilds connections, applies the preset and, while running, starts/stops streams to match.
    func applyChanges(startingStreams: Bool = true) {
        let preset = sessionPreset
        attachments.lock()
        var gone: [CaptureConnection] = []
        let (outputs, connections, running) = state.withLock { s -> ([any CaptureOutput], [CaptureConnection], Bool) in
            var connections: [CaptureConnection] = []
            for output in s.outputs {
                for input in s.inputs where output.accepts(input.mediaType) {
                    // Keep an existing connection object (and its settings) when it still applies.
                    connections.append(s.connections.first { $0.input === input && $0.output === output }
                                       ?? CaptureConnection(input: input, output: output))
                }
            }
            gone = s.connections.filter { old in old.mediaType == .video && !connections.contains { $0 === old } }
            s.connections = connections
            return (s.outputs, connections, s.wantsRunning && s.interruption == nil)
        }
        // A connection that went away no longer asks its device to stabilize.
        for connection in gone { connection.input.device.requestStabilization(.off, by: ObjectIdentifier(connection)) }
        for output in outputs {
            output.attachment.attach(connections: connections.filter { $0.output === output }, pace: pace,
                                     preset: preset) { [weak self] in
                self?.wake.signal()
            }
            output.attachment.setRunning(running)
        }
        attachments.unlock()
        applyPreset()
        if running && startingStreams {
            do {
                try syncStreams(anchor: nil)
            } catch {
                events.send(.runtimeError(error))
            }
        }
        wake.signal()
    }

    /// Sets each video device's format for the preset (through the device's own lock).
    private func applyPreset() {
        let (preset, inputs) = state.withLock { ($0.preset, $0.inputs) }
        guard preset != .inputPriority else { return }
        for input in inputs where input.mediaType == .video {
            let device = input.device
            guard let format = preset.format(for: device) else { continue }
            if state.withLock({ $0.presetFormats[device.uniqueID] }) == format { continue }
            do {
                try device.lockForConfiguration()
                defer { device.unlockForConfiguration() }
                if device.activeFormat != format { try device.setActiveFormat(format) }
                state.withLock { $0.presetFormats[device.uniqueID] = format }
            } catch {
                events.send(.runtimeError(error))
            }
        }
    }
}
