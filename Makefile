# gpuscope: Meson + Ninja behind two commands.
#   make run    set up, build, run the main job (on nvml-sim when no NVIDIA driver is present)
#   make test   set up, build with -Werror, run every test, then the unit tests under ASan+UBSan,
#               the agent's tests under ThreadSanitizer and each libFuzzer target for FUZZ_SECONDS
#   make fuzz   only the libFuzzer targets (clang, in build-fuzz); FUZZ_SECONDS=60 for longer runs
#   make install, make uninstall   PREFIX=/usr/local DESTDIR= SYSCONFDIR=/etc NVIDIA_SMI_LINK=
#               (docs/install.md)
#   make deb    the Debian package, DEB_OUT/gpuscope_VERSION-REV_ARCH.deb, checked by lintian
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
MESON_FLAGS ?= -Dwerror=true

.PHONY: all deps build test test-asan test-tsan run bench fuzz install uninstall deb clean

all: build

# deps-abi.sh fetches NVIDIA's nvml.h from Debian non-free for tests/abi only (the one use of
# non-free in gpuscope); it never fails the build, and the ABI test reports a skip without it.
deps:
	@./scripts/deps.sh
	@./scripts/deps-abi.sh || true

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_FLAGS)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) $(MESON_FLAGS) -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug

# ThreadSanitizer: the agent's unit tests and the end-to-end tests that drive its threads
# (suite 'tsan', tests/meson.build); only what they need is built. setarch -R: without address
# randomisation, so gcc 12's TSan runtime also starts on kernels with 32 bits of mmap
# randomisation (vm.mmap_rnd_bits), where it stops with "unexpected memory mapping".
$(TSAN_BUILD)/build.ninja:
	meson setup $(TSAN_BUILD) $(MESON_FLAGS) -Db_sanitize=thread -Db_lundef=false

test-tsan: $(TSAN_BUILD)/build.ninja
	ninja -C $(TSAN_BUILD) tsan-tests
	rm -f $(TSAN_BUILD)/tsan-report.*
	-setarch "$$(uname -m)" -R meson test -C $(TSAN_BUILD) --no-rebuild --suite tsan \
	  --print-errorlogs --num-processes 2 --timeout-multiplier 3

# The unit tests run twice: once in the normal build with the end-to-end tests, and once
# under AddressSanitizer + UndefinedBehaviorSanitizer; the agent's under ThreadSanitizer
# (test-tsan). Then every fuzz target runs for FUZZ_SECONDS (scripts/fuzz.sh: one TAP line each
# in $(FUZZ_BUILD)/fuzz-results.tap). The last line counts all four.
test: deps build $(ASAN_BUILD)/build.ninja $(TSAN_BUILD)/build.ninja
	-meson test -C $(BUILD) --print-errorlogs --num-processes 2
	ninja -C $(ASAN_BUILD)
	-ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2
	@$(MAKE) --no-print-directory test-tsan
	-@FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh $(FUZZ_BUILD)
	@/usr/bin/python3 scripts/test-summary.py $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) \
	  $(FUZZ_BUILD)/fuzz-results.tap

# libFuzzer targets (fuzz/): built with clang in $(FUZZ_BUILD), each run from its seed corpus
# with new inputs kept in a temporary directory; fails on any crash, leak, sanitizer report or
# hang.
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh $(FUZZ_BUILD)

run: deps build
	@./scripts/run.sh $(BUILD) $(ARGS)

bench: deps build
	@./bench/run.sh $(BUILD)

# make install: the binaries, the Python package (and a gpuscope.pth in the site directory of
# PREFIX that finds it), the systemd unit, the man pages (pandoc), agent.conf in SYSCONFDIR
# when there is none, and a manifest that make uninstall removes exactly (scripts/install.py,
# docs/install.md). BUILD is reconfigured for PREFIX, SYSCONFDIR and NVIDIA_SMI_LINK=1 (the
# nvidia-smi -> gpuscope link) when they differ from its settings.
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
DESTDIR ?=
NVIDIA_SMI_LINK ?=

install: build
	/usr/bin/python3 scripts/install.py install $(BUILD) --prefix "$(PREFIX)" \
	  --sysconfdir "$(SYSCONFDIR)" --destdir "$(DESTDIR)" $(if $(NVIDIA_SMI_LINK),--nvidia-smi-link)

uninstall:
	/usr/bin/python3 scripts/install.py uninstall --prefix "$(PREFIX)" --destdir "$(DESTDIR)"

# make deb: debian/ with debhelper (docs/install.md, DEBIAN PACKAGE), built in DEB_BUILD
# (configured once with Debian's flags and prefix /usr, then reused) from the install step
# above (make install DESTDIR=debian/gpuscope PREFIX=/usr SYSCONFDIR=/etc); the .deb goes to
# DEB_OUT, then lintian checks it (errors and warnings fail; debian/gpuscope.lintian-overrides
# says why each override is there).
DEB_BUILD ?= build-deb
DEB_OUT ?= dist
# debhelper builds with one job unless told; make deb uses every core.
deb: export DEB_BUILD_OPTIONS ?= parallel=$(shell nproc)

deb:
	@command -v dh >/dev/null && command -v lintian >/dev/null || \
	  { echo "gpuscope: make deb needs debhelper and lintian (make deps installs them)" >&2; exit 1; }
	dpkg-checkbuilddeps
	mkdir -p $(DEB_OUT)
	rm -f debian/debhelper-build-stamp   # so the build steps run (and configure DEB_BUILD if gone)
	debian/rules binary DEB_BUILD_DIR=$(abspath $(DEB_BUILD)) DEB_OUT=$(abspath $(DEB_OUT))
	lintian --fail-on error,warning $(DEB_OUT)/gpuscope_$$(dpkg-parsechangelog -SVersion)_$$(dpkg-architecture -qDEB_HOST_ARCH).deb

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) $(DEB_BUILD)
	rm -rf debian/gpuscope debian/.debhelper debian/files debian/*.substvars \
	  debian/debhelper-build-stamp
