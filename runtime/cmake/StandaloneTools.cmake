# The standalone runtime project's executables (see Standalone.cmake): moe-exec and the
# runtime's and executor's unit tests, built under the project's own flags: with
# scripts/build-sanitized.sh, the ONE ASan + UBSan copy of the runtime, run by the main
# build's ctest as runtime/asan and executor/asan (no second sanitized copy there).
add_subdirectory(${SWITCHYARD_SOURCE_ROOT}/tools/moe-exec tools/moe-exec)
set(SWITCHYARD_SANITIZE_RUNTIME_TESTS OFF)
add_subdirectory(${SWITCHYARD_SOURCE_ROOT}/unittests/Runtime unittests/Runtime)
add_subdirectory(${SWITCHYARD_SOURCE_ROOT}/unittests/Executor unittests/Executor)
