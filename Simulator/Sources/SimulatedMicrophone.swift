import CaptureCore
import Foundation

/// An opened simulated microphone.
final class SimulatedMicrophone: DriverDevice {
    let profile: SimulatedDeviceProfile
    let format: AudioStreamFormat
    let tone: SyncToneSpec
    let scenario: SimulatorScenario

    init(profile: SimulatedDeviceProfile, format: AudioStreamFormat, tone: SyncToneSpec, scenario: SimulatorScenario) {
        self.profile = profile
        self.format = format
        self.tone = tone
        self.scenario = scenario
    }

    var description: DeviceDescription { profile.deviceDescription }

    func acquireConfigurationPriority() throws(CaptureError) {
        if let holder = scenario.externalLockHolder(profile.uniqueID) { throw .lockedByAnotherClient(device: profile.uniqueID, holder: holder) }
    }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        try scenario.requireAuthorization(.audio)
        guard description.formats.contains(configuration.format) else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(profile.uniqueID)")
        }
        var sources: [Int: ToneGenerator] = [:]
        for source in profile.port.dataSources {
            var spec = tone
            spec.toneFrequency = source.frequency
            sources[source.description.dataSourceID] = ToneGenerator(spec: spec, sampleRate: format.sampleRate)
        }
        return SimulatedAudioStream(format: format, generator: ToneGenerator(spec: tone, sampleRate: format.sampleRate),
                                    framesPerBuffer: configuration.audioFramesPerBuffer, pace: configuration.pace,
                                    uniqueID: profile.uniqueID, scenario: scenario, dataSources: sources,
                                    defaultDataSource: profile.port.defaultDataSourceID)
    }
}
