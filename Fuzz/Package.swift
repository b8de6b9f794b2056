// swift-tools-version:6.1
// libFuzzer harnesses for PushFleet's decoders. Build only through scripts/fuzz.sh, which passes
// `-sanitize=fuzzer,address -parse-as-library` so that every module is instrumented.
//
// PushFleetCore and APNSWire are not library products of the main package (it exports only the
// `pushfleet` executable), so they cannot be reached with `.package(path: "..")`. Instead
// Sources/PushFleetCore and Sources/APNSWire here are symlinks to the main package's sources and
// are compiled again, instrumented, as targets of this package with the same settings; so is
// Sources/SimulatorRequestValidation, a link to the simulator's request-validation folder (its
// declarations the targets use are `package`, which reaches every module of the package that
// compiles them), and Sources/APIRequests, the API's request bodies.
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "PushFleetFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        // Same versions as ../Package.resolved.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        .target(name: "PushFleetCore", path: "Sources/PushFleetCore", swiftSettings: strictSettings),
        .target(
            name: "APNSWire",
            dependencies: [
                "PushFleetCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            path: "Sources/APNSWire",
            swiftSettings: strictSettings
        ),
        // The simulator's request validation: a folder of APNSMockServer that needs no more than this.
        .target(
            name: "SimulatorRequestValidation",
            dependencies: ["APNSWire", "PushFleetCore", .product(name: "Crypto", package: "swift-crypto")],
            path: "Sources/SimulatorRequestValidation",
            swiftSettings: strictSettings
        ),
        // The API's request bodies: a folder of PushFleetAPI that needs only PushFleetCore.
        .target(name: "APIRequests", dependencies: ["PushFleetCore"], path: "Sources/APIRequests", swiftSettings: strictSettings),
        // Declares libFuzzer's LLVMFuzzerRunDriver; see its header.
        .target(name: "CFuzzDriver"),
        // What every target shares: `check`, the driver, feeding a decoder in chunks.
        .target(name: "FuzzSupport", dependencies: ["CFuzzDriver", .product(name: "NIOCore", package: "swift-nio")]),
        .executableTarget(
            name: "FuzzBinaryErrorResponse",
            dependencies: ["FuzzSupport", "APNSWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .executableTarget(
            name: "FuzzFeedbackTuple",
            dependencies: ["FuzzSupport", "APNSWire", "PushFleetCore", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .executableTarget(
            name: "FuzzHTTP2Answer",
            dependencies: [
                "FuzzSupport", "APNSWire", "PushFleetCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        .executableTarget(
            name: "FuzzBinaryInbound",
            dependencies: ["FuzzSupport", "APNSWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .executableTarget(
            name: "FuzzHTTP2Request",
            dependencies: [
                "FuzzSupport", "APNSWire", "PushFleetCore", "SimulatorRequestValidation",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .executableTarget(name: "FuzzAPIRequest", dependencies: ["FuzzSupport", "APIRequests", "PushFleetCore"]),
        .executableTarget(name: "FuzzJSONParser", dependencies: ["FuzzSupport", "PushFleetCore"]),
        .executableTarget(name: "FuzzPayload", dependencies: ["FuzzSupport", "PushFleetCore"]),
        .executableTarget(name: "FuzzDeviceTokenHex", dependencies: ["FuzzSupport", "PushFleetCore"]),
    ]
)
