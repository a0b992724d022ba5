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
