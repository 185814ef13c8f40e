# gpuscope: Meson + Ninja behind two commands.
#   make run    set up, build, run the main job (on nvml-sim when no NVIDIA driver is present)
#   make test   set up, build with -Werror, run every test, then the unit tests under ASan+UBSan
BUILD ?= build
ASAN_BUILD ?= build-asan
MESON_FLAGS ?= -Dwerror=true

.PHONY: all deps build test test-asan run bench clean

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

# The unit tests run twice: once in the normal build with the end-to-end tests, and once
# under AddressSanitizer + UndefinedBehaviorSanitizer. The last line counts both passes.
test: deps build $(ASAN_BUILD)/build.ninja
	-meson test -C $(BUILD) --print-errorlogs --num-processes 2
	ninja -C $(ASAN_BUILD)
	-ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2
	@/usr/bin/python3 scripts/test-summary.py $(BUILD) $(ASAN_BUILD)

run: deps build
	@./scripts/run.sh $(BUILD)

bench: deps build
	@./bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
