// swift-tools-version:6.2
import PackageDescription

// The anchors of `make bench` (issue 26): what a user would otherwise pick to connect a front-end to a Swift service,
// measured beside ZeroBridge in the same run. gRPC without TLS (grpc-swift-2 over its posix HTTP/2 transport) for the
// Swift and Python front-ends, HTTP/JSON (Hummingbird 2) for the Node front-end. A package of its own, built in release
// by `make bench` alone: grpc and hummingbird take minutes to build, which `make test` does not pay.
let package = Package(
    name: "zerobridge-anchors",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "zerobridge-anchors",
            dependencies: [
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)
