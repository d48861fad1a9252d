/// Faults a file output injects into its own writing, for tests and simulated runs (a simulator
/// `FaultTimeline` produces them: `FaultTimeline.outputFaults`). Each starts at a recording time:
/// seconds of media from the recording's first sample. `MovieWriter` applies `diskFull` and
/// `slowDisk` in its write path and `slowEncoder` before each video frame it encodes; a
/// `MovieFileOutput` or `AssetWriter` passes its `outputFaults` on to its writer.
public struct OutputFaults: Sendable, Hashable {
    /// From `from` on, writes fail with ENOSPC as soon as the file would hold more than `bytes`:
    /// the same `diskFull` error, and the same file cut back to its last complete fragment, as a
    /// real full disk.
    public struct DiskFull: Sendable, Hashable {
        public var from: Double
        public var bytes: Int64
        public init(from: Double = 0, bytes: Int64) {
            self.from = from
            self.bytes = bytes
        }
    }

    /// From `from` on, a stall of `milliseconds` of wall time (0 ends an earlier one).
    public struct Stall: Sendable, Hashable {
        public var from: Double
        public var milliseconds: Int
        public init(from: Double = 0, milliseconds: Int) {
            self.from = from
            self.milliseconds = milliseconds
        }
    }

    public var diskFull: DiskFull?
    /// Every packet written to the file stalls (a slow disk).
    public var slowDisk: [Stall]
    /// Every video frame takes at least this long to encode (an encoder too slow for real time).
    /// In virtual pace nothing is lost (virtual time waits for the output); in real time the
    /// output's real-time policy decides what is dropped.
    public var slowEncoder: [Stall]

    public init(diskFull: DiskFull? = nil, slowDisk: [Stall] = [], slowEncoder: [Stall] = []) {
        self.diskFull = diskFull
        self.slowDisk = slowDisk
        self.slowEncoder = slowEncoder
    }

    public var isEmpty: Bool { diskFull == nil && slowDisk.isEmpty && slowEncoder.isEmpty }

    /// The byte limit in force at recording time `seconds` (nil: none).
    public func byteLimit(at seconds: Double) -> Int64? {
        guard let diskFull, seconds >= diskFull.from - 1e-9 else { return nil }
        return diskFull.bytes
    }

    /// The stall per write in force at `seconds`, in milliseconds.
    public func diskStall(at seconds: Double) -> Int { Self.inForce(slowDisk, at: seconds) }

    /// The minimum encode time per video frame in force at `seconds`, in milliseconds.
    public func encoderStall(at seconds: Double) -> Int { Self.inForce(slowEncoder, at: seconds) }

    private static func inForce(_ stalls: [Stall], at seconds: Double) -> Int {
        stalls.filter { $0.from <= seconds + 1e-9 }.max { $0.from < $1.from }?.milliseconds ?? 0
    }
}
