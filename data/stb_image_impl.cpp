// stb_image's implementation, compiled once for the whole program (libhost.a); every other file includes
// <stb/stb_image.h> for the declarations only. JPEG and PNG only: the other formats stb knows (TGA, PSD,
// HDR, ...) are not in our data sets, and TGA has no signature, so random bytes could pass as one.
// The size limits are DecodeLimits's (checked from the header first, with a clear reason), not stb's (2^24).
// stb's failure reason is thread-local (C++11 thread_local), so decoding threads do not mix their reasons.
// stb's asserts check invariants that corrupt files break (a bad Huffman code, tests/fuzz/fuzz_image.cpp):
// with assert() a bad image would abort the program instead of failing to decode.
// Every allocation goes through a per-thread limit (data/stb_alloc.h).
#include <cstdlib>

#include "data/stb_alloc.h"

namespace {
thread_local StbAllocLimit t_limit;
}  // namespace

ScopedStbAllocLimit::ScopedStbAllocLimit(const StbAllocLimit& limit) : saved_(t_limit) { t_limit = limit; }
ScopedStbAllocLimit::~ScopedStbAllocLimit() { t_limit = saved_; }
void* stb_limited_malloc(size_t n) { return n > t_limit.malloc_bytes ? nullptr : std::malloc(n); }
void* stb_limited_realloc(void* p, size_t n) { return n > t_limit.realloc_bytes ? nullptr : std::realloc(p, n); }

#define STBI_MALLOC(n) stb_limited_malloc(n)
#define STBI_REALLOC(p, n) stb_limited_realloc(p, n)
#define STBI_FREE(p) std::free(p)
#define STBI_ASSERT(x) ((void)0)
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#include <stb/stb_image.h>
