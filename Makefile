# The README's two commands: `make demo` and `make test`. Each installs what it needs.
.PHONY: demo test deps build bench

demo: deps
	swift build
	.ci/demo

test: deps
	swift test

# The fast build: release, with the Swift runtime linked in (it halves start-up time); Package.swift
# adds the release link settings (lld, packed relocations, stripped, static libstdc++).
build: deps
	swift build -c release --static-swift-stdlib

deps:
	.ci/install-deps

# Side by side with the dbus-send floor, secret-tool, python keyring, argon2 and secretstorage, and the
# release binary's size (see README, Performance).
bench: deps
	.ci/bench

# The GDBus skeletons of `authctl serve` (Sources/CAuthctlBus), generated from the interface files in
# data/; InterfaceFileTests checks that they match.
.PHONY: interfaces
interfaces: deps
	cd Sources/CAuthctlBus && gdbus-codegen --interface-prefix io.github.authctl. --c-namespace Authctl \
	    --generate-c-code authctl-bus ../../data/io.github.authctl.AuthController1.xml ../../data/io.github.authctl.Session1.xml \
	    && mv authctl-bus.h include/
