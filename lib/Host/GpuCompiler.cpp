//===- GpuCompiler.cpp - PTX, cubin and launch metadata for a policy ------===//
#include "switchyard/Host/Compiler.h"

#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Program.h"

using namespace mlir;

namespace switchyard::host {

/// The kernel's parameters as the PTX entry receives them: num_tokens, then per buffer
/// the expanded memref descriptor (allocated ptr, aligned ptr, offset, sizes, strides),
/// then the workspace descriptor.
static llvm::json::Array kernelParams(gpu::GPUFuncOp kernel) {
  llvm::json::Array params;
  auto abi = cast<ArrayAttr>(kernel->getAttr("moe.abi"));
  for (auto [i, type] : llvm::enumerate(kernel.getArgumentTypes())) {
    std::string name = i < abi.size()
                           ? cast<StringAttr>(cast<DictionaryAttr>(abi[i]).get("name"))
                                 .getValue()
                                 .str()
                           : "workspace";
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref) {
      params.push_back(llvm::json::Object{{"name", name}, {"type", "i64"}});
      continue;
    }
    params.push_back(llvm::json::Object{{"name", name + ".allocated"}, {"type", "ptr"}});
    params.push_back(llvm::json::Object{{"name", name + ".aligned"}, {"type", "ptr"}});
    params.push_back(llvm::json::Object{{"name", name + ".offset"}, {"type", "i64"}});
    for (int64_t d = 0; d < memref.getRank(); ++d)
      params.push_back(
          llvm::json::Object{{"name", name + ".size" + std::to_string(d)}, {"type", "i64"}});
    for (int64_t d = 0; d < memref.getRank(); ++d)
      params.push_back(llvm::json::Object{{"name", name + ".stride" + std::to_string(d)},
                                          {"type", "i64"}});
  }
  return params;
}

bool compileToPtx(ModuleOp module, StringRef name, StringRef arch, GpuArtifacts &out,
                  std::string &error) {
  // Metadata comes from the kernel before it is compiled to PTX.
  PassManager mapping(module.getContext());
  mapping.addPass(moe::createMoeFreezeKnobs());
  mapping.addPass(moe::createMoeFormStages());
  mapping.addPass(moe::createMoeLowerToLoops());
  mapping.addPass(moe::createMoeMapToGPU());
  OwningOpRef<ModuleOp> inspect(module.clone());
  if (failed(mapping.run(*inspect))) {
    error = "mapping @" + name.str() + " onto the GPU failed";
    return false;
  }
  llvm::json::Array kernels;
  inspect->walk([&](gpu::GPUFuncOp kernel) {
    auto workspace = cast<DenseI64ArrayAttr>(kernel->getAttr("moe.workspace"));
    int64_t block = kernel.getKnownBlockSizeAttr() ? kernel.getKnownBlockSizeAttr()[0] : 0;
    kernels.push_back(llvm::json::Object{
        {"name", kernel.getName()},
        {"params", kernelParams(kernel)},
        {"block", llvm::json::Array{block, 1, 1}},
        {"grid", "[1, 1, 1]: one CTA holds the whole batch (decode size class)"},
        {"max_tokens", 1024},
        {"shared_memory_bytes", 0},
        {"workspace_bytes", llvm::json::Object{{"per_token", workspace[0]},
                                               {"fixed", workspace[1]}}}});
  });
  llvm::raw_string_ostream json(out.json);
  json << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                     {"router", name},
                                     {"arch", arch},
                                     {"kernels", std::move(kernels)}}))
       << "\n";

  PassManager pm(module.getContext());
  moe::buildPtxPipeline(pm, arch);
  if (failed(pm.run(module))) {
    error = "compiling @" + name.str() + " to PTX failed";
    return false;
  }
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects())
      out.ptx += cast<gpu::ObjectAttr>(a).getObject().getValue().str();
  });
  if (out.ptx.empty()) {
    error = "no PTX was produced for @" + name.str();
    return false;
  }
  return true;
}

bool assemblePtx(StringRef ptxPath, StringRef arch, StringRef cubinPath, std::string &error) {
  auto ptxas = llvm::sys::findProgramByName("ptxas", {"/usr/local/cuda/bin"});
  if (!ptxas) {
    error = "ptxas not found";
    return false;
  }
  std::string archFlag = "-arch=" + arch.str();
  SmallVector<StringRef> args{*ptxas, archFlag, ptxPath, "-o", cubinPath};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, {}, 0, 0, &message);
  if (rc != 0) {
    error = "ptxas rejected the PTX (exit " + std::to_string(rc) + ")";
    return false;
  }
  return true;
}

} // namespace switchyard::host
