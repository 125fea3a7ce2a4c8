// An 8-bit image to PNG or baseline JPEG bytes (stb_image_write), for tests and data-preparation tools.
// stb writes baseline JPEGs, 4:2:0 chroma at quality <= 90 and 4:4:4 above, always as three components
// (YCbCr; a gray image gets neutral chroma).
#pragma once
#include <string>

#include "data/image.h"

std::string encode_png(const Image& img);
std::string encode_jpeg(const Image& img, int quality);  // quality 1..100
