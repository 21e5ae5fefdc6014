// xsampler/version.hpp — the version, read by CMake. (xsampler, BSD-3-Clause)
#ifndef XSAMPLER_VERSION_HPP
#define XSAMPLER_VERSION_HPP

// CMakeLists.txt reads these three lines to set the project version.
#define XSAMPLER_VERSION_MAJOR 0
#define XSAMPLER_VERSION_MINOR 1
#define XSAMPLER_VERSION_PATCH 0

#endif
