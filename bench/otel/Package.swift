// swift-tools-version:6.2
import PackageDescription

// The tracing backend an operator would bootstrap (swift-otel: a sampler, the batch span processor, the OTLP/HTTP
// exporter) around ZeroBridge's echo host, for `make bench` only: swift-otel takes about 7 minutes to build, which
// `make test` does not pay. `.zerobridge` is a link to the repository's root that `make bench` makes (a path
// dependency's identity is its last path component, and a clone's directory may be called anything).
let package = Package(
    name: "zerobridge-otel-bench",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ZeroBridge", path: ".zerobridge"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "zerobridge-otel-host",
            dependencies: [
                .product(name: "ZeroBridge", package: "ZeroBridge"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ]
)
