import Foundation
import Testing

/// The soak's short form on every test run: capture-soak in a process of its own (so other tests'
/// memory does not blur its numbers) for 5 minutes of media. ci/soak runs the hour and plots it.
@Suite struct SoakTests {
    @Test func fiveMinutesOfMediaKeepMemoryDescriptorsAndThreadsFlat() throws {
        let soak = (CommandLineTests.binary as NSString).deletingLastPathComponent + "/capture-soak"
        let result = try TestSupport.run(soak, ["--minutes", "5"])
        let rows = result.stdout.split(separator: "\n").filter { $0.first?.isNumber == true }
        #expect(rows.count == 5, "one sample per minute: \(result.stdout)")
        #expect(result.status == 0 && result.stdout.contains("capture-soak: flat"), "\(result.stdout)\n\(result.stderr)")
        // Every 10 s a photo (≥ 25 in 5 minutes) and a movie file every 5 minutes.
        let photos = rows.last.flatMap { Int($0.split(separator: ",")[5]) } ?? 0
        #expect(photos >= 25, "\(photos) photos")
    }
}
