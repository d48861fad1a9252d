import CaptureKit
import Foundation
import Testing

/// `VERSION` at the repository's root is the version's one source: the library's constant, what
/// `capture --version` prints (and the Debian package is named after) and the changelog follow it.
@Suite struct VersionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func versionFile() throws -> String {
        try String(contentsOf: root.appendingPathComponent("VERSION"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func theLibraryAndTheToolCarryTheVersionInVERSION() throws {
        let version = try Self.versionFile()
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { Int($0) != nil },
                "VERSION must be a semantic version MAJOR.MINOR.PATCH, not '\(version)'")
        #expect(CaptureKit.version == version)
        let result = try TestSupport.run(CommandLineTests.binary, ["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == version)
    }

    @Test func theChangelogHasAnEntryForTheVersion() throws {
        let version = try Self.versionFile()
        let changelog = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        #expect(changelog.contains("\n## [Unreleased]"))
        #expect(changelog.contains("\n## [\(version)] - "), "CHANGELOG.md has no '## [\(version)] - DATE' entry")
    }
}
