//===- LaunchMetadata.cpp - a router's GPU launch contract, as one record -===//
#include "switchyard/Target/Ptx/LaunchMetadata.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;

namespace switchyard::ptx {

/// The names of a kernel's ABI parameters (moe.abi, set by moe-map-to-gpu), in the
/// order of its arguments: the knobs are one argument, "knobs" (the knob struct in
/// device memory, KnobBlock.h); the arguments after them are the workspace. The one
/// place that reads the attribute.
static std::vector<std::string> abiParamNames(gpu::GPUFuncOp kernel) {
  std::vector<std::string> names;
  bool knobs = false;
  for (moe::AbiParamAttr param : moe::getAbi(kernel).getParams()) {
    if (param.isKnob())
      knobs = true;
    else
      names.push_back(param.getName().str());
  }
  if (knobs)
    names.push_back("knobs");
  return names;
}

/// The kernel's parameters as the PTX entry receives them: num_tokens, then per buffer
/// the expanded memref descriptor (allocated ptr, aligned ptr, offset, sizes, strides),
/// then the workspace descriptor.
static llvm::json::Array kernelParams(gpu::GPUFuncOp kernel) {
  llvm::json::Array params;
  std::vector<std::string> abi = abiParamNames(kernel);
  for (auto [i, type] : llvm::enumerate(kernel.getArgumentTypes())) {
    std::string name = i < abi.size() ? abi[i] : "workspace";
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref) {
      std::string t = type.isF32() ? "f32" : type.isInteger(32) ? "i32" : "i64";
      params.push_back(llvm::json::Object{{"name", name}, {"type", t}});
      continue;
    }
    params.push_back(llvm::json::Object{{"name", name + ".allocated"}, {"type", "ptr"}});
    params.push_back(llvm::json::Object{{"name", name + ".aligned"}, {"type", "ptr"}});
    params.push_back(llvm::json::Object{{"name", name + ".offset"}, {"type", "i64"}});
    for (int64_t d = 0; d < memref.getRank(); ++d)
      params.push_back(llvm::json::Object{{"name", name + ".size" + std::to_string(d)},
                                          {"type", "i64"}});
    for (int64_t d = 0; d < memref.getRank(); ++d)
      params.push_back(llvm::json::Object{{"name", name + ".stride" + std::to_string(d)},
                                          {"type", "i64"}});
  }
  return params;
}

/// moe.launch_model (LaunchCostModel::toAttr) as JSON.
static llvm::json::Value launchModelJson(DictionaryAttr model) {
  llvm::json::Object out;
  for (NamedAttribute field : model) {
    StringRef key = field.getName().strref();
    if (auto i = dyn_cast<IntegerAttr>(field.getValue()))
      out[key] = i.getInt();
    else if (auto f = dyn_cast<FloatAttr>(field.getValue()))
      out[key] = f.getValueAsDouble();
    else if (auto points = dyn_cast<ArrayAttr>(field.getValue())) {
      llvm::json::Array list; // of points: {tokens, us} or {tokens, instructions}
      for (Attribute point : points) {
        llvm::json::Object row;
        for (NamedAttribute value : cast<DictionaryAttr>(point)) {
          if (auto i = dyn_cast<IntegerAttr>(value.getValue()))
            row[value.getName().strref()] = i.getInt();
          else if (auto f = dyn_cast<FloatAttr>(value.getValue()))
            row[value.getName().strref()] = f.getValueAsDouble();
        }
        list.push_back(std::move(row));
      }
      out[key] = std::move(list);
    }
  }
  return out;
}

/// What a mapped kernel synchronises on, counted in its IR (NAME.json kernels[].sync):
/// CTA barriers (and how many of them sit in a loop, so run a data-dependent number of
/// times), warp barriers, warp shuffles, and device-scope fences (two per last-CTA
/// ticket, the kernel's grid-wide step) and grid barriers. The CUDA-on-host emulation
/// counts what one call executes (test/gpu/test_kernel_budgets.py).
static KernelSync syncCounts(gpu::GPUFuncOp kernel) {
  int64_t ctaBarriers = 0, inLoops = 0, warpBarriers = 0, shuffles = 0, fences = 0,
          gridBarriers = 0;
  kernel.walk([&](Operation *op) {
    if (isa<gpu::BarrierOp>(op)) {
      ++ctaBarriers;
      if (op->getParentOfType<LoopLikeOpInterface>())
        ++inLoops;
    } else if (isa<NVVM::SyncWarpOp>(op)) {
      ++warpBarriers;
    } else if (isa<gpu::ShuffleOp>(op)) {
      ++shuffles;
    } else if (isa<NVVM::MembarOp>(op)) {
      ++fences;
    } else if (isa<moe::GridBarrierOp>(op)) {
      ++gridBarriers;
    }
  });
  return KernelSync{ctaBarriers, inLoops, warpBarriers, shuffles, fences, gridBarriers};
}

LaunchMetadata LaunchMetadata::fromMappedModule(ModuleOp mapped, StringRef router,
                                                StringRef arch) {
  LaunchMetadata m;
  m.router = router.str();
  m.arch = arch.str();
  mapped.walk([&](gpu::GPUFuncOp kernel) {
    auto launch = kernel->getAttrOfType<moe::KernelLaunchAttr>(
        moe::MoeDialect::LaunchAttrHelper::getNameStr());
    if (!launch)
      return;
    KernelMetadata k;
    k.name = kernel.getName().str();
    k.sizeClass = launch.getSizeClass();
    k.minTokens = launch.getMinTokens();
    k.maxTokens = launch.getMaxTokens();
    k.tokensPerCta = launch.getTokensPerCta();
    k.perTokenBytes = launch.getWorkspacePerToken();
    k.fixedBytes = launch.getWorkspaceFixed();
    k.block = kernel.getKnownBlockSizeAttr() ? kernel.getKnownBlockSizeAttr()[0] : 0;
    for (BlockArgument a : kernel.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(a.getType());
      k.sharedBytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
    }
    k.sync = syncCounts(kernel);
    k.params = kernelParams(kernel);
    if (auto model = kernel->getAttrOfType<DictionaryAttr>(
            moe::MoeDialect::LaunchModelAttrHelper::getNameStr()))
      m.launchModel = launchModelJson(model);
    if (auto groups = kernel->getAttrOfType<IntegerAttr>(
            moe::MoeDialect::KnobGroupsAttrHelper::getNameStr()))
      m.knobGroups = groups.getInt();
    m.kernels.push_back(std::move(k));
  });
  if (m.kernels.empty())
    return m;
  // The size classes a launcher chooses between, each with its launches in order: the
  // first kernel's (decode or grid), the large-batch pair's, and the cooperative
  // kernel's (the pair as one launch, when the GPU holds its CTAs at once).
  for (const KernelMetadata &k : m.kernels) {
    if (m.sizeClasses.empty() || m.sizeClasses.back().sizeClass != k.sizeClass) {
      SizeClassMetadata c;
      c.sizeClass = k.sizeClass;
      c.minTokens = moe::isPerCtaClass(k.sizeClass) ? k.minTokens : 0;
      c.maxTokens = k.maxTokens;
      c.gridSteps = -1; // launch boundaries: one fewer than the launches
      m.sizeClasses.push_back(c);
    }
    SizeClassMetadata &c = m.sizeClasses.back();
    c.launches.push_back(k.name);
    c.gridSteps += 1 + k.sync.gridSteps();
    c.perTokenBytes = std::max(c.perTokenBytes, k.perTokenBytes);
    c.fixedBytes = std::max(c.fixedBytes, k.fixedBytes);
  }
  return m;
}

std::string KernelMetadata::gridText() const {
  switch (sizeClass) {
  case moe::SizeClass::decode:
    return "[1, 1, 1]: one CTA holds the whole batch";
  case moe::SizeClass::grid:
    return "[min(ceil(num_tokens / " + std::to_string(std::max<int64_t>(block / 32, 1)) +
           "), SMs x resident blocks per SM), 1, 1]: block c takes tokens [c*P, (c+1)*P), "
           "P = ceil(num_tokens / grid)";
  case moe::SizeClass::large:
    return "[ceil(num_tokens / " + std::to_string(tokensPerCta) + "), 1, 1]";
  case moe::SizeClass::cooperative:
    return "[ceil(num_tokens / " + std::to_string(tokensPerCta) +
           "), 1, 1], launched cooperatively: only when the GPU holds every CTA at once "
           "(the large pair otherwise)";
  }
  return "";
}

const KernelMetadata *LaunchMetadata::kernel(StringRef name) const {
  for (const KernelMetadata &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

llvm::json::Value LaunchMetadata::toJson() const {
  llvm::json::Array kernelList;
  for (const KernelMetadata &k : kernels) {
    llvm::json::Object entry{
        {"name", k.name},
        {"size_class", moe::stringifySizeClass(k.sizeClass)},
        {"params", llvm::json::Array(k.params)},
        {"block", llvm::json::Array{k.block, 1, 1}},
        {"shared_memory_bytes", k.sharedBytes},
        {"sync", llvm::json::Object{{"cta_barriers", k.sync.ctaBarriers},
                                    {"cta_barriers_in_loops", k.sync.ctaBarriersInLoops},
                                    {"warp_barriers", k.sync.warpBarriers},
                                    {"shuffles", k.sync.shuffles},
                                    {"device_fences", k.sync.deviceFences},
                                    {"grid_barriers", k.sync.gridBarriers},
                                    {"grid_steps", k.sync.gridSteps()}}},
        {"workspace_bytes",
         llvm::json::Object{{"per_token", k.perTokenBytes}, {"fixed", k.fixedBytes}}}};
    entry["grid"] = k.gridText();
    switch (k.sizeClass) {
    case moe::SizeClass::decode:
      entry["max_tokens"] = k.maxTokens ? llvm::json::Value(k.maxTokens) : nullptr;
      break;
    case moe::SizeClass::grid:
      entry["warps_per_block"] = std::max<int64_t>(k.block / 32, 1);
      break;
    case moe::SizeClass::large:
    case moe::SizeClass::cooperative:
      entry["tokens_per_cta"] = k.tokensPerCta;
      entry["min_tokens"] = k.minTokens;
      break;
    }
    kernelList.push_back(std::move(entry));
  }
  llvm::json::Array classes;
  for (const SizeClassMetadata &c : sizeClasses) {
    llvm::json::Array launches;
    for (const std::string &l : c.launches)
      launches.push_back(l);
    llvm::json::Object entry{{"name", moe::stringifySizeClass(c.sizeClass)},
                             {"launches", std::move(launches)}};
    if (moe::isPerCtaClass(c.sizeClass))
      entry["min_tokens"] = c.minTokens;
    else
      entry["max_tokens"] = c.maxTokens ? llvm::json::Value(c.maxTokens) : nullptr;
    classes.push_back(std::move(entry));
  }
  llvm::json::Object out{{"router", router},
                         {"arch", arch},
                         {"size_classes", std::move(classes)},
                         {"launch_model", launchModel},
                         {"kernels", std::move(kernelList)}};
  if (knobGroups)
    out["knob_groups"] = knobGroups;
  return out;
}

} // namespace switchyard::ptx
