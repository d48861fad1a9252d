import Foundation

/// Time since this process was launched, on the kernel's own record of the launch: field 22 of
/// `/proc/self/stat` (clock ticks since boot) against `CLOCK_BOOTTIME`. 10 ms resolution (100 Hz ticks).
enum ProcessClock {
    static func secondsSinceLaunch() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return .nan }
        // Fields after the command name (which may hold spaces) start at field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return .nan }
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        let boot = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        return boot - ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
