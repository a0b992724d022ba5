# The README's two commands: `make demo` and `make test`. Each installs what it needs.
.PHONY: demo test deps build bench

demo: deps
	swift build
	.ci/demo

test: deps
	swift test

# The fast build: release, with the Swift runtime linked in (it halves start-up time).
build: deps
	swift build -c release --static-swift-stdlib

deps:
	.ci/install-deps

# Side by side with secret-tool, python keyring, argon2 and secretstorage (see README, Performance).
bench: deps
	.ci/bench
