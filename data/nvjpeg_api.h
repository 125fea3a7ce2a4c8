// The part of nvJPEG's C API that data/nvjpeg_decoder uses, declared here so that the build needs neither
// nvjpeg.h nor libnvjpeg: the library is opened at run time (dlopen) where the CUDA toolkit has it. Only
// facts are restated (values, layouts, signatures), from:
//   [H12] CUDA 12.6's include/nvjpeg.h (nvJPEG 12.3.3), as stored in github.com/zspace/system.cuda-12.6;
//   [D13] the nvJPEG 13.2 documentation (docs.nvidia.com/cuda/nvjpeg), sections 2.2 and 2.3;
//   [T13] compile-time checks of the CUDA 13 header's enumerators (NV12 = 8, YUY2 = 9 added after RGBI = 5),
//         the gpumod project's test/cuda/nvjpeg.cppm.
// The values below are unchanged between [H12] and [T13]. C enums are passed as int (their underlying type),
// opaque handles as pointers to incomplete structs, as the header declares them.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace nvjpeg {

// nvjpegStatus_t [H12], [T13].
enum Status : int {
  kSuccess = 0,
  kNotInitialized = 1,
  kInvalidParameter = 2,
  kBadJpeg = 3,
  kJpegNotSupported = 4,
  kAllocatorFailure = 5,
  kExecutionFailed = 6,
  kArchMismatch = 7,  // e.g. NVJPEG_BACKEND_HARDWARE on a GPU without JPEG engines
  kInternalError = 8,
  kImplementationNotSupported = 9,
  kIncompleteBitstream = 10,
};

// nvjpegBackend_t: NVJPEG_BACKEND_HARDWARE = 3 [H12], [D13 2.2.1], [T13]. The hardware engine takes baseline
// (single-scan) JPEGs with 1 or 3 channels, no 4:1:1 / 4:1:0 [D13 2.2.1].
constexpr int kBackendHardware = 3;

// nvjpegOutputFormat_t: NVJPEG_OUTPUT_Y = 2 (luma only, into channel[0]), NVJPEG_OUTPUT_RGBI = 5 (interleaved
// RGB into channel[0]; a gray JPEG's luma replicated) [H12], [D13 2.1.1], [T13].
constexpr int kOutputY = 2;
constexpr int kOutputRgbi = 5;

// nvjpegCreateEx flags: NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION = 1 << 5 = 32, interpolated chroma
// upsampling (nearer stb_image's, which interpolates too) [H12], [D13 2.2.17].
constexpr unsigned kFlagsDefault = 0;
constexpr unsigned kFlagsUpsamplingWithInterpolation = 32;

// nvjpegImage_t: NVJPEG_MAX_COMPONENT = 4 planes, each a pointer and a pitch in bytes [H12], [D13 2.2.9].
struct Image {
  unsigned char* channel[4];
  size_t pitch[4];
};
static_assert(sizeof(Image) == 64, "nvjpegImage_t is 4 pointers and 4 size_t");

struct HandleImpl;  // struct nvjpegHandle
struct StateImpl;   // struct nvjpegJpegState
struct StreamImpl;  // struct nvjpegJpegStream
using Handle = HandleImpl*;
using State = StateImpl*;
using Stream = StreamImpl*;

// The functions, by their exported names [H12]; the allocator arguments are passed as null (cudaMalloc and
// cudaHostAlloc are then used [D13 2.2.7, 2.2.10]).
using CreateExFn = int (*)(int backend, void* dev_allocator, void* pinned_allocator, unsigned flags, Handle* handle);
using DestroyFn = int (*)(Handle handle);
using JpegStateCreateFn = int (*)(Handle handle, State* state);
using JpegStateDestroyFn = int (*)(State state);
using JpegStreamCreateFn = int (*)(Handle handle, Stream* stream);
using JpegStreamDestroyFn = int (*)(Stream stream);
using JpegStreamParseHeaderFn = int (*)(Handle handle, const unsigned char* data, size_t length, Stream stream);
using JpegStreamGetFrameDimensionsFn = int (*)(Stream stream, unsigned* width, unsigned* height);
// *is_supported == 0 means supported ([H12]'s note on nvjpegDecoderJpegSupported; NVIDIA's batched samples).
using DecodeBatchedSupportedFn = int (*)(Handle handle, Stream stream, int* is_supported);
// To be called again whenever the batch size changes or a batch failed [D13 2.1.3.1].
using DecodeBatchedInitializeFn = int (*)(Handle handle, State state, int batch_size, int max_cpu_threads,
                                          int output_format);
using DecodeBatchedFn = int (*)(Handle handle, State state, const unsigned char* const* data, const size_t* lengths,
                                Image* destinations, cudaStream_t stream);

}  // namespace nvjpeg
