# The runtime as a project of its own (`cmake -S runtime`, scripts/build-sanitized.sh):
# the runtime libraries, moe-exec and the runtime's unit tests, without LLVM/MLIR, so
# that they can be built with sanitizer flags in a few minutes. moe-exec finds
# moe-compile at run time (SWITCHYARD_MOE_COMPILE, beside itself, or PATH; see
# lib/PolicyCache.cpp), never as a build dependency. Included by runtime/CMakeLists.txt
# before its targets; the CUDA layer is left out (the stubs say so).
set(CMAKE_CXX_STANDARD 17 CACHE STRING "C++ standard")
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "" FORCE)
endif()
get_filename_component(SWITCHYARD_SOURCE_ROOT ${CMAKE_CURRENT_SOURCE_DIR}/.. ABSOLUTE)

find_package(nlohmann_json 3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(SWITCHYARD_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas-pthread openblas)
find_package(MPI REQUIRED COMPONENTS C)
find_library(SWITCHYARD_LIBZIP zip REQUIRED)
find_package(GTest REQUIRED)
include(GoogleTest)
enable_testing()

set(SWITCHYARD_INSTALL_LIBDIR lib)
set(SWITCHYARD_INSTALL_INCLUDEDIR include)
