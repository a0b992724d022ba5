// swift-tools-version:6.1
// SPDX-License-Identifier: Apache-2.0
// authctl is licensed under the Apache License 2.0 (LICENSE).
import PackageDescription

// Release links: start-up is dominated by the dynamic loader and the runtime's conformance scan,
// so the release binary is linked with lld, keeps PIE (ASLR) but packs its relative relocations
// (`-z pack-relative-relocs`, glibc >= 2.36), is stripped (-s), and takes libstdc++ (which the static
// Swift runtime needs) from GCC's static archive instead of loading the shared one (about 4,300 symbol
// relocations fewer at every start): `.ci/static-libstdc++`, which `make build` runs, links this
// machine's archive alone into .build/static-libstdc++ (alone: beside the shared library, in GCC's own
// folder, the linker would take that). Its calls into GLib are bound when first
// made (`-z lazy`, Debian's default for packages), not all ~2,500 at start: a command makes a few
// dozen of them. It exports none of its ~3,900 symbols (swiftc links executables with
// --export-dynamic, for backtraces of unstripped builds): the runtime's `dladdr` at start walks them
// all. See README, Performance.
let releaseLinkerSettings: [LinkerSetting] = [
    .unsafeFlags([
        "-use-ld=lld",
        "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
        "-Xlinker", "-z", "-Xlinker", "lazy",
        "-Xlinker", "-s",
        "-Xlinker", "--no-export-dynamic",
        "-L", Context.packageDirectory + "/.build/static-libstdc++",
    ], .when(configuration: .release)),
]

let package = Package(
    name: "authctl",
    products: [
        // What an app imports: `AuthController` re-exports `AuthControllerCore` (all behaviour, built on
        // FoundationEssentials) and adds Foundation's `NotificationCenter` posting. The command line
        // links the core alone, so it carries neither Foundation nor ICU's data.
        .library(name: "AuthController", targets: ["AuthController", "AuthControllerCore"]),
        // In-memory twins of the keyring, settings and broadcaster, for tests of code that uses
        // the library (as swift-log ships InMemoryLogging).
        .library(name: "AuthControllerTesting", targets: ["AuthControllerTesting"]),
        .executable(name: "authctl", targets: ["authctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // Without its default trait, swift-subprocess does not pull Foundation in.
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2", traits: []),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // GLib, GObject and GIO: GDBus (the Secret Service's reads, the signals, `serve`), GKeyFile.
        .systemLibrary(
            name: "CGLib",
            pkgConfig: "gio-2.0",
            providers: [.apt(["libglib2.0-dev"])]
        ),
        .systemLibrary(
            name: "CArgon2",
            pkgConfig: "libargon2",
            providers: [.apt(["libargon2-dev"])]
        ),
        // libsoup-3.0, loaded on the first request to a token server (see its shim.h).
        .target(
            name: "CLibsoup",
            dependencies: ["CGLib"],
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // libxml2, loaded when AWS STS's answer is read (see its shim.h).
        .target(
            name: "CLibxml2",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // libsecret-1, loaded by the first keyring write, unlock or prompt (see its shim.h).
        .target(
            name: "CLibsecret",
            dependencies: ["CGLib"],
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // libqrencode, loaded when the device flow draws a QR code (see its shim.h).
        .target(
            name: "CQREncode",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // GnuTLS, loaded by the first ID-token signature check (see its shim.h).
        .target(
            name: "CGnuTLS",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // The D-Bus objects `authctl serve` exports: GDBus skeletons that gdbus-codegen generated from
        // the interface files in data/ (`make interfaces` regenerates them; a test checks they match).
        .target(
            name: "CAuthctlBus",
            dependencies: ["CGLib"]
        ),
        // The executable's start-up: a crash never waits at a terminal for a key, and `CommandLine`
        // gets the arguments glibc hands to initialisers instead of searching /proc/self/maps for
        // them (see process_start.c). Linked into the command line only.
        .target(name: "CProcessStart"),
        .target(
            name: "AuthControllerCore",
            dependencies: [
                "CGLib", "CArgon2", "CLibsecret", "CLibsoup", "CLibxml2", "CQREncode", "CGnuTLS", "CAuthctlBus",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "AuthController",
            dependencies: ["AuthControllerCore"]
        ),
        .target(
            name: "AuthControllerTesting",
            dependencies: ["AuthControllerCore"]
        ),
        .target(
            name: "DesktopSandbox",
            dependencies: [
                "AuthControllerCore",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(
            name: "authctl",
            dependencies: [
                "AuthControllerCore", "CProcessStart",
                "DesktopSandbox",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            linkerSettings: releaseLinkerSettings
        ),
        .executableTarget(
            name: "authctl-bench",
            dependencies: ["AuthController"],
            linkerSettings: releaseLinkerSettings
        ),
        // Helpers shared by the test targets: named test arguments, `eventually`, and the controllers
        // on in-memory stores that the unit tests drive.
        .target(
            name: "TestSupport",
            dependencies: ["AuthController", "AuthControllerTesting"],
            path: "Tests/TestSupport"
        ),
        // The fuzz checks: one per parser of input authctl does not control (a D-Bus reply, a token, a
        // provider's documents, what git, docker and kubectl send, the settings file), each saying what
        // must hold, not only that the parser returns. `authctl-fuzz` runs them under libFuzzer (`make
        // fuzz`) and AuthControllerTests replays the seeds and every input that once failed, without it.
        // In this package, not one nested under Tests/Fuzz: the parsers are internal, which only a target
        // of this package can reach (`@testable`, and `package` members), and a nested package could only
        // import this one's public products.
        .target(
            name: "FuzzChecks",
            // CGLib: a signal's arguments are made a GVariant from the input's bytes, as GDBus hands them over.
            dependencies: ["AuthControllerCore", "CGLib"],
            path: "Tests/Fuzz/Checks"
        ),
        // libFuzzer's driver entry point, declared for Swift. `make fuzz` puts libFuzzer's archive without a
        // `main` on the link line and only authctl-fuzz calls into it, so no other product of the fuzz
        // build gains libFuzzer or a second `main`.
        .target(
            name: "CFuzzerDriver",
            path: "Tests/Fuzz/Driver"
        ),
        // `authctl-fuzz` runs one check by the name it is called by (or its first argument): under
        // libFuzzer when built by `make fuzz`, else over the files it is given.
        .executableTarget(
            name: "authctl-fuzz",
            dependencies: ["FuzzChecks", "CFuzzerDriver"],
            path: "Tests/Fuzz/Harness"
        ),
        .testTarget(
            name: "AuthControllerTests",
            // authctl: the command line's QR code drawing; Subprocess: zbarimg reads the drawings back.
            dependencies: [
                "AuthController", "AuthControllerCore", "AuthControllerTesting", "TestSupport", "authctl", "FuzzChecks",
                .product(name: "Subprocess", package: "swift-subprocess"),
            ]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "AuthController", "AuthControllerCore", "AuthControllerTesting", "TestSupport", "DesktopSandbox", "authctl",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            exclude: ["Support/token_server.py", "Support/git_server.py", "Support/serving.py", "Support/identity_provider", "Support/scripted_provider.py",
                      "Support/scripted_browser", "Support/secret_service_stand_in.py", "Support/kube_api_server.py",
                      "Support/container_registry.py", "Support/notification_peers.py", "Support/keyrings", "Support/debian-root",
                      "Support/serve_caller", "Support/paste_driver.py", "Support/bad_proxy.py", "Support/clouds"]
        ),
    ]
)

// Every target that SwiftPM compiles with swiftc gets the same strict imports, set once here
// (as swift-log does); the system libraries are module maps over installed headers.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("InternalImportsByDefault"),
        .enableUpcomingFeature("MemberImportVisibility"),
    ]
}
