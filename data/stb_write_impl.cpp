// stb_image_write's implementation, compiled once for the whole program (libhost.a), for the tests and
// tools that write PNG or JPEG; every other file includes <stb/stb_image_write.h> for the declarations.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
