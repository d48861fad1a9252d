import CaptureCore
import CaptureMedia

extension VideoDataOutput {
    /// Settings an asset writer input can take for this output's frames in `fileType`
    /// (AVCaptureVideoDataOutput.recommendedVideoSettingsForAssetWriter): H.264 at the delivered
    /// size (after `videoSettings` and the connection's rotation), the device's frame rate, a
    /// keyframe every second and about 4 bits per pixel per frame at 30 fps. Nil when the output has
    /// no video connection or the file type cannot hold video.
    public func recommendedVideoSettingsForAssetWriter(writingTo fileType: MediaFileType) -> OutputSettings? {
        guard fileType.canHoldVideo, let connection = connection(with: .video),
              case .video(_, let deviceSize) = connection.formatDescription else { return nil }
        let size = PixelRotator.rotatedDimensions(videoSettings.dimensions ?? deviceSize, angle: connection.videoRotationAngle)
        let duration = connection.videoFrameDuration
        let fps = duration.isNumeric && duration > .zero ? 1 / duration.seconds : 30
        let bitrate = Int((Double(size.width * size.height) * 4 * fps / 30).rounded())
        return [
            VideoSettingsKey.codec: .string(VideoCodecType.h264),
            VideoSettingsKey.width: .int(size.width),
            VideoSettingsKey.height: .int(size.height),
            VideoSettingsKey.scalingMode: .string(VideoScalingMode.fill.rawValue),
            VideoSettingsKey.compressionProperties: .dictionary([
                VideoSettingsKey.averageBitRate: .int(bitrate),
                VideoSettingsKey.maxKeyFrameInterval: .int(max(1, Int(fps.rounded()))),
                VideoSettingsKey.expectedSourceFrameRate: .double(fps),
                VideoSettingsKey.profileLevel: .string(VideoProfileLevel.h264HighAutoLevel),
            ]),
        ]
    }
}

extension AudioDataOutput {
    /// Settings an asset writer input can take for this output's audio in `fileType`
    /// (recommendedAudioSettingsForAssetWriter): AAC at the device's rate and channel count,
    /// 64 kbit/s per channel; 16-bit linear PCM for WAV. Nil without an audio connection.
    public func recommendedAudioSettingsForAssetWriter(writingTo fileType: MediaFileType) -> OutputSettings? {
        guard let connection = connection(with: .audio), case .audio(let format) = connection.formatDescription else { return nil }
        if fileType == .wav {
            return [AudioSettingsKey.formatID: .string(AudioFormatID.linearPCM),
                    AudioSettingsKey.sampleRate: .int(format.sampleRate),
                    AudioSettingsKey.numberOfChannels: .int(format.channelCount),
                    AudioSettingsKey.linearPCMBitDepth: 16]
        }
        let rate = AudioOutputSettingsRates.nearestAAC(format.sampleRate)
        return [AudioSettingsKey.formatID: .string(AudioFormatID.mpeg4AAC),
                AudioSettingsKey.sampleRate: .int(rate),
                AudioSettingsKey.numberOfChannels: .int(format.channelCount),
                AudioSettingsKey.encoderBitRatePerChannel: 64_000]
    }
}

enum AudioOutputSettingsRates {
    static let aac = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000]
    static func nearestAAC(_ rate: Int) -> Int { aac.min { abs($0 - rate) < abs($1 - rate) } ?? 48_000 }
}
