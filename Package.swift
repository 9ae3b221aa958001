// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ZeroBridge",
    // Linux is where it is built and tested; on macOS (untested here) swift-subprocess needs 13.
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        // The core: protocol, host, peer, transport, security. Needs neither SQLite nor process launching.
        .library(name: "ZeroBridge", targets: ["ZeroBridge"]),
        // Jobs (SPEC 7.16): journaled actions that outlive their request, over SQLite (GRDB).
        .library(name: "ZeroBridgeJobs", targets: ["ZeroBridgeJobs"]),
        // Supervised peers (SPEC 10.1): a host launching and restarting its peer processes (swift-subprocess).
        .library(name: "ZeroBridgeSupervision", targets: ["ZeroBridgeSupervision"]),
        .executable(name: "zerobridge", targets: ["zerobridge"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // `swift package generate-documentation` (make docs, make test-docs): the DocC catalogs under Sources/*/*.docc.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // Tests only: the reference the hand-written traceparent reader (Protocol/TraceHeaders.swift) is checked against.
        .package(url: "https://github.com/swift-otel/swift-w3c-trace-context", from: "1.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CZeroMQ",
            pkgConfig: "libzmq",
            providers: [.apt(["libzmq3-dev"])]
        ),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"]),
        .target(
            name: "ZeroBridge",
            dependencies: [
                "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // Signatures of keyed connections (SPEC 3.1) and the catalogue hash: HMAC-SHA256 and SHA-256 (BoringSSL).
                .product(name: "Crypto", package: "swift-crypto"),
                // WebSocket connections for browser peers (SPEC 2.2), and serving their page: SwiftNIO's HTTP/1 and WebSocket.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                // Telemetry (issue 27): the library only calls the API; executables bootstrap a backend.
                .product(name: "Metrics", package: "swift-metrics"),
                // Traces across languages (SPEC 7.18): the library only calls the API; an app bootstraps its tracer.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The Prometheus backend and its scrape endpoint (NIOHTTP1), for the executables that bootstrap one.
        .target(
            name: "ZeroBridgePrometheus",
            dependencies: [
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .target(
            name: "ZeroBridgeJobs",
            dependencies: [
                "ZeroBridge",
                .product(name: "Logging", package: "swift-log"),
                // The job journal (SPEC 7.16): SQLite through GRDB.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .target(
            name: "ZeroBridgeSupervision",
            dependencies: [
                "ZeroBridge",
                .product(name: "Logging", package: "swift-log"),
                // Launching, watching and stopping peer processes.
                .product(name: "Subprocess", package: "swift-subprocess"),
            ]
        ),
        // The conformance host's actions (`zerobridge serve --conformance`, the fixture runners' host): CLI and
        // tests only, so kept out of the library's API.
        .target(name: "ZeroBridgeConformance", dependencies: ["ZeroBridge", "ZeroBridgeJobs", "ZeroBridgeSupervision"]),
        .executableTarget(
            name: "zerobridge",
            dependencies: [
                "ZeroBridge",
                "ZeroBridgeConformance",
                "ZeroBridgeSupervision",
                "ZeroBridgeFixtures",
                "ZeroBridgePrometheus",
                "ZeroMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // openat2(2) for the import host, which opens what it imports beneath its roots without following links.
        .systemLibrary(name: "COpenBeneath", path: "examples/import-host/COpenBeneath"),
        // The import service of examples/: a host over SQLite (GRDB) that front-ends drive; tested by examples/tests.
        .executableTarget(
            name: "import-host",
            dependencies: [
                "ZeroBridge",
                "ZeroBridgeJobs",
                "ZeroBridgeSupervision",
                "ZeroBridgePrometheus",
                "COpenBeneath",
                .product(name: "GRDB", package: "GRDB.swift"),
                // --record-spans: spans kept in memory and served, to follow a trace without a backend.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "examples/import-host/Sources"
        ),
        // `make bench`'s Swift side: the raw libzmq echo (the limit), the ZeroBridge host and its Swift peer.
        .executableTarget(
            name: "zerobridge-bench",
            dependencies: [
                "ZeroBridge",
                "ZeroBridgePrometheus",
                "ZeroMQ",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // Tracing's cost (make bench): a host with swift-distributed-tracing's in-memory tracer bootstrapped.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                // The page's floor (make bench): a WebSocket echo on the host's own WebSocket stack.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        // Protocol fixtures: loading, running conversations against a live host, recording them, JUnit reports.
        .target(name: "ZeroBridgeFixtures", dependencies: ["ZeroBridge", "ZeroMQ"]),
        // What every test target shares: waiting for conditions, and the gate that keeps process-starting tests from
        // starving each other (one gate for the whole test run, so it lives in a module of its own).
        .target(name: "TestSupport", dependencies: ["ZeroBridgeFixtures"], path: "Tests/TestSupport"),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ", "TestSupport"]),
        .testTarget(name: "ZeroBridgeTests", dependencies: [
            "ZeroBridge", "ZeroBridgeJobs", "ZeroBridgeSupervision", "ZeroBridgeConformance", "ZeroMQ", "TestSupport", .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Tracing", package: "swift-distributed-tracing"),
            .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
        ]),
        .testTarget(name: "zerobridgeTests", dependencies: ["zerobridge", "ZeroBridgeConformance", "ZeroBridgeFixtures", "ZeroBridgePrometheus", "TestSupport"]),
        .testTarget(name: "ZeroBridgeFixturesTests", dependencies: ["ZeroBridgeFixtures", "ZeroBridgeConformance", "ZeroBridge", "ZeroMQ", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
