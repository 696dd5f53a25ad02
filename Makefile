# unpad — one plain Makefile.
#   make            CPU parts always; the kernels and bin/unpad-train where nvcc (and cuBLASLt) are found
#                   (it says ✓/✗ for each dependency)
#   make demo       the main job on the built-in default data
#   make test       Check suites (CPU); make test-asan: the same under AddressSanitizer + UBSan
#   make fuzz       libFuzzer harnesses of the readers (clang); make fuzz-ci: each for FUZZ_TIME s
#   make gpu        GPU tests and trainer; make test-gpu / make bench on a machine with an NVIDIA GPU
#                   (also the fp32 build: bin/unpad-train-fp32 and bin/test_*-fp32, see PRECISION)
# Opt-outs: NO_CUDA=1, NO_NCCL=1, NO_MPI=1. DEPS=dir points at unpacked Debian packages (GSL, Check).
# Layout: sim/*.c -> libunpad; sim/cli/*.c -> bin/unpad; kernels/ref/*.c -> libunpad_ref (the kernels'
# plain-C references, linked only by the tests that compare against them);
# kernels/*.cu -> libunpad_kernels; exec/*.c -> libunpad_exec (CPU: shards, tokenizer);
# exec/gpu/*.{c,cu} -> bin/unpad-train; tests/check_*.c -> build/tests/check_all;
# tests/gpu/test_*.{c,cu} -> bin/test-gpu-*; bench/bench_*.{c,cu} -> bin/bench-*.
# PRECISION=fp32 builds the GPU side with fp32 activations and weights (kernels/common.h: floatX)
# into $(BUILD)/fp32, with kernels/fmha_fp32.cu for the tensor-core FMHA, binaries named *-fp32.

CC      ?= cc
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda) /usr)
NVCC    ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard $(CUDA_HOME)/bin/nvcc))
CUDA_ARCH ?= sm_90
BUILD   ?= build
PRECISION ?= bf16
SAN     ?=
OPT     ?= -O2

ifneq ($(DEPS),)
DEPS_INC := -I$(DEPS)/usr/include
DEPS_LIB := -L$(DEPS)/usr/lib/x86_64-linux-gnu -Wl,-rpath,$(abspath $(DEPS))/usr/lib/x86_64-linux-gnu
endif

# ---- probes -------------------------------------------------------------------------------------
have = $(if $(1),✓,✗)
HAVE_GSL   := $(or $(shell pkg-config --exists gsl 2>/dev/null && echo 1),$(if $(DEPS),$(wildcard $(DEPS)/usr/include/gsl/gsl_rng.h)))
HAVE_CHECK := $(or $(shell pkg-config --exists check 2>/dev/null && echo 1),$(if $(DEPS),$(wildcard $(DEPS)/usr/include/check.h)))
HAVE_GNUPLOT := $(shell command -v gnuplot 2>/dev/null)
ifeq ($(NO_CUDA),)
HAVE_NVCC  := $(NVCC)
endif
HAVE_CUBLASLT := $(if $(HAVE_NVCC),$(wildcard $(CUDA_HOME)/include/cublasLt.h))
ifeq ($(NO_NCCL),)
HAVE_NCCL  := $(if $(HAVE_NVCC),$(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h $(NCCL_HOME)/include/nccl.h)))
endif
ifeq ($(NO_MPI),)
HAVE_MPI   := $(shell command -v mpicc 2>/dev/null)
endif

GSL_CFLAGS  := $(shell pkg-config --cflags gsl 2>/dev/null) $(DEPS_INC)
GSL_LIBS    := $(or $(shell pkg-config --libs gsl 2>/dev/null),-lgsl -lgslcblas -lm) $(DEPS_LIB)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS  := $(or $(shell pkg-config --libs check 2>/dev/null),-lcheck -lsubunit -lrt -lpthread -lm)
ifneq ($(DEPS),)
ifeq ($(shell pkg-config --exists gsl 2>/dev/null && echo 1),)
# Unpacked packages travel without their symbolic links: link their static archives instead.
DEPS_A     := $(DEPS)/usr/lib/x86_64-linux-gnu
GSL_LIBS   := $(DEPS_A)/libgsl.a $(DEPS_A)/libgslcblas.a -lm
CHECK_LIBS := $(DEPS_A)/libcheck.a $(DEPS_A)/libsubunit.a -lrt -lpthread -lm
endif
endif

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) -MMD -MP $(SAN) -Isim -Ikernels -Iexec $(GSL_CFLAGS)
LDLIBS  := $(GSL_LIBS) -lm
LDFLAGS += $(SAN)

NVCCFLAGS ?= -O3 -lineinfo
ARCH_FLAGS = -arch=$(CUDA_ARCH)
NVCCFLAGS += $(ARCH_FLAGS) -std=c++17 -Xcompiler -Wall,-Wextra,-Wno-unused-parameter -MMD -MP \
             -Isim -Ikernels -Iexec $(DEPS_INC) --expt-relaxed-constexpr
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Xlinker -rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart
ifneq ($(HAVE_NCCL),)
CUDA_LIBS += -lnccl
GPU_DEFS  += -DUNPAD_HAVE_NCCL=1
endif
# The build's identity in the trainer's summary (git describe of the source tree); the objects that
# print it depend on a stamp rewritten only when it changes.
UNPAD_BUILD_ID := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
GPU_DEFS  += -DUNPAD_BUILD='"$(UNPAD_BUILD_ID)"'
ifneq ($(HAVE_MPI),)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
GPU_DEFS   += -DUNPAD_HAVE_MPI=1
endif

# ---- sources ------------------------------------------------------------------------------------
SIM_SRC   := $(wildcard sim/*.c)
CLI_SRC   := $(wildcard sim/cli/*.c)
REF_SRC   := $(wildcard kernels/ref/*.c)
EXEC_SRC  := $(filter-out exec/main_%,$(wildcard exec/*.c))
ifeq ($(PRECISION),fp32)
GPU_DEFS  += -DUNPAD_FP32=1
GBUILD    := $(BUILD)/fp32
XS        := -fp32
KERN_SRC  := $(filter-out kernels/fmha.cu,$(wildcard kernels/*.cu))
else ifeq ($(PRECISION),bf16)
GBUILD    := $(BUILD)
XS        :=
KERN_SRC  := $(filter-out kernels/fmha_fp32.cu,$(wildcard kernels/*.cu))
else
$(error PRECISION=$(PRECISION): expected bf16 or fp32)
endif
TRAIN_C   := $(filter-out exec/gpu/main_%,$(wildcard exec/gpu/*.c))
TRAIN_CU  := $(wildcard exec/gpu/*.cu)
CHECK_SRC := $(wildcard tests/check_*.c)
GPU_TESTS := $(patsubst tests/gpu/%.cu,bin/%$(XS),$(wildcard tests/gpu/test_*.cu))
BENCH_GPU := $(patsubst bench/%.cu,bin/%,$(wildcard bench/bench_*.cu))
BENCH_CPU := $(patsubst bench/%.c,bin/%,$(wildcard bench/bench_*.c))

o = $(patsubst %.c,$(BUILD)/%.o,$(1))
LIB      := $(BUILD)/libunpad.a
REFLIB   := $(BUILD)/libunpad_ref.a
EXECLIB  := $(BUILD)/libunpad_exec.a
KERNLIB  := $(GBUILD)/libunpad_kernels.a

CPU_BINS := bin/unpad $(if $(wildcard exec/main_data.c),bin/unpad-data)
GPU_BINS := $(if $(wildcard exec/gpu/main_train.c),bin/unpad-train$(XS))

.PHONY: all cpu gpu kernels probe demo check-readme report test test-run test-asan test-gpu bench bench-kernels \
        bench-cpu deps clean FORCE fuzz fuzz-ci
all: probe cpu $(if $(HAVE_NVCC),kernels) $(if $(HAVE_CUBLASLT),$(GPU_BINS))

probe:
	@echo "unpad build: nvcc $(call have,$(HAVE_NVCC))  cuBLASLt $(call have,$(HAVE_CUBLASLT))  NCCL $(call have,$(HAVE_NCCL))  MPI $(call have,$(HAVE_MPI))  GSL $(call have,$(HAVE_GSL))  Check $(call have,$(HAVE_CHECK))  gnuplot $(call have,$(HAVE_GNUPLOT))"
	@$(if $(HAVE_GSL),,echo "  GSL missing: run 'make deps' or 'apt-get install libgsl-dev'"; exit 1)

cpu: $(CPU_BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(call o,$(SIM_SRC))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(REFLIB): $(call o,$(REF_SRC))
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

$(EXECLIB): $(call o,$(EXEC_SRC)) | $(BUILD)/.dir
	$(AR) rcs $@ $(call o,$(EXEC_SRC))

$(BUILD)/.dir:
	@mkdir -p $(BUILD) && touch $@

$(BUILD)/cli/commands.h: $(CLI_SRC) | $(BUILD)/.dir
	@mkdir -p $(dir $@)
	@for f in $(sort $(filter sim/cli/cmd_%,$(CLI_SRC))); do n=$${f#sim/cli/cmd_}; echo "COMMAND($${n%.c})"; done > $@.tmp && \
	  (cmp -s $@.tmp $@ || mv $@.tmp $@); rm -f $@.tmp

# The build's git commit for provenance (sim/version.h): rewritten only when it changes, so
# version.o alone is recompiled; "-dirty" marks uncommitted changes, "unknown" outside git.
$(BUILD)/commit.txt: FORCE | $(BUILD)/.dir
	@c=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown); \
	  if [ "$$c" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then c="$$c-dirty"; fi; \
	  echo "$$c" > $@.tmp; cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/sim/version.o: sim/version.c $(BUILD)/commit.txt
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DUNPAD_COMMIT="\"$$(cat $(BUILD)/commit.txt)\"" -c $< -o $@

FORCE:

$(BUILD)/sim/cli/main.o: sim/cli/main.c $(BUILD)/cli/commands.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD)/cli -c $< -o $@

bin/unpad: $(call o,$(CLI_SRC)) $(LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The CLI built with this BUILD's flags (test-asan runs the sanitized one from the tests).
$(BUILD)/bin/unpad: $(call o,$(CLI_SRC)) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

bin/unpad-data: $(BUILD)/exec/main_data.o $(EXECLIB) $(LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/bin/unpad-data: $(BUILD)/exec/main_data.o $(EXECLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# ---- GPU ----------------------------------------------------------------------------------------
$(GBUILD)/cu/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(GPU_DEFS) -c $< -o $@

# The FMHA runs on wgmma, which only the sm_90a target (H100/H200) has; everything else stays sm_90.
$(GBUILD)/cu/kernels/fmha.o: ARCH_FLAGS = -gencode=arch=compute_90a,code=sm_90a

$(GBUILD)/gpuc/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPU_DEFS) $(MPI_CFLAGS) -I$(CUDA_HOME)/include -c $< -o $@

$(KERNLIB): $(patsubst %.cu,$(GBUILD)/cu/%.o,$(KERN_SRC)) | $(BUILD)/.dir
	@rm -f $@
	$(AR) rcs $@ $(patsubst %.cu,$(GBUILD)/cu/%.o,$(KERN_SRC))

kernels: $(if $(KERN_SRC),$(KERNLIB))

$(BUILD)/build-id: FORCE | $(BUILD)/.dir
	@echo '$(UNPAD_BUILD_ID)' | cmp -s - $@ || echo '$(UNPAD_BUILD_ID)' > $@
$(GBUILD)/gpuc/exec/gpu/train_setup.o $(GBUILD)/gpuc/exec/gpu/train_report.o: $(BUILD)/build-id
FORCE:

TRAIN_OBJ := $(patsubst %.c,$(GBUILD)/gpuc/%.o,$(TRAIN_C)) $(patsubst %.cu,$(GBUILD)/cu/%.o,$(TRAIN_CU))
bin/unpad-train$(XS): $(GBUILD)/gpuc/exec/gpu/main_train.o $(TRAIN_OBJ) $(KERNLIB) $(EXECLIB) $(LIB)
	@mkdir -p bin
	$(NVCC) -arch=$(CUDA_ARCH) $^ -o $@ $(DEPS_LIB:-Wl,%=-Xlinker %) $(CUDA_LIBS) $(MPI_LIBS) $(GSL_LIBS:-Wl,%=-Xlinker %) -lm

bin/test_%$(XS): tests/gpu/test_%.cu $(TRAIN_OBJ) $(KERNLIB) $(EXECLIB) $(REFLIB) $(LIB)
	@mkdir -p bin $(GBUILD)/cu/tests/gpu
	$(NVCC) $(NVCCFLAGS) -MF $(GBUILD)/cu/tests/gpu/$(@F).d $(GPU_DEFS) $(filter %.cu %.o %.a,$^) -o $@ $(CUDA_LIBS) $(MPI_LIBS) $(subst -Wl$(,),-Xlinker ,$(GSL_LIBS)) -lm

bin/bench_%: bench/bench_%.cu $(TRAIN_OBJ) $(KERNLIB) $(EXECLIB) $(LIB)
	@mkdir -p bin $(BUILD)/cu/bench
	$(NVCC) $(NVCCFLAGS) -MF $(BUILD)/cu/bench/$(@F).d $(GPU_DEFS) $(filter %.cu %.o %.a,$^) -o $@ $(CUDA_LIBS) $(MPI_LIBS) $(subst -Wl$(,),-Xlinker ,$(GSL_LIBS)) -lm

bin/bench_%: bench/bench_%.c $(EXECLIB) $(LIB)
	@mkdir -p bin
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

, := ,
gpu: probe cpu
	@$(if $(HAVE_NVCC),,echo "nvcc not found: GPU targets skipped"; exit 1)
	$(MAKE) kernels $(GPU_BINS) $(GPU_TESTS) $(BENCH_GPU)
	$(MAKE) PRECISION=fp32 kernels bin/unpad-train-fp32 $(patsubst %,%-fp32,$(GPU_TESTS))

# Runs on a machine with an NVIDIA GPU: every GPU test binary, then the PyTorch comparisons.
test-gpu: gpu
	@bash scripts/test-gpu.sh

bench: cpu $(BENCH_CPU)
	@bash scripts/bench.sh

bench-cpu: cpu $(BENCH_CPU)
	@for b in $(BENCH_CPU); do ./$$b || exit 1; done

bench-kernels: gpu
	@bash scripts/bench.sh kernels fmha

# ---- tests --------------------------------------------------------------------------------------
$(BUILD)/tests/suites.h: $(CHECK_SRC) | $(BUILD)/.dir
	@mkdir -p $(dir $@)
	@for f in $(sort $(CHECK_SRC)); do n=$${f#tests/check_}; echo "SUITE($${n%.c})"; done > $@.tmp && \
	  (cmp -s $@.tmp $@ || mv $@.tmp $@); rm -f $@.tmp

$(BUILD)/tests/runner.o: tests/runner.c $(BUILD)/tests/suites.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -I$(BUILD)/tests -c $< -o $@

$(BUILD)/tests/check_%.o: tests/check_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -c $< -o $@

$(BUILD)/tests/check_all: $(BUILD)/tests/runner.o $(call o,$(CHECK_SRC)) $(EXECLIB) $(REFLIB) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)

# `make test` installs what is missing first, then builds and runs in a fresh make (probes re-read).
# Only what the CPU tests link is built (no CUDA), in parallel over the machine's cores.
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) test-run

test-run: probe cpu $(BUILD)/tests/check_all
	@$(if $(HAVE_CHECK),,echo "Check missing: run 'make deps' or 'apt-get install check'"; exit 1)
	UNPAD_HOME=$(CURDIR) UNPAD_BIN=$(CURDIR)/bin/unpad UNPAD_DATA_BIN=$(CURDIR)/bin/unpad-data CK_DEFAULT_TIMEOUT=120 $(BUILD)/tests/check_all

test-asan: deps
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build/asan OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  build/asan/tests/check_all build/asan/bin/unpad build/asan/bin/unpad-data
	UNPAD_HOME=$(CURDIR) UNPAD_BIN=$(CURDIR)/build/asan/bin/unpad UNPAD_DATA_BIN=$(CURDIR)/build/asan/bin/unpad-data CK_FORK=no ASAN_OPTIONS=detect_leaks=1 build/asan/tests/check_all

demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) cpu
	@bash scripts/demo.sh

# Every `bin/unpad` command of the README run as it is written, exiting as the README shows.
check-readme: deps
	@$(MAKE) --no-print-directory -j$(JOBS) cpu
	@bash scripts/readme-check.sh

# Calibration report: calibrate, validate on held-out traces, plot, cross-hardware.
report: cpu
	@bash scripts/report.sh $(REPORT_ARGS)

deps:
	@bash scripts/ensure-deps.sh

# ---- fuzzing ------------------------------------------------------------------------------------
# One libFuzzer harness per reader (tests/fuzz/fuzz_<reader>.c), linked with the library built by
# clang with coverage, ASan and UBSan into $(BUILD)/fuzz; seeds in tests/fuzz/corpus/<reader>/.
# `make fuzz-ci` runs each for FUZZ_TIME seconds and fails on any finding (tests/fuzz/run.sh).
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 20
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) $(FUZZ_SAN) -Isim -Iexec -Ikernels $(GSL_CFLAGS)
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS  := $(patsubst tests/fuzz/%.c,bin/%,$(FUZZ_SRC))
FUZZ_OBJ   := $(patsubst %.c,$(BUILD)/fuzz/%.o,$(SIM_SRC) $(EXEC_SRC))

$(BUILD)/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

bin/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_OBJ)
	@mkdir -p bin
	@echo "$(FUZZ_CC) ... -fsanitize=fuzzer $< -o $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -Itests/fuzz -fsanitize=fuzzer $< $(FUZZ_OBJ) -o $@ $(GSL_LIBS) -lm -lpthread

.SECONDARY: $(FUZZ_OBJ)

fuzz:
	@bash scripts/ensure-deps.sh fuzz
	@$(MAKE) --no-print-directory -j$(JOBS) $(FUZZ_BINS)

fuzz-ci: fuzz
	@bash tests/fuzz/run.sh $(FUZZ_TIME) $(FUZZ_BINS)

clean:
	rm -rf build bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
