// A per-thread cap on the memory stb_image may take while it decodes one image, set by
// data/image_decode.cpp from the header's size and the file's: a corrupt stream cannot make stb grow a
// buffer far past what the image needs (a 76-byte PNG whose deflate stream reads zeros past its end made
// stb 2.27 reallocate its output up to 2 GiB; an IDAT chunk claiming 2 GB was allocated before it was read).
// A refused allocation is stb's "out of memory", so the decode fails with a reason, as for any bad file.
#pragma once
#include <cstddef>
#include <cstdint>

struct StbAllocLimit {
  size_t malloc_bytes = SIZE_MAX;   // any one allocation
  size_t realloc_bytes = SIZE_MAX;  // a buffer grown while decoding (stb's zlib output, PNG IDAT data)
};

// Sets this thread's limit while the object lives (none outside: SIZE_MAX).
class ScopedStbAllocLimit {
 public:
  explicit ScopedStbAllocLimit(const StbAllocLimit& limit);
  ~ScopedStbAllocLimit();
  ScopedStbAllocLimit(const ScopedStbAllocLimit&) = delete;
  ScopedStbAllocLimit& operator=(const ScopedStbAllocLimit&) = delete;

 private:
  StbAllocLimit saved_;
};

// stb's allocator (data/stb_image_impl.cpp): malloc and realloc that refuse (return null) above the limit.
void* stb_limited_malloc(size_t n);
void* stb_limited_realloc(void* p, size_t n);
