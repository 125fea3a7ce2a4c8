// stb_image's implementation, compiled once for the whole program (libhost.a); every other file includes
// <stb/stb_image.h> for the declarations only. JPEG and PNG only: the other formats stb knows (TGA, PSD,
// HDR, ...) are not in our data sets, and TGA has no signature, so random bytes could pass as one.
// The size limits are DecodeLimits's (checked from the header first, with a clear reason), not stb's (2^24).
// stb's failure reason is thread-local (C++11 thread_local), so decoding threads do not mix their reasons.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#include <stb/stb_image.h>
