# The standalone runtime project's executables (see Standalone.cmake): moe-exec and the
# runtime's unit tests, the latter already under the build's own sanitizer flags (no
# second sanitized copy).
add_subdirectory(${SWITCHYARD_SOURCE_ROOT}/tools/moe-exec tools/moe-exec)
set(SWITCHYARD_SANITIZE_RUNTIME_TESTS OFF)
add_subdirectory(${SWITCHYARD_SOURCE_ROOT}/unittests/Runtime unittests/Runtime)
