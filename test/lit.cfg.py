# -*- Python -*-
# lit configuration for Switchyard's tests.
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "SWITCHYARD"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.switchyard_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs",
                   "fuzz"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%policies", os.path.join(config.switchyard_src_root, "policies")))
config.substitutions.append(("%srcroot", config.switchyard_src_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.switchyard_tools_dir, append_path=True)

tools = [ToolSubst(t, unresolved="fatal")
         for t in ("moe-opt", "moe-run", "moe-compile", "moe-translate", "mlir-translate")]
llvm_config.add_tool_substitutions(tools, [config.switchyard_tools_dir, config.llvm_tools_dir])

config.substitutions.append(("%python", config.python_executable))
# The flags binding a shipped generic policy to its model: `$(%native-shape FILE)`.
config.substitutions.append(("%native-shape", "%s %s" % (
    config.python_executable,
    os.path.join(config.switchyard_src_root, "scripts", "native_shape.py"))))
# The CUDA toolkit (found by CMake's FindCUDAToolkit): nvcc compiles the generated
# launchers; tests that need it are marked `REQUIRES: cuda`.
if config.nvcc and os.path.exists(config.nvcc):
    config.available_features.add("cuda")
config.substitutions.append(("%nvcc", config.nvcc or "nvcc"))
# Generated host code links libomp when the build found it (threaded token loops).
if config.openmp_library and not config.openmp_library.endswith("-NOTFOUND"):
    config.available_features.add("openmp")
config.substitutions.append(("%cuda_include", config.cuda_include))
# What generated GPU code includes (switchyard/Cuda/Launcher.h, KernelPrelude.h).
config.substitutions.append(("%switchyard_include",
                             os.path.join(config.switchyard_src_root, "runtime", "include")))
