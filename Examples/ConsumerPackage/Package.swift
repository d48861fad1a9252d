// swift-tools-version:6.1
import PackageDescription

// A package that uses CaptureKit the way any other package would: by git URL and version.
// The URL is a placeholder; `ci/consumer` points it at a tagged clone of this repository
// (`swift package config set-mirror`), builds this package and runs its tests.
let package = Package(
    name: "ConsumerPackage",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://git.example.org/CaptureKit.git", from: "0.9.0"),
    ],
    targets: [
        .target(name: "Consumer", dependencies: [.product(name: "CaptureKit", package: "CaptureKit")]),
        .testTarget(
            name: "ConsumerTests",
            dependencies: ["Consumer", .product(name: "CaptureKitTesting", package: "CaptureKit")]),
    ],
    swiftLanguageModes: [.v6]
)
