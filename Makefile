# Build everything with nvcc for one GPU architecture (Hopper by default; the GPU's own compute
# capability when one is visible; override with `make GPU_ARCH=80`). Builds on machines without a GPU.
#
#   make            programs and test suites
#   make test       installs what the machine lacks (scripts/setup.sh test), then the CPU suite (GoogleTest,
#                   the README's figures, the report tool; CLI errors, data safety and --help; the layering rule;
#                   reproduce_pylo.sh's plan and resume) and the GPU suite (GPU tests report themselves skipped
#                   without a GPU)
#   make clean

CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CXX       ?= g++
DETECTED_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')
GPU_ARCH  ?= $(if $(DETECTED_ARCH),$(DETECTED_ARCH),90)
BUILD     := build

# GoogleTest: the system's (Debian libgtest-dev), or a copy in .deps/gtest (scripts/setup.sh --vendor).
GTEST_DIR ?= $(if $(wildcard .deps/gtest/include),.deps/gtest,)
GTEST_INC := $(if $(GTEST_DIR),-I$(GTEST_DIR)/include,)
GTEST_LIB := $(if $(GTEST_DIR),-L$(GTEST_DIR)/lib,) -lgtest_main -lgtest -lpthread

# stb_image (Debian's libstb-dev), or a copy of its headers in $(STB_DIR)/include/stb (machines without apt:
# scripts/setup.sh --vendor).
STB_DIR   ?= $(if $(wildcard /usr/include/stb/stb_image.h),,.deps/stb)
COMMON_FLAGS := -O3 -I. -MMD -MP $(if $(STB_DIR),-I$(STB_DIR)/include,)
CXXFLAGS  += -std=c++17 $(COMMON_FLAGS) -Wall -Wextra -I$(CUDA_HOME)/include
GENCODE    = -gencode arch=compute_$(GPU_ARCH),code=[sm_$(GPU_ARCH),compute_$(GPU_ARCH)]
NVCCFLAGS += -std=c++17 $(COMMON_FLAGS) $(GENCODE) \
             --expt-relaxed-constexpr -Xcompiler -Wall -diag-suppress 177
# libnvjpeg is not linked: data/nvjpeg_decoder opens it at run time (dlopen), where the toolkit has it.
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Xlinker -rpath=$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lnccl -ldl
# cuDNN 9 (--attention cudnn, kernels/cudnn_attention): in the toolkit's folders here; elsewhere where
# CUDNN_HOME says (its include/ and lib64/ or lib/: NVIDIA's libcudnn9-dev-cuda-13 package, or pip's
# nvidia-cudnn-cu13 as .../site-packages/nvidia/cudnn) or in the system's folders. Linked by its versioned
# name, which pip's copy has alone.
CUDNN_HOME ?= $(CUDA_HOME)
CUDNN_LIBDIR := $(patsubst %/,%,$(firstword $(dir $(wildcard $(CUDNN_HOME)/lib64/libcudnn.so.9 $(CUDNN_HOME)/lib/libcudnn.so.9))))
NVCCFLAGS += -I$(CUDNN_HOME)/include
CUDA_LIBS += $(if $(CUDNN_LIBDIR),-L$(CUDNN_LIBDIR) -Xlinker -rpath=$(CUDNN_LIBDIR),) -l:libcudnn.so.9

# Plain C++ (no CUDA runtime): the CPU references and everything the CPU suite tests.
HOST_SRC := common/crc32.cpp common/atomic_file.cpp common/sections.cpp common/cli.cpp common/json.cpp \
            optim/lopt/lopt_common.cpp optim/lopt/lopt_weights.cpp optim/lopt/celo2_weights.cpp \
            optim/lopt/safetensors.cpp optim/lopt/msgpack.cpp \
            core/param_table.cpp core/shard_plan.cpp optim/step_cost.cpp optim/schedule.cpp optim/options.cpp core/chunks.cpp \
            optim/ref/ref_adamw.cpp optim/ref/ref_adafactor.cpp optim/ref/ref_muon.cpp optim/ref/ref_factory.cpp \
            optim/ref/ref_small_fc.cpp optim/ref/ref_velo.cpp optim/ref/ref_lo_tensor.cpp optim/ref/ref_state.cpp \
            optim/ref/ref_celo2.cpp optim/ref/ref_celo2_parts.cpp optim/ref/ref_elo_celo2.cpp optim/ref/ref_elo.cpp \
            models/model_tables.cpp models/block_table.cpp models/ref_ops.cpp models/ref_block.cpp models/gpt2_ref.cpp models/vit_ref.cpp data/token_shards.cpp data/gpt2_tokenizer.cpp \
            data/shard_writer.cpp data/tar_reader.cpp data/tar_writer.cpp data/wds_samples.cpp data/wds_stream.cpp \
            train/train_flags.cpp train/checkpoint_read.cpp train/process_group.cpp kernels/matmul_choices.cpp
# Images (train_vit): decoding (stb_image, implementation compiled once here), augmentations, Mixup/CutMix.
HOST_SRC += data/stb_image_impl.cpp data/stb_write_impl.cpp data/image_decode.cpp data/image_encode.cpp \
            data/rng.cpp data/resample.cpp data/augment.cpp data/randaugment.cpp data/mixup.cpp data/image_loader.cpp
# CUDA code: the arena, the optimizers and their kernels.
CUDA_SRC := common/device_random.cu core/arena.cu optim/optimizer.cu optim/grouped_optimizer.cu optim/grad_clip.cu optim/adamw.cu \
            optim/adafactor.cu optim/newton_schulz.cu optim/muon.cu optim/lopt/lo_core.cu optim/lopt/lo_global_clip.cu \
            optim/lopt/small_fc_lopt.cu optim/lopt/small_fc_fast.cu optim/lopt/velo.cu optim/lopt/velo_pass_c.cu \
            optim/lopt/celo2.cu optim/lopt/celo2_learned.cu optim/lopt/celo2_fast.cu kernels/gpt2_fp32_kernels.cu kernels/embedding.cu kernels/matmul_lt.cu kernels/layernorm.cu kernels/column_sums.cu \
            kernels/convert.cu kernels/crossentropy.cu kernels/gelu.cu kernels/reduce.cu kernels/flash_attention_fwd.cu kernels/flash_attention_fwd_sm90.cu kernels/flash_attention_bwd.cu kernels/flash_attention_bwd_sm90.cu kernels/cudnn_attention.cu kernels/patch_embed.cu kernels/dropout_kernels.cu kernels/op_timer.cu \
            models/transformer_block.cu models/vit_bf16.cu models/gpt2_fp32.cu models/gpt2_bf16.cu models/gpt2.cu data/prefetcher.cu data/image_prefetcher.cu \
            data/gpu_resize.cu data/nvjpeg_decoder.cu \
            train/checkpoint.cu train/program.cu train/train_log.cu train/step_runner.cu train/train_optimizer.cu train/nccl_comm.cu \
            train/data_parallel.cu train/step_trace.cu train/checkpointer.cu train/trainer.cu \
            train/peer_sum.cu kernels/add_arrays.cu

HOST_OBJ := $(HOST_SRC:%.cpp=$(BUILD)/%.o)
# The GPU resize rounds each product and sum as the CPU's resampler does (data/gpu_resize.h).
$(BUILD)/data/gpu_resize.o: NVCCFLAGS += -fmad=false
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
# The Hopper attention kernels' wgmma exists only on the arch-specific target sm_90a, whose code runs on
# compute capability 9.0 alone; other builds compile the file without it (kernels/flash_attention_sm90.h).
ifeq ($(GPU_ARCH),90)
SM90A_OBJ := $(BUILD)/kernels/flash_attention_fwd_sm90.o $(BUILD)/kernels/flash_attention_bwd_sm90.o
$(SM90A_OBJ): GENCODE = -gencode arch=compute_90a,code=sm_90a
$(SM90A_OBJ): NVCCFLAGS += -DLOPT_SM90A
endif

TEST_CPU_SRC := $(wildcard tests/cpu/*.cpp)
TEST_GPU_SRC := $(wildcard tests/gpu/*.cu)

PROGRAMS := bench_optim bench_gpt2_ops bench_grad_sum tokenize train_gpt2 train_vit report
TESTS    := $(BUILD)/test_cpu $(BUILD)/test_gpu
TOOLS    := $(BUILD)/peer_sum_probe $(BUILD)/make_bad_inputs $(BUILD)/optim_replay $(BUILD)/ref_replay $(BUILD)/gpt2_dump $(BUILD)/vit_dump $(BUILD)/make_imagenet_like $(BUILD)/bench_augment $(BUILD)/bench_image_loader

.PHONY: all test test-cpu test-gpu clean check-build check-gtest
all: $(PROGRAMS) $(TESTS) $(TOOLS)

# A missing stb, cuDNN or GoogleTest stops the build with one sentence (scripts/setup.sh installs the first
# and the last, and says where cuDNN comes from), not with a compiler error; the check runs once per make,
# before the first file that includes them.
STB_USERS := data/stb_image_impl data/stb_write_impl data/image_decode data/image_encode tools/fashion_mnist_to_wds
$(STB_USERS:%=$(BUILD)/%.o) $(BUILD)/kernels/cudnn_attention.o: | check-build
$(TEST_CPU_SRC:%.cpp=$(BUILD)/%.o) $(TEST_GPU_SRC:%.cu=$(BUILD)/%.o): | check-gtest
CHECK_ENV := CUDA_HOME=$(CUDA_HOME) CUDNN_HOME=$(CUDNN_HOME)
check-build:
	@$(CHECK_ENV) scripts/setup.sh --check
check-gtest:
	@$(CHECK_ENV) scripts/setup.sh --check test

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(GTEST_INC) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(GTEST_INC) -c $< -o $@

# Archives are rebuilt from scratch: `ar r` never drops members of files that no longer exist.
$(BUILD)/libhost.a: $(HOST_OBJ)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/liblopt_gpu.a: $(CUDA_OBJ)
	rm -f $@ && ar rcs $@ $^

bench_optim: $(BUILD)/bench/bench_optim.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

bench_gpt2_ops: $(BUILD)/bench/bench_gpt2_ops.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

bench_grad_sum: $(BUILD)/bench/bench_grad_sum.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

train_gpt2: $(BUILD)/train_gpt2.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

train_vit: $(BUILD)/train_vit.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

tokenize: $(BUILD)/tokenize.o $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@

# The report tool (tools/report/, host only): medians, markdown tables and SVG figures from JSON lines. Its
# library is also linked into the CPU suite (tests/cpu/test_report_*.cpp).
REPORT_SRC := $(filter-out tools/report/main.cpp,$(wildcard tools/report/*.cpp))
$(BUILD)/libreport.a: $(REPORT_SRC:%.cpp=$(BUILD)/%.o)
	rm -f $@ && ar rcs $@ $^
report: $(BUILD)/tools/report/main.o $(BUILD)/libreport.a $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@

# Fashion-MNIST as WebDataset shards; scripts/prepare_fashion_mnist.sh builds and runs it. Not part of `all`.
$(BUILD)/fashion_mnist_to_wds: $(BUILD)/tools/fashion_mnist_to_wds.o $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@

# Processes of the GPU suite's PeerSumGpu tests (tests/gpu/test_peer_sum_gpu.cu), which runs it beside test_gpu.
$(BUILD)/peer_sum_probe: $(BUILD)/tests/tools/peer_sum_probe.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

$(BUILD)/optim_replay: $(BUILD)/tests/tools/optim_replay.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

# Host only: the CPU references over the same files (pylo_crosscheck.py --cpu, no CUDA needed).
$(BUILD)/ref_replay: $(BUILD)/tests/tools/ref_replay.o $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@

$(BUILD)/gpt2_dump: $(BUILD)/tests/tools/gpt2_dump.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

# Host only: photos -> an ImageNet-like corpus (scripts/prepare_imagenet_like.sh runs it), and the
# single-core speed of decoding + augmenting images. (bench_image_loader links CUDA for --decoder nvjpeg.)
$(BUILD)/make_imagenet_like: $(BUILD)/tools/make_imagenet_like.o $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@ -lpthread

$(BUILD)/bench_augment: $(BUILD)/bench/bench_augment.o $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@

$(BUILD)/bench_image_loader: $(BUILD)/bench/bench_image_loader.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

$(BUILD)/vit_dump: $(BUILD)/tests/tools/vit_dump.o $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS)

# Host only: the crafted checkpoints and weight files of tests/cli/test_cli_errors.sh (test-cpu builds it).
$(BUILD)/make_bad_inputs: $(BUILD)/tests/cli/make_bad_inputs.o $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@
test-cpu: $(BUILD)/make_bad_inputs

$(BUILD)/test_cpu: $(TEST_CPU_SRC:%.cpp=$(BUILD)/%.o) $(BUILD)/libreport.a $(BUILD)/libhost.a
	$(CXX) $(CXXFLAGS) $^ -o $@ $(GTEST_LIB)

$(BUILD)/test_gpu: $(TEST_GPU_SRC:%.cu=$(BUILD)/%.o) $(BUILD)/liblopt_gpu.a $(BUILD)/libhost.a | $(BUILD)/peer_sum_probe
	$(NVCC) $(NVCCFLAGS) $^ -o $@ $(CUDA_LIBS) $(GTEST_LIB)

# The README's test command: set-up first, then a second make (it sees what set-up installed) builds in
# parallel, and a third runs the suites one after another (the CLI checks watch the temporary folder,
# which the GPU suite writes to).
test:
	@scripts/setup.sh test
	@$(MAKE) --no-print-directory $(BUILD)/test_cpu $(BUILD)/test_gpu $(PROGRAMS) $(DATA_SAFETY_TOOLS)
	@$(MAKE) --no-print-directory -j1 test-cpu test-gpu
# The data-safety script runs the tools too (tests/cli/test_data_safety.sh).
DATA_SAFETY_TOOLS := $(BUILD)/bench_image_loader $(BUILD)/ref_replay $(BUILD)/optim_replay $(BUILD)/vit_dump \
                     $(BUILD)/make_imagenet_like
test-cpu: $(BUILD)/test_cpu $(PROGRAMS) $(DATA_SAFETY_TOOLS)
	./$(BUILD)/test_cpu
	bash tests/cli/test_cli_errors.sh
	bash tests/cli/test_data_safety.sh
	bash tests/cli/test_help.sh
	bash tests/test_layers.sh
	bash tests/cli/test_reproduce.sh
test-gpu: $(BUILD)/test_gpu
	./$(BUILD)/test_gpu

clean:
	rm -rf $(BUILD) $(PROGRAMS)

# Fuzzing (tests/fuzz/): one libFuzzer target per parser of untrusted bytes, built with clang
# (ASan + UBSan) in build/fuzz/ from the host sources they need, apart from the normal build.
#   make fuzz FUZZ_SECONDS=N   runs every target N seconds (make -jJ runs J at once) from a copy of its
#                              seed corpus, then on until it has made FUZZ_MIN_RUNS runs (20,000) if it has
#                              not; fails on any finding (input saved in build/fuzz/findings/)
#   make fuzz FUZZ_SECONDS=1 FUZZ_MIN_RUNS=1000000   the offline run of docs/hardening.md
#   make fuzz-seeds            rewrites the committed seeds (tests/fuzz/corpus/) with tests/fuzz/make_seeds.cpp
FUZZ_CXX     ?= $(if $(shell command -v clang++-14 2>/dev/null),clang++-14,clang++)
FUZZ_SECONDS ?= 20
FUZZ_MIN_RUNS ?= 20000
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_FLAGS   := -std=c++17 -O1 -g -I. -MMD -MP -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_TARGETS := safetensors msgpack sections token_shards tokenizer_ranks tokenizer_encode json cli options tar image resume
FUZZ_HOST_SRC := common/crc32.cpp common/atomic_file.cpp common/sections.cpp common/cli.cpp common/json.cpp core/param_table.cpp \
                 core/chunks.cpp \
                 optim/options.cpp optim/lopt/lopt_common.cpp optim/lopt/lopt_weights.cpp optim/lopt/celo2_weights.cpp \
                 optim/lopt/safetensors.cpp \
                 optim/lopt/msgpack.cpp data/token_shards.cpp data/gpt2_tokenizer.cpp data/tar_reader.cpp data/tar_writer.cpp \
                 data/wds_samples.cpp data/wds_stream.cpp
FUZZ_HOST_SRC += data/stb_image_impl.cpp data/stb_write_impl.cpp data/image_decode.cpp data/image_encode.cpp \
                 data/rng.cpp data/resample.cpp data/augment.cpp data/randaugment.cpp data/mixup.cpp data/image_loader.cpp \
                 train/checkpoint_read.cpp
FUZZ_HOST_OBJ := $(FUZZ_HOST_SRC:%.cpp=$(FUZZ_DIR)/obj/%.o)
# The checkpoint reader's header declares the GPU side too (CUDA's headers, no CUDA code).
$(FUZZ_DIR)/obj/train/checkpoint_read.o $(FUZZ_DIR)/obj/tests/fuzz/fuzz_resume.o: FUZZ_FLAGS += -I$(CUDA_HOME)/include
# stb's own code runs under ASan only: UBSan stops at its harmless signed overflows and shifts.
$(FUZZ_DIR)/obj/data/stb_image_impl.o $(FUZZ_DIR)/obj/data/stb_write_impl.o: FUZZ_FLAGS += -fno-sanitize=undefined
# Longest input per target: a few seeds' worth (shards and ranks heads are the largest seeds).
FUZZ_MAX_LEN_safetensors := 4096
FUZZ_MAX_LEN_msgpack := 4096
FUZZ_MAX_LEN_sections := 4096
FUZZ_MAX_LEN_token_shards := 4096
FUZZ_MAX_LEN_tokenizer_ranks := 4096
FUZZ_MAX_LEN_tokenizer_encode := 8192
FUZZ_MAX_LEN_json := 4096
FUZZ_MAX_LEN_cli := 1024
FUZZ_MAX_LEN_options := 1024
FUZZ_MAX_LEN_tar := 16384
FUZZ_MAX_LEN_image := 4096
FUZZ_MAX_LEN_resume := 4096

.PHONY: fuzz fuzz-build fuzz-seeds check-fuzz $(FUZZ_TARGETS:%=fuzz-%)
.SECONDARY: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o) $(FUZZ_DIR)/obj/tests/fuzz/make_seeds.o
$(FUZZ_DIR)/obj/%.o: %.cpp | check-fuzz
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_HOST_OBJ)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@

$(FUZZ_DIR)/make_seeds: $(FUZZ_DIR)/obj/tests/fuzz/make_seeds.o $(FUZZ_HOST_OBJ)
	$(FUZZ_CXX) $(FUZZ_FLAGS) $^ -o $@

fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
check-fuzz:
	@scripts/setup.sh --check fuzz

fuzz-seeds: $(FUZZ_DIR)/make_seeds
	./$(FUZZ_DIR)/make_seeds tests/fuzz/corpus

fuzz: $(FUZZ_TARGETS:%=fuzz-%)

# One target: a scratch copy of the seeds (the committed corpus stays as it is), the log in build/fuzz/logs/.
$(FUZZ_TARGETS:%=fuzz-%): fuzz-%: $(FUZZ_DIR)/fuzz_%
	@rm -rf $(FUZZ_DIR)/corpus/$* $(FUZZ_DIR)/tmp/$* $(FUZZ_DIR)/findings/$*-*
	@mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/tmp/$* $(FUZZ_DIR)/logs $(FUZZ_DIR)/findings
	@cp -r tests/fuzz/corpus/$* $(FUZZ_DIR)/corpus/$*
	@run() { TMPDIR=$(abspath $(FUZZ_DIR)/tmp/$*) ./$(FUZZ_DIR)/fuzz_$* $(FUZZ_DIR)/corpus/$* "$$@" \
	      -max_len=$(FUZZ_MAX_LEN_$*) -rss_limit_mb=2048 -timeout=10 -close_fd_mask=1 -print_final_stats=1 \
	      -artifact_prefix=$(FUZZ_DIR)/findings/$*- >> $(FUZZ_DIR)/logs/$*.log 2>&1; }; \
	runs() { grep -o 'number_of_executed_units: *[0-9]*' $(FUZZ_DIR)/logs/$*.log | awk '{ n += $$2 } END { print n + 0 }'; }; \
	: > $(FUZZ_DIR)/logs/$*.log; start=$$(date +%s); \
	if run -max_total_time=$(FUZZ_SECONDS) && \
	   { [ "$$(runs)" -ge $(FUZZ_MIN_RUNS) ] || run -runs=$$(( $(FUZZ_MIN_RUNS) - $$(runs) )); }; then \
	  echo "fuzz $*: $$(runs) runs in $$(( $$(date +%s) - start )) s, no findings"; \
	else \
	  tail -n 40 $(FUZZ_DIR)/logs/$*.log; \
	  echo "fuzz $*: FINDING (log $(FUZZ_DIR)/logs/$*.log; reproduce: ./$(FUZZ_DIR)/fuzz_$* $(FUZZ_DIR)/findings/$*-*)"; exit 1; \
	fi

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
