// swift-tools-version:6.0
// A package outside the repository that depends on ZeroBridge as the README's Install section says.
// `make test-install` copies it beside a link named `zerobridge` to the checkout, so `../zerobridge` is the
// checkout and the package's identity is that folder's name.
import PackageDescription

let package = Package(
    name: "Calculator",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(path: "../zerobridge"),
    ],
    targets: [
        .target(name: "Calculator", dependencies: [.product(name: "ZeroBridge", package: "zerobridge")]),
        .executableTarget(name: "calculator-host", dependencies: ["Calculator", .product(name: "ZeroBridge", package: "zerobridge")]),
        .testTarget(name: "CalculatorTests", dependencies: ["Calculator", .product(name: "ZeroBridge", package: "zerobridge")]),
    ],
    swiftLanguageModes: [.v6]
)
