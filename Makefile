# The README's two commands: `make demo` and `make test`. Each installs what it needs.
.PHONY: demo test deps build

demo: deps
	swift build
	.ci/demo

test: deps
	swift test

build: deps
	swift build -c release

deps:
	.ci/install-deps
