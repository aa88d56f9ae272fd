//===- MapToGPU.cpp - lowered routers -> GPU kernels ----------------------===//
//
// The GPU mapping of the target-neutral loop IR (see moe-lower-to-loops): a policy of
// token loops only becomes ONE grid kernel whose CTAs split any batch; any other
// policy becomes ONE kernel for one CTA, the decode-size contract (every token of the
// batch in one block), plus the large-batch pair of ceil(T / tokens-per-CTA) CTAs
// each (LargeBatchKernels.h) for batches beyond it, and the pair fused into one
// cooperative kernel (the halves joined by a moe.grid_barrier) that the launcher takes
// while the GPU holds its CTAs at once. In each kernel body:
// * a token-parallel loop whose body loops over the token's experts (the lane-parallel
//   form: nested scf.parallel loops) becomes one WARP per token (t = warp, warp +
//   warps, ...): each nested loop is lane-strided (e = lane, lane + 32, ...), each
//   reduction combines the lane's elements and then the 32 lanes with butterfly
//   shuffles (every lane ends with the result), the remaining sequential row code with
//   side effects runs on lane 0 and broadcasts what it computes with a shuffle, and a
//   warp barrier (bar.warp.sync) follows every step that wrote memory;
// * any other parallel loop (over tokens or experts) becomes a block-strided loop, one
//   thread per iteration (i = tid, tid + blockDim, ...), followed by a barrier;
// * a run of sequential code (batch reductions, set selection, counts, alignment) runs
//   on thread 0, followed by a barrier; the values it makes for later runs come out of
//   the guarding scf.if;
// * a phase gate (scf.if whose branches hold token loops) has a uniform condition, so
//   each branch is mapped the same way;
// * temporaries (memref.alloc) become views into a caller-provided workspace (an i8
//   buffer passed as the last kernel parameter) at 16-byte aligned offsets;
// * the knobs arrive as one i8 buffer, the knob struct in device memory, and a scalar
//   input (the phase) as a one-element buffer, read at the kernel's entry (KnobBlock.h:
//   a CUDA graph's replays read what the runner writes there).
// Pure code (constants, index arithmetic, views) runs on every thread.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"
#include "KnobBlock.h"
#include "KnobGroups.h"
#include "LargeBatchKernels.h"
#include "LaunchCostModel.h"

#include "switchyard/Conversion/MoeToGPU/MoeToGPU.h"
#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEMAPTOGPU
#include "switchyard/Conversion/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe::gpu_mapping;
using switchyard::moe::SizeClass;

namespace {

/// Splits `scf.parallel (i, j, ...)` (the canonicalizer merges perfectly nested parallel
/// loops, e.g. a token loop around a lane loop) back into nested one-dimensional loops,
/// the form the mapping understands: the outer dimension is the token (or expert).
void splitMultiDimParallel(scf::ParallelOp loop) {
  if (loop.getNumLoops() < 2 || !loop.getInitVals().empty())
    return;
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Block &old = loop.getRegion().front();
  auto outer = scf::ParallelOp::create(
      b, loc, ValueRange{loop.getLowerBound()[0]}, ValueRange{loop.getUpperBound()[0]},
      ValueRange{loop.getStep()[0]}, [&](OpBuilder &ob, Location, ValueRange outerIvs) {
        auto inner = scf::ParallelOp::create(
            ob, loc, loop.getLowerBound().drop_front(), loop.getUpperBound().drop_front(),
            loop.getStep().drop_front(), [&](OpBuilder &, Location, ValueRange) {});
        Block &body = inner.getRegion().front();
        body.getTerminator()->erase(); // the builder's empty scf.reduce
        old.getArgument(0).replaceAllUsesWith(outerIvs[0]);
        for (auto [from, to] :
             llvm::zip(old.getArguments().drop_front(), body.getArguments()))
          from.replaceAllUsesWith(to);
        body.getOperations().splice(body.end(), old.getOperations());
      });
  (void)outer;
  loop.erase();
  // A deeper nest is split again at the next level.
  outer.walk([](scf::ParallelOp nested) { splitMultiDimParallel(nested); });
}

/// A kernel `name` in `gpuModule` with f's parameters plus the workspace, its body a
/// clone of f's, and merged parallel loops split back.
gpu::GPUFuncOp cloneIntoKernel(gpu::GPUModuleOp gpuModule, func::FuncOp f, StringRef name,
                               int64_t blockSize) {
  MLIRContext *ctx = f.getContext();
  Location loc = f.getLoc();
  OpBuilder kb = OpBuilder::atBlockEnd(gpuModule.getBody());
  SmallVector<Type> params(f.getArgumentTypes());
  params.push_back(MemRefType::get({ShapedType::kDynamic}, kb.getI8Type()));
  auto kernel = gpu::GPUFuncOp::create(kb, loc, name, kb.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  switchyard::moe::setAbi(kernel, switchyard::moe::getAbi(f));
  kernel.setKnownBlockSizeAttr(kb.getDenseI32ArrayAttr({(int32_t)blockSize, 1, 1}));
  // __launch_bounds__ as PTX states them: .reqntid (launched with exactly this block)
  // and .minnctapersm, 1024 threads of CTAs per SM, which lets ptxas use 64 registers
  // a thread. With only the .maxntid the known block size gives, ptxas capped them at
  // 40-48 and spilled (16-220 B in lynx, xshare_spec and the cooperative kernels).
  kernel->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
                  kb.getDenseI32ArrayAttr({(int32_t)blockSize, 1, 1}));
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  kb.getI32IntegerAttr(std::max<int32_t>(1, 1024 / (int32_t)blockSize)));
  Block &entry = kernel.getBody().front();
  IRMapping mapping;
  for (auto [from, to] : llvm::zip(f.getArguments(), entry.getArguments()))
    mapping.map(from, to);
  OpBuilder body = OpBuilder::atBlockEnd(&entry);
  for (Operation &op : f.getBody().front().without_terminator())
    body.clone(op, mapping);
  gpu::ReturnOp::create(body, loc);
  SmallVector<scf::ParallelOp> merged;
  kernel.walk([&](scf::ParallelOp loop) {
    if (loop.getNumLoops() > 1)
      merged.push_back(loop);
  });
  for (scf::ParallelOp loop : merged)
    splitMultiDimParallel(loop);
  return kernel;
}

/// The workspace a mapped kernel needs: perToken * T + fixed bytes.
struct WorkspaceBytes {
  int64_t perToken = 0, fixed = 0;
};

/// The kernel's launch contract (#moe.launch, the one place the launch metadata is
/// read from).
void setLaunch(gpu::GPUFuncOp kernel, switchyard::moe::SizeClass sizeClass,
               int64_t minTokens, int64_t maxTokens, int64_t tokensPerCta,
               WorkspaceBytes workspace) {
  kernel->setAttr(switchyard::moe::MoeDialect::LaunchAttrHelper::getNameStr(),
                  switchyard::moe::KernelLaunchAttr::get(
                      kernel.getContext(), sizeClass, minTokens, maxTokens, tokensPerCta,
                      workspace.perToken, workspace.fixed));
}

/// Maps the body of `kernel` onto threads (see the file comment); returns the workspace
/// it needs. `reserved`, when given, is the workspace the large-batch pair keeps in
/// front of the temporaries.
FailureOr<WorkspaceBytes> mapKernel(const switchyard::moe::GpuTargetInfo &target,
                                    gpu::GPUFuncOp kernel, func::FuncOp f,
                                    const switchyard::moe::LargeBatchLayout *reserved) {
  MLIRContext *ctx = kernel.getContext();
  Location loc = kernel.getLoc();
  Block &entry = kernel.getBody().front();
  bool ok = true;
  kernel.walk([&](memref::AllocOp alloc) {
    if (alloc.getType().getNumDynamicDims() > 1)
      ok = false;
  });
  if (!ok)
    return f.emitError() << "a temporary with more than one dynamic dimension cannot be "
                            "placed in the GPU workspace";
  OpBuilder inner = OpBuilder::atBlockBegin(&entry);
  Value tid = gpu::ThreadIdOp::create(inner, loc, gpu::Dimension::x);
  Value threads = gpu::BlockDimOp::create(inner, loc, gpu::Dimension::x);
  Value workspace = entry.getArgument(kernel.getFunctionType().getNumInputs() - 1);
  KernelBuilder builder(target, inner, loc, tid, threads, workspace, entry.getArgument(0));
  if (reserved)
    builder.reserve(reserved->reservedBytes, reserved->perTokenBytes, reserved->fixedBytes);
  auto sharedType = MemRefType::get(
      {KernelBuilder::kSharedSlots}, inner.getI64Type(), MemRefLayoutAttrInterface{},
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  builder.shared = kernel.addWorkgroupAttribution(sharedType, loc);
  Value warpSize = arith::ConstantIndexOp::create(inner, loc, kWarpSize);
  builder.lane = arith::RemUIOp::create(inner, loc, tid, warpSize);
  builder.warp = arith::DivUIOp::create(inner, loc, tid, warpSize);
  builder.warps = arith::DivUIOp::create(inner, loc, threads, warpSize);
  builder.mapBlock(entry);
  if (builder.tooManySlots)
    return f.emitError() << "a thread-0 phase or block reduction needs more shared slots "
                            "than the kernel reserves";
  if (builder.unsupported)
    return f.emitError() << "a warp shuffle cannot carry a value of type "
                         << builder.unsupported;
  eliminateRedundantBarriers(kernel, target);
  return WorkspaceBytes{builder.perTokenBytes, builder.fixedBytes};
}

/// The largest batch bound of a phase gate of `f`: T <= M (or T < M + 1) in the
/// condition of an scf.if around parallel loops (moe.when max_tokens = M), 0 if none.
/// A large-batch pair that starts at or below M cannot decide the gate, and an undecided
/// gate is whole-batch code: the last CTA's tail would run both branches' token loops
/// over the whole batch.
int64_t largestGateBound(func::FuncOp f) {
  Value tokens = f.getArgument(0);
  int64_t bound = 0;
  f.walk([&](scf::IfOp gate) {
    if (!containsParallel(gate))
      return;
    SmallVector<Value> work{gate.getCondition()};
    llvm::SmallPtrSet<Operation *, 8> seen;
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || !seen.insert(def).second)
        continue;
      if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(def)) {
        work.append(def->operand_begin(), def->operand_end());
        continue;
      }
      auto cmp = dyn_cast<arith::CmpIOp>(def);
      if (!cmp || cmp.getLhs() != tokens)
        continue;
      std::optional<int64_t> c = getConstantIntValue(cmp.getRhs());
      if (!c)
        continue;
      if (cmp.getPredicate() == arith::CmpIPredicate::ule ||
          cmp.getPredicate() == arith::CmpIPredicate::ugt)
        bound = std::max(bound, *c);
      else if (cmp.getPredicate() == arith::CmpIPredicate::ult ||
               cmp.getPredicate() == arith::CmpIPredicate::uge)
        bound = std::max(bound, *c - 1);
    }
  });
  return bound;
}

struct MoeMapToGPUPass : switchyard::moe::impl::MoeMapToGPUBase<MoeMapToGPUPass> {
  using MoeMapToGPUBase::MoeMapToGPUBase;
  const switchyard::moe::GpuTargetInfo &target = switchyard::moe::getNvvmTargetInfo();

  /// The large-batch pair `<name>_large_k1`, `<name>_large_k2` (only k1 when the
  /// policy is token loops only); false (with a warning saying why) when the policy
  /// does not split.
  bool addLargeBatchKernels(gpu::GPUModuleOp gpuModule, func::FuncOp f, int64_t ctaTokens,
                            int64_t tokensPerCta, bool &failed) {
    using switchyard::moe::KernelRole;
    SmallVector<gpu::GPUFuncOp> pair;
    for (KernelRole which : {KernelRole::LargeFirst, KernelRole::LargeSecond}) {
      std::string name =
          (f.getName() + "_large_k" + (which == KernelRole::LargeFirst ? "1" : "2")).str();
      gpu::GPUFuncOp kernel = cloneIntoKernel(gpuModule, f, name, blockSize);
      pair.push_back(kernel);
      FailureOr<switchyard::moe::LargeBatchLayout> layout =
          switchyard::moe::buildLargeBatchKernel(
              target, kernel, which, tokensPerCta, ctaTokens + 1, [&](const Twine &reason) {
                f.emitWarning() << "no large-batch kernels for @" << f.getName() << ": "
                                << reason << "; the one-CTA kernel serves every batch size";
              });
      if (mlir::failed(layout)) {
        for (gpu::GPUFuncOp k : pair)
          k.erase();
        return false;
      }
      FailureOr<WorkspaceBytes> workspace = mapKernel(target, kernel, f, &*layout);
      if (mlir::failed(workspace)) {
        failed = true;
        return false;
      }
      setLaunch(kernel, switchyard::moe::SizeClass::large, ctaTokens + 1, /*maxTokens=*/0,
                tokensPerCta, *workspace);
      if (!layout->needsKernel2)
        break; // token loops only: one launch serves large batches too
    }
    if (pair.size() == 2)
      fusePair(pair[0], pair[1], (f.getName() + "_large_coop").str(), ctaTokens + 1,
               tokensPerCta);
    return true;
  }

  /// The large-batch pair as ONE kernel for a cooperative launch: kernel 1's body, a
  /// grid barrier (the kernel boundary, inside the launch), kernel 2's body. Both
  /// halves compute the same workspace layout from T and CTA c takes the same tokens
  /// in both, so the barrier is all that joins them; each half's CTA barriers were
  /// placed for a kernel that starts or ends there, which the grid barrier (a CTA
  /// barrier on each side) keeps true.
  void fusePair(gpu::GPUFuncOp first, gpu::GPUFuncOp second, StringRef name,
                int64_t minTokens, int64_t tokensPerCta) {
    auto fused = cast<gpu::GPUFuncOp>(first->clone());
    fused.setName(name);
    OpBuilder b(second->getContext());
    b.setInsertionPointAfter(second);
    b.insert(fused);
    Block &entry = fused.getBody().front();
    Block &from = second.getBody().front();
    b.setInsertionPoint(entry.getTerminator());
    switchyard::moe::GridBarrierOp::create(b, fused.getLoc());
    IRMapping mapping; // parameters and the shared scratch (workgroup attributions)
    for (auto [a, c] : llvm::zip_equal(from.getArguments(), entry.getArguments()))
      mapping.map(a, c);
    for (Operation &op : from.without_terminator())
      b.clone(op, mapping);
    auto launch = [](gpu::GPUFuncOp k) {
      return k->getAttrOfType<switchyard::moe::KernelLaunchAttr>(
          switchyard::moe::MoeDialect::LaunchAttrHelper::getNameStr());
    };
    WorkspaceBytes workspace{
        std::max(launch(first).getWorkspacePerToken(),
                 launch(second).getWorkspacePerToken()),
        std::max(launch(first).getWorkspaceFixed(), launch(second).getWorkspaceFixed())};
    setLaunch(fused, SizeClass::cooperative, minTokens, /*maxTokens=*/0, tokensPerCta,
              workspace);
  }

  /// The grid form of a policy of token loops only (the only kernel: enough CTAs to
  /// fill the GPU at every batch size, in one launch); null when the policy has more
  /// than token loops.
  gpu::GPUFuncOp addGridKernel(gpu::GPUModuleOp gpuModule, func::FuncOp f, bool &failed) {
    gpu::GPUFuncOp kernel = cloneIntoKernel(gpuModule, f, f.getName(), blockSize);
    FailureOr<switchyard::moe::LargeBatchLayout> layout =
        switchyard::moe::buildLargeBatchKernel(
            target, kernel, switchyard::moe::KernelRole::Grid,
            /*tokensPerCta=*/0, /*minTokens=*/1, [](const Twine &) {}); // silently one-CTA
    if (mlir::failed(layout) || layout->needsKernel2) {
      kernel.erase();
      return {};
    }
    FailureOr<WorkspaceBytes> workspace = mapKernel(target, kernel, f, &*layout);
    if (mlir::failed(workspace)) {
      failed = true;
      return {};
    }
    setLaunch(kernel, switchyard::moe::SizeClass::grid, 1, 0, 0, *workspace);
    return kernel;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    SmallVector<func::FuncOp> routers;
    module.walk([&](func::FuncOp f) {
      if (switchyard::moe::getAbi(f))
        routers.push_back(f);
    });
    if (routers.empty())
      return;
    if (blockSize < kWarpSize || blockSize % kWarpSize != 0 || blockSize > 1024) {
      module.emitError() << "moe-map-to-gpu: block-size must be a multiple of " << kWarpSize
                         << " in [32, 1024], got " << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    if (knobGroups < 0 || knobGroups > switchyard::moe::kMaxKnobGroups) {
      module.emitError() << "moe-map-to-gpu: knob-groups must be in [0, "
                         << switchyard::moe::kMaxKnobGroups << "], got "
                         << static_cast<int64_t>(knobGroups);
      return signalPassFailure();
    }
    if (ctaTokens < 0 || tokensPerCta < 0) {
      module.emitError()
          << "moe-map-to-gpu: cta-tokens and tokens-per-cta must be positive "
             "(or 0: chosen by the launch cost model)";
      return signalPassFailure();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    for (func::FuncOp f : routers) {
      // Knob groups: the router becomes a loop over the groups (KnobGroups.h), which
      // the one-CTA kernel runs for every batch size.
      bool grouped = knobGroups > 0;
      if (grouped && failed(switchyard::moe::routeKnobGroups(f, knobGroups)))
        return signalPassFailure();
      auto gpuModule =
          gpu::GPUModuleOp::create(b, f.getLoc(), (f.getName() + "_kernels").str());
      // Thresholds the user left open come from the launch cost model.
      switchyard::moe::LaunchCostModel model = switchyard::moe::modelLaunches(f, blockSize);
      // The one-CTA kernel takes the batches a phase gate's bound does not decide (up
      // to 1024 tokens): the pair then runs the gate's large-batch branch only.
      if (int64_t gate = largestGateBound(f); gate > model.ctaTokens && gate <= 1024)
        model.ctaTokens = gate;
      model.ctaTokens = ctaTokens > 0 ? int64_t(ctaTokens) : model.ctaTokens;
      // The pair gives each CTA whole token tiles (kTileTokens, TokenTiles.cpp).
      bool tiled = false;
      f.walk([&](scf::ParallelOp loop) {
        tiled |= loop->hasAttr(switchyard::moe::kTokenTilesAttr);
      });
      if (tiled)
        model.tokensPerCta =
            llvm::divideCeil(model.tokensPerCta, switchyard::moe::kTileTokens) *
            switchyard::moe::kTileTokens;
      model.tokensPerCta = tokensPerCta > 0 ? int64_t(tokensPerCta) : model.tokensPerCta;
      bool failedToMap = false;
      if (gpu::GPUFuncOp grid = largeBatch && !grouped
                                    ? addGridKernel(gpuModule, f, failedToMap)
                                    : gpu::GPUFuncOp()) {
        grid->setAttr(switchyard::moe::MoeDialect::LaunchModelAttrHelper::getNameStr(),
                      model.toAttr(ctx, {SizeClass::grid}));
        continue;
      }
      if (failedToMap)
        return signalPassFailure();
      gpu::GPUFuncOp kernel = cloneIntoKernel(gpuModule, f, f.getName(), blockSize);
      FailureOr<WorkspaceBytes> workspace = mapKernel(target, kernel, f, nullptr);
      if (failed(workspace))
        return signalPassFailure();
      if (grouped)
        kernel->setAttr(switchyard::moe::kKnobGroupsAttr,
                        f->getAttr(switchyard::moe::kKnobGroupsAttr));
      bool split = largeBatch && !grouped &&
                   addLargeBatchKernels(gpuModule, f, model.ctaTokens, model.tokensPerCta,
                                        failedToMap);
      if (failedToMap)
        return signalPassFailure();
      kernel->setAttr(switchyard::moe::MoeDialect::LaunchModelAttrHelper::getNameStr(),
                      split ? model.toAttr(ctx, {SizeClass::decode, SizeClass::large})
                            : model.toAttr(ctx, {SizeClass::decode}));
      // Without the pair the one-CTA kernel takes every batch (no upper bound).
      setLaunch(kernel, SizeClass::decode, 1, split ? model.ctaTokens : 0, 0, *workspace);
    }
    // Last, once every kernel is mapped and fused: scalar inputs and knobs from device
    // memory (scalars first: their argument indices are the ABI's).
    module.walk([](gpu::GPUFuncOp kernel) {
      switchyard::moe::readScalarInputsFromDevice(kernel);
      switchyard::moe::readKnobsFromDeviceStruct(kernel);
    });
  }
};

} // namespace
