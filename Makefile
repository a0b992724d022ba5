# SPDX-License-Identifier: Apache-2.0
# The README's two commands: `make demo` and `make test`. Each installs what it needs.
.PHONY: demo test docs deps build bench manual-tool install-prerequisites install uninstall deb tsan fuzz fuzz-build

demo: deps
	swift build
	.ci/demo

# The install test (Tests/IntegrationTests/InstallTests.swift) runs `make install`, and `swift test`
# holds the lock on .build/ for its whole run: a `swift build` started from inside it would wait for
# ever. So the release binary and the manual generator are built here, before the tests, and the
# test runs the recipes alone, with the two targets that run `swift build` taken as done
# (`make -o build -o manual-tool install`, and the same for `uninstall`). The documentation is built
# first for the same reason, and so that a broken link fails CI.

# Some suites have passes of their own after the rest: the tests with the other tools (kubectl,
# skopeo and a registry, dunst under Xvfb, tinyproxy and squid, the clouds' Python clients and moto, each beside an
# identity provider), the tests against every
# Secret Service (KeePassXC and KWallet: Qt programs, a second of both cores each), the gnome-keyring
# load test (a minute of six processes looping against the keyring with serve running), and the
# Debian package's tests, which install it into a clean Debian 12 system (apt, dpkg, a keyring daemon
# and a bus at work there; `make deb` builds the package first). Beside the rest, every timing the
# other tests measure would be their load's. serve's bounds under many services (200 ms for a change
# to reach its object with 600 of them, measured in the debug build) have a pass of their own too,
# a few seconds long: in the main pass, its neighbours' processes made them late in one clean-clone
# run of three.
TOOL_SUITES = ProxyTests|CloudTests|KubeAPIServerTests|KubectlTests|ContainerRegistryTests|ContainerRegistryHelperTests|NotificationServerTests|NotificationTests
#
# Beside the passes, every fuzz target is built (AddressSanitizer and libFuzzer, a build folder of its
# own) and then runs CI_FUZZ_SECONDS against its committed corpus (see fuzz below), at the lowest
# priority and in a session of its own: it takes only the CPU the tests leave idle while they wait for
# their servers and daemons, the run waits for it at the end, and it is stopped with everything it
# started if a pass fails. The session's own scheduling group (the kernel's autogroup, which a new
# session gets) is set to the lowest priority too: `nice` alone ranks processes only inside their
# group, and a group of its own would otherwise take half the machine from the tests. The Debian package's test, mostly apt and dpkg at work in a chroot, shares
# the tools' pass.
#
# The release binary and manual generator (for the install and package tests) and the tests with their
# documentation are built side by side, each in its build folder, once the dependencies are resolved:
# alone, the release build keeps both cores busy for barely two thirds of its time (128 s, 196 s of CPU),
# its whole-module compile of AuthControllerCore holding one core for most of a minute.
CI_FUZZ_SECONDS ?= 3
test: SHELL := /bin/bash
test: .SHELLFLAGS := -o pipefail -ec
test: deps
	swift package resolve
	$(MAKE) --no-print-directory -j2 -o deps install-prerequisites docs
	$(MAKE) --no-print-directory -o deps -o install-prerequisites deb
	mkdir -p .build && setsid sh -c 'echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$$@"' fuzz \
	    $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CI_FUZZ_SECONDS) > .build/fuzz-ci.log 2>&1 & fuzz=$$!; \
	trap 'kill -- -$$fuzz 2>/dev/null || true' EXIT; \
	swift test --skip 'SecretServiceImplementationTests|KeyringLoadTests|DebianPackageTests|ServeRaceTests|$(TOOL_SUITES)'; \
	swift test --filter ServeRaceTests; \
	swift test --filter '$(TOOL_SUITES)|DebianPackageTests'; \
	swift test --filter SecretServiceImplementationTests; \
	swift test --filter KeyringLoadTests; \
	wait $$fuzz && status=0 || status=$$?; \
	grep -E '^== |^stat::(number_of_executed_units|average_exec_per_sec)|ERROR|SUMMARY|make: ' .build/fuzz-ci.log || true; \
	[ $$status -eq 0 ] || { tail -40 .build/fuzz-ci.log; echo "make: the fuzz targets failed; .build/fuzz-ci.log says why" >&2; exit 1; }

# The unit tests under ThreadSanitizer, in a build folder of their own (every module is instrumented,
# so it shares nothing with the plain build): a data race anywhere in the library fails the run.
# The integration tests stay out: they drive the binary in processes of their own, which the
# sanitizer does not follow.
tsan: deps
	swift test --scratch-path .build-tsan --sanitize=thread --filter AuthControllerTests

# The DocC documentation of the library as one archive, with every warning an error: the articles of
# Sources/AuthController/AuthController.docc, AuthControllerCore's symbols and its catalog's landing
# page, and AuthControllerTesting's symbols. The types live in AuthControllerCore, which
# AuthController re-exports, and a module's symbol graph leaves re-exported symbols out: so each
# module is documented on its own, AuthController's articles (and AuthControllerTesting's comments)
# link into AuthControllerCore through its archive (``/AuthControllerCore/…``, `--dependency`), and
# the archives are merged.
# SwiftPM dumps the symbol graphs of every module, the test modules too, so it needs the build that
# `swift test` makes (in .build/, which `swift test` then reuses), and the toolchain's docc does the
# rest, one step at a time; nothing is downloaded.
# (swift-docc-plugin does the same steps, but waits for docc with Foundation's Process, which under
# load can miss the exit of its child and wait for ever.) The archive is for static hosting: serve
# DOCS_ARCHIVE with any web server and open /documentation/authcontroller.
DOCS = .build/docs
DOCS_ARCHIVE = $(DOCS)/authctl.doccarchive
DOCC_CONVERT = docc convert --warnings-as-errors --transform-for-static-hosting --enable-experimental-external-link-support

docs: SHELL := /bin/bash
docs: .SHELLFLAGS := -o pipefail -ec
docs: deps
	swift build --build-tests
	swift package dump-symbol-graph --emit-extension-block-symbols
	shopt -s nullglob && rm -rf $(DOCS) && graphs="$$(dirname "$$(swift build --show-bin-path)")/symbolgraph" && \
	    for module in AuthControllerCore AuthControllerTesting AuthController; do \
	        mkdir -p $(DOCS)/symbols/$$module && cp "$$graphs/$$module".symbols.json "$$graphs/$$module"@*.symbols.json $(DOCS)/symbols/$$module/; \
	    done
	$(DOCC_CONVERT) Sources/AuthControllerCore/AuthControllerCore.docc --additional-symbol-graph-dir $(DOCS)/symbols/AuthControllerCore \
	    --fallback-display-name AuthControllerCore --fallback-bundle-identifier AuthControllerCore --output-path $(DOCS)/AuthControllerCore.doccarchive
	$(DOCC_CONVERT) Sources/AuthControllerTesting/AuthControllerTesting.docc --additional-symbol-graph-dir $(DOCS)/symbols/AuthControllerTesting \
	    --fallback-display-name AuthControllerTesting --fallback-bundle-identifier AuthControllerTesting --output-path $(DOCS)/AuthControllerTesting.doccarchive \
	    --dependency $(DOCS)/AuthControllerCore.doccarchive
	$(DOCC_CONVERT) Sources/AuthController/AuthController.docc --additional-symbol-graph-dir $(DOCS)/symbols/AuthController \
	    --fallback-display-name AuthController --fallback-bundle-identifier AuthController --output-path $(DOCS)/AuthController.doccarchive \
	    --dependency $(DOCS)/AuthControllerCore.doccarchive
	docc merge $(DOCS)/AuthControllerCore.doccarchive $(DOCS)/AuthController.doccarchive $(DOCS)/AuthControllerTesting.doccarchive \
	    --synthesized-landing-page-name authctl --synthesized-landing-page-kind Package --output-path $(DOCS_ARCHIVE)
	@test -f $(DOCS_ARCHIVE)/documentation/authcontroller/index.html || \
	    { echo "make: no documentation in $(DOCS_ARCHIVE)" >&2; exit 1; }

# The fast build: release, with the Swift runtime linked in (it halves start-up time); Package.swift
# adds the release link settings (lld, packed relocations, stripped, static libstdc++). Only the
# product: the TestSupport target imports Testing, which a release build of every target lacks.
# --disable-local-rpath: the binary looks for its shared libraries where the system keeps them, not first
# in its own folder (a dozen failed opens at every start).
# The release build has a build folder of its own: SwiftPM locks its folder for a whole build, and
# `make test` builds the release binary and the tests side by side (see test below).
RELEASE_SCRATCH = .build-release
RELEASE_FLAGS = --scratch-path $(RELEASE_SCRATCH) -c release --static-swift-stdlib --disable-local-rpath
build: deps
	.ci/static-libstdc++
	swift build $(RELEASE_FLAGS) --product authctl

# swift-argument-parser's manual generator (the tool behind its GenerateManual plugin), built with
# the same flags as the binary so the two builds share $(RELEASE_SCRATCH) and never rebuild each other;
# after it, since the two would only wait for each other's lock on the folder (under make -j, a job slot
# held waiting).
manual-tool: deps build
	swift build $(RELEASE_FLAGS) --product generate-manual

deps:
	.ci/install-deps

# Side by side with the dbus-send floor, secret-tool, python keyring, argon2 and secretstorage, and the
# release binary's size (see README, Performance).
bench: deps
	.ci/bench

# Fuzzing: every parser of input authctl does not control, under libFuzzer with AddressSanitizer
# (Tests/Fuzz: the checks, the harness, the seed corpora and every input that once failed, which
# `make test` replays without the fuzzer). `make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS=…]` builds
# .build-fuzz/debug/authctl-fuzz and runs each target for FUZZ_SECONDS against its corpus: what it
# finds goes to .build-fuzz/corpus/TARGET, crash inputs to .build-fuzz/crashes/TARGET (copy one to
# Tests/Fuzz/Regressions/TARGET once it is fixed), and each target's last lines are printed: its
# coverage and executions per second. One run is .build-fuzz/targets/TARGET [LIBFUZZER OPTIONS] [CORPUS…].
# The Swift code is instrumented (coverage and comparisons, as -sanitize=fuzzer does) but libFuzzer's
# archive without a `main` is linked by hand: only authctl-fuzz calls it, so every other product of
# this build (authctl, whose `main` it keeps) links as it is. lld: gold fails on the instrumented objects.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= bus-message bus-conversation bus-signal jws jwks discovery token-answer device-flow git-credential docker-config \
	kube-exec-info settings loopback-query loopback-request validators proxy-variables pasted-address \
	sts-answer aws-config
FUZZ = .build-fuzz
LIBFUZZER = $(firstword $(wildcard $(dir $(realpath $(shell command -v swiftc)))../lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-$(shell uname -m).a))
FUZZ_BUILD_FLAGS = --scratch-path $(FUZZ) -c debug -Xswiftc -sanitize=address \
	-Xswiftc -sanitize-coverage=edge,trace-cmp,indirect-calls,inline-8bit-counters,pc-table -Xswiftc -DFUZZING \
	-Xswiftc -use-ld=lld -Xlinker $(LIBFUZZER) -Xlinker -lstdc++

fuzz-build: deps
	@test -n "$(LIBFUZZER)" || { echo "make: libclang_rt.fuzzer_no_main is not in the Swift toolchain beside swiftc" >&2; exit 1; }
	swift build $(FUZZ_BUILD_FLAGS) --product authctl-fuzz
	mkdir -p $(FUZZ)/targets && for target in $(FUZZ_TARGETS); do ln -sfn ../debug/authctl-fuzz $(FUZZ)/targets/$$target || exit; done

# Every target runs even when one fails; the run fails at the end if any did. -timeout: an input
# that takes 10 s is a hang. No LeakSanitizer: it reports the Swift globals the checks
# keep (their fixtures, the fake bus) at exit, and memory held is not what hostile input can turn
# into harm here. SWIFT_BACKTRACE: the runtime's backtracer, reading the crashed process's stack,
# trips AddressSanitizer and buries the report of what failed.
fuzz: export SWIFT_BACKTRACE = enable=no
fuzz: export ASAN_OPTIONS = detect_leaks=0
fuzz: fuzz-build
	@failed=""; for target in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ)/corpus/$$target $(FUZZ)/crashes/$$target $(FUZZ)/logs && \
	    seeds="Tests/Fuzz/Corpus/$$target" && { [ ! -d Tests/Fuzz/Regressions/$$target ] || seeds="$$seeds Tests/Fuzz/Regressions/$$target"; } && \
	    echo "== $$target ($(FUZZ_SECONDS) s)" && \
	    $(FUZZ)/targets/$$target -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 \
	        -artifact_prefix=$(FUZZ)/crashes/$$target/ $(FUZZ)/corpus/$$target $$seeds > $(FUZZ)/logs/$$target.log 2>&1 \
	        || failed="$$failed $$target"; \
	    grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)|^(==[0-9]+==ERROR|SUMMARY|Fatal error|.*Fatal error)|^artifact_prefix|Test unit written' $(FUZZ)/logs/$$target.log; \
	done; \
	if [ -n "$$failed" ]; then echo "make: fuzz targets failed:$$failed (logs in $(FUZZ)/logs, inputs in $(FUZZ)/crashes)" >&2; exit 1; fi

# Installing (README, Install). `make install [PREFIX=/usr/local] [DESTDIR=]`: installed files name
# $(PREFIX)/bin/authctl, never DESTDIR, which only stages the tree (as a Debian package build does).
# Man pages and completions are generated from the command definitions by the release binary itself
# (`--experimental-dump-help`, `--generate-completion-script`); SOURCE_DATE_EPOCH, when set, dates
# the pages, so a package build is reproducible.
PREFIX ?= /usr/local
DESTDIR ?=
BIN = $(RELEASE_SCRATCH)/release

# PREFIX is written into the activation file and the unit as it is: D-Bus and systemd split Exec= at
# white space, systemd expands `$` and `%` in ExecStart=, and sed's replacement gives `|`, `&` and `\`
# a meaning. So it must be an absolute path of characters that all of them take literally; anything
# else stops install and uninstall before a file is touched. DESTDIR only stages the tree: it reaches
# the recipes through the environment ($$ROOT), so that any path works there.
PREFIX_CHARACTERS = a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P Q R S T U V W \
	X Y Z 0 1 2 3 4 5 6 7 8 9 / . _ - + @ ~ :
without = $(if $(2),$(call without,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
PREFIX_PROBLEM = $(or $(filter-out 1,$(words $(PREFIX))),$(if $(filter /%,$(PREFIX)),,relative), \
	$(call without,$(PREFIX),$(PREFIX_CHARACTERS)))
CHECK_PREFIX = $(if $(strip $(PREFIX_PROBLEM)),$(error PREFIX must be an absolute path of letters, digits and / . _ - + @ ~ : \
	(it is written unquoted into the D-Bus activation file and the systemd unit): "$(PREFIX)" is not))
INTERFACES = $(notdir $(wildcard data/io.github.authctl.*.xml))
# The files whose names do not depend on the command definitions; the man pages are listed by the
# generator, one per command.
INSTALLED = bin/authctl bin/docker-credential-authctl share/dbus-1/services/io.github.authctl.service \
	$(addprefix share/dbus-1/interfaces/,$(INTERFACES)) lib/systemd/user/authctl.service \
	share/bash-completion/completions/authctl share/zsh/site-functions/_authctl \
	share/fish/vendor_completions.d/authctl.fish

install-prerequisites: build manual-tool

# The generator names a subcommand's page `.Nm "authctl sign-in"`, which man-db's lexgrog cannot read, so
# `apropos` and `whatis` would not know the page: its NAME says the page's own name (`authctl.sign-in`), as
# `man` finds it, and its SYNOPSIS the command as typed.
export WHATIS_NAMES = /^\.Sh / { section = $$2 } \
	section == "NAME" && /^\.Nm "/ { typed = substr($$0, 5); print ".Nm " name; next } \
	section == "SYNOPSIS" && $$0 == ".Nm" && typed != "" && !done { print ".Nm " typed; done = 1; next } \
	{ print }

# bash, so that a generator that fails in a pipeline fails the install.
install uninstall: SHELL := /bin/bash
install uninstall: .SHELLFLAGS := -o pipefail -ec
install uninstall: export ROOT = $(DESTDIR)$(PREFIX)

install: install-prerequisites
	$(CHECK_PREFIX)
	@test -x $(BIN)/authctl && test -x $(BIN)/generate-manual || \
	    { echo "make: $(BIN)/authctl or $(BIN)/generate-manual is missing: run make install-prerequisites" >&2; exit 1; }
	install -D -m 0755 $(BIN)/authctl "$$ROOT/bin/authctl"
	ln -sfn authctl "$$ROOT/bin/docker-credential-authctl"
	sed 's|/usr/local/bin/authctl|$(PREFIX)/bin/authctl|' data/io.github.authctl.service | \
	    install -D -m 0644 /dev/stdin "$$ROOT/share/dbus-1/services/io.github.authctl.service"
	sed 's|/usr/local/bin/authctl|$(PREFIX)/bin/authctl|' data/authctl.service | \
	    install -D -m 0644 /dev/stdin "$$ROOT/lib/systemd/user/authctl.service"
	for xml in $(INTERFACES); do install -D -m 0644 "data/$$xml" "$$ROOT/share/dbus-1/interfaces/$$xml" || exit; done
	$(BIN)/authctl --generate-completion-script bash | \
	    install -D -m 0644 /dev/stdin "$$ROOT/share/bash-completion/completions/authctl"
	$(BIN)/authctl --generate-completion-script zsh | install -D -m 0644 /dev/stdin "$$ROOT/share/zsh/site-functions/_authctl"
	$(BIN)/authctl --generate-completion-script fish | \
	    install -D -m 0644 /dev/stdin "$$ROOT/share/fish/vendor_completions.d/authctl.fish"
	pages=$$(mktemp -d) && trap 'rm -rf "$$pages"' EXIT && \
	    $(BIN)/generate-manual --multi-page -o "$$pages" \
	        --date "$$(date -u $${SOURCE_DATE_EPOCH:+-d @$$SOURCE_DATE_EPOCH} +%Y-%m-%d)" $(BIN)/authctl && \
	    for page in "$$pages"/*.1; do \
	        name=$${page##*/} && name=$${name%.1} && \
	        awk -v name="$$name" "$$WHATIS_NAMES" "$$page" | install -D -m 0644 /dev/stdin "$$ROOT/share/man/man1/$$name.1" || exit; \
	    done

# The Debian package (README, Install): what `make install PREFIX=/usr` installs, staged in .build/deb/root,
# and what Debian's policy adds (.ci/build-deb), as .build/deb/authctl_VERSION_ARCH.deb.
DEB = .build/deb
deb: install-prerequisites
	rm -rf $(DEB)/root
	$(MAKE) -o build -o manual-tool install PREFIX=/usr DESTDIR="$(CURDIR)/$(DEB)/root"
	.ci/build-deb $(DEB)/root $(DEB)

# Removes exactly what `install` put there. The man pages are those the generator makes from the
# installed binary's command definitions, and the interfaces those installed (so both match what was
# installed, even if the sources have changed since); the binary goes last, so an interrupted uninstall can run again. Directories
# stay, empty or not, as they may have existed before.
uninstall: manual-tool
	$(CHECK_PREFIX)
	@test -x "$$ROOT/bin/authctl" || { echo "make: no authctl installed in $$ROOT/bin" >&2; exit 1; }
	pages=$$(mktemp -d) && trap 'rm -rf "$$pages"' EXIT && \
	    $(BIN)/generate-manual --multi-page -o "$$pages" "$$ROOT/bin/authctl" && \
	    for page in "$$pages"/*.1; do rm -f "$$ROOT/share/man/man1/$${page##*/}" || exit; done
	rm -f "$$ROOT"/share/dbus-1/interfaces/io.github.authctl.*.xml
	for file in $(filter-out bin/authctl share/dbus-1/interfaces/%,$(INSTALLED)) bin/authctl; do rm -f "$$ROOT/$$file" || exit; done

# The GDBus skeletons of `authctl serve` (Sources/CAuthctlBus), generated from the interface files in
# data/; InterfaceFileTests checks that they match.
.PHONY: interfaces
interfaces: deps
	cd Sources/CAuthctlBus && gdbus-codegen --interface-prefix io.github.authctl. --c-namespace Authctl \
	    --generate-c-code authctl-bus ../../data/io.github.authctl.AuthController1.xml ../../data/io.github.authctl.Session1.xml \
	    && mv authctl-bus.h include/
