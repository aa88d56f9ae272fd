"""The build's toolchain for tests that compile generated code themselves: the C++
compiler CMake was configured with (scripts/setup.sh picks its version; nothing here
names one). Standard library only."""
import os
import re
import shutil


def cxx(build_dir=None) -> str:
    """CMAKE_CXX_COMPILER of `build_dir`'s CMakeCache.txt, else $CXX, else g++ / c++."""
    cache = os.path.join(build_dir, "CMakeCache.txt") if build_dir else None
    if cache and os.path.isfile(cache):
        with open(cache) as f:
            for line in f:
                match = re.match(r"CMAKE_CXX_COMPILER(?::[A-Z]+)?=(.+)$", line.strip())
                if match and match.group(1):
                    return match.group(1)
    for name in (os.environ.get("CXX"), "g++", "c++"):
        if name and shutil.which(name):
            return name
    raise RuntimeError("no C++ compiler: configure the build (scripts/build.sh) or set CXX")
