# The README's two commands: `make demo` and `make test`. Each installs what it needs.
.PHONY: demo test deps build bench

demo: deps
	swift build
	.ci/demo

test: deps
	swift test

build: deps
	swift build -c release

deps:
	.ci/install-deps

# Side by side with secret-tool, python keyring, argon2 and secretstorage (see README, Performance).
bench: deps
	.ci/bench
