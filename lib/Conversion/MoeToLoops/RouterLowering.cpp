//===- RouterLowering.cpp - moe router -> loops on buffers ----------------===//
//
// Lowers one `moe.router` to `func.func @name(%T: index, inputs..., outputs...)` on
// memrefs, in destination-passing style: the caller owns every input and output buffer
// and the function allocates only its temporaries.
//
// * A `token` stage (or a lone per-token op) becomes one `scf.parallel` over the tokens
//   whose body runs every op of the stage on one token's row; values that do not leave
//   the stage live in per-token stack buffers (`memref.alloca` in an alloca scope).
// * A `route` stage is a token loop for the routing rows followed by the per-expert
//   outputs (counts, compaction, block alignment).
// * `batch` and `select` ops, which read whole buffers, each become a loop nest.
// * A phase gate becomes `scf.if`, each region writing its results into shared buffers.
// Values that are router outputs are written straight into the output buffers.
//
// The function carries a `moe.abi` attribute describing its C-level parameters (name,
// role, kind, and for a dynamic size the rule ceil((a*T + b) / d)), from which the
// C entry point, the header and moe-run's argument binding are generated.
//
//===----------------------------------------------------------------------===//
#include "RouterLowering.h"

#include "switchyard/Dialect/Moe/IR/MoeStages.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace switchyard::moe {

MemRefType storageType(Type type) {
  if (auto set = dyn_cast<ExpertSetType>(type))
    return MemRefType::get({set.getExperts()}, IntegerType::get(type.getContext(), 8));
  auto tensor = cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

RouterLowering::RouterLowering(PolicyOpInterface router, OpBuilder &builder,
                               bool laneParallel)
    : router(router), b(builder), emitter(builder, router.getLoc()),
      laneParallel(laneParallel) {}

Value RouterLowering::resolve(Value v) {
  for (auto it = aliases.find(v); it != aliases.end(); it = aliases.find(v))
    v = it->second;
  return v;
}

const Stored &RouterLowering::get(Value v) {
  auto it = stored.find(resolve(v));
  assert(it != stored.end() && "moe value used before it was lowered");
  return it->second;
}

Value RouterLowering::dimSize(Value v, unsigned dim) {
  MemRefType type = storageType(v.getType());
  if (!type.isDynamicDim(dim))
    return emitter.idx(type.getDimSize(dim));
  auto [a, c, d] = getDynamicSizeRule(v);
  Value n = emitter.addI(emitter.mulI(numTokens, emitter.idx(a)), emitter.idx(c));
  if (d == 1)
    return n;
  return emitter.divUI(emitter.addI(n, emitter.idx(d - 1)), emitter.idx(d));
}

Value RouterLowering::allocFull(Value v) {
  if (auto it = destinations.find(v); it != destinations.end())
    return stored[v].mem = it->second;
  MemRefType type = storageType(v.getType());
  SmallVector<Value> dynSizes;
  for (unsigned d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynSizes.push_back(dimSize(v, d));
  Value mem = memref::AllocOp::create(b, router.getLoc(), type, dynSizes);
  temporaries.push_back(mem);
  return stored[v].mem = mem;
}

RowRef RouterLowering::rowIn(Value v, Value t) {
  v = resolve(v);
  if (auto it = rowLocal.find(v); it != rowLocal.end())
    return {it->second, nullptr};
  Value m = get(v).mem;
  return cast<MemRefType>(m.getType()).getRank() == 2 ? RowRef{m, t} : RowRef{m, nullptr};
}

RowRef RouterLowering::rowOut(Value v, Value t) {
  auto it = stored.find(v);
  if (it != stored.end() && it->second.mem)
    return {it->second.mem, t};
  MemRefType type = storageType(v.getType());
  Value row = scratch(type.getDimSize(1), type.getElementType());
  rowLocal[v] = row;
  return {row, nullptr};
}

Value RouterLowering::scratch(int64_t n, Type elem) {
  Location loc = router.getLoc();
  Value buffer;
  {
    OpBuilder::InsertionGuard guard(b);
    b.restoreInsertionPoint(prologue);
    std::optional<int64_t> rows = getConstantIntValue(parallelExtent);
    if (parallelToken && rows) // an expert-parallel loop: E rows, a static size
      buffer = memref::AllocOp::create(b, loc, MemRefType::get({*rows, n}, elem));
    else if (parallelToken)
      buffer =
          memref::AllocOp::create(b, loc, MemRefType::get({ShapedType::kDynamic, n}, elem),
                                  ValueRange{parallelExtent});
    else
      buffer = memref::AllocOp::create(b, loc, MemRefType::get({n}, elem));
    temporaries.push_back(buffer);
  }
  if (!parallelToken)
    return buffer;
  return rowView(buffer, parallelToken, n);
}

Value RouterLowering::rowView(Value buffer, Value i, int64_t n) {
  Location loc = router.getLoc();
  SmallVector<OpFoldResult> offsets{i, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), b.getIndexAttr(n)};
  SmallVector<OpFoldResult> strides{b.getIndexAttr(1), b.getIndexAttr(1)};
  auto type = memref::SubViewOp::inferRankReducedResultType(
      {n}, cast<MemRefType>(buffer.getType()), offsets, sizes, strides);
  return memref::SubViewOp::create(b, loc, cast<MemRefType>(type), buffer, offsets, sizes,
                                   strides);
}

Value RouterLowering::temporary(MemRefType type, ValueRange dynamicSizes) {
  Value mem = memref::AllocOp::create(b, router.getLoc(), type, dynamicSizes);
  temporaries.push_back(mem);
  return mem;
}

void RouterLowering::parallelLoop(Value extent, function_ref<void(Value)> body) {
  Location loc = router.getLoc();
  Value lower = emitter.idx(0), step = emitter.idx(1);
  OpBuilder::InsertPoint outerPrologue = prologue;
  prologue = b.saveInsertionPoint();
  scf::ParallelOp::create(b, loc, ValueRange{lower}, ValueRange{extent}, ValueRange{step},
                          [&](OpBuilder &nested, Location, ValueRange ivs) {
                            OpBuilder::InsertionGuard guard(b);
                            b.setInsertionPoint(nested.getInsertionBlock(),
                                                nested.getInsertionPoint());
                            parallelToken = ivs[0];
                            parallelExtent = extent;
                            body(ivs[0]);
                            parallelToken = nullptr;
                            parallelExtent = nullptr;
                          });
  prologue = outerPrologue;
}

void RouterLowering::copyInto(Value dst, Value src, Value like) {
  auto type = cast<MemRefType>(dst.getType());
  if (type.getRank() == 1) {
    emitter.loop(emitter.idx(0), dimSize(like, 0),
                 [&](Value i) { emitter.store(emitter.load(src, i), dst, i); });
    return;
  }
  emitter.loop(emitter.idx(0), dimSize(like, 0), [&](Value i) {
    emitter.loop(emitter.idx(0), dimSize(like, 1), [&](Value j) {
      emitter.store(emitter.load(src, {i, j}), dst, {i, j});
    });
  });
}

/// Writes `op` through its LoopLoweringOpInterface model (one token's row when `t`).
static LogicalResult lowerThroughInterface(RouterLowering &L, Operation *op, Value t) {
  auto lowering = dyn_cast<LoopLoweringOpInterface>(op);
  if (!lowering)
    return op->emitOpError() << "has no loop lowering";
  return lowering.lowerToLoops(L, t);
}

static bool isRowOp(Operation *op) { return op->hasTrait<role::RowWise>(); }

LogicalResult RouterLowering::lowerRowLoop(ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 8> inLoop(ops.begin(), ops.end());
  // Values read after the loop get full buffers, allocated before it.
  for (Operation *op : ops)
    for (Value result : op->getResults()) {
      bool escapes = destinations.count(result) ||
                     llvm::any_of(result.getUsers(),
                                  [&](Operation *user) { return !inLoop.contains(user); });
      if (escapes)
        stored[result].mem = allocFull(result);
    }
  LogicalResult status = success();
  parallelLoop(numTokens, [&](Value t) {
    for (Operation *op : ops)
      if (failed(lowerThroughInterface(*this, op, t)))
        status = failure();
  });
  for (Operation *op : ops)
    for (Value result : op->getResults())
      rowLocal.erase(result);
  return status;
}

/// A stage whose row ops run in a token loop (token and route stages).
static bool hasRowLoop(StageOp stage) {
  return stage.getKind() == StageKind::token || stage.getKind() == StageKind::route;
}

/// Whether every op of the stage is a row op (nothing to run after its token loop).
static bool onlyRowOps(StageOp stage) {
  return llvm::all_of(stage.getBody().front().without_terminator(),
                      [](Operation &op) { return isRowOp(&op); });
}

void RouterLowering::aliasStageResults(StageOp stage) {
  auto yield = cast<YieldOp>(stage.getBody().front().getTerminator());
  for (auto [result, inner] : llvm::zip(stage.getResults(), yield.getOperands())) {
    aliases[result] = inner;
    if (auto it = destinations.find(result); it != destinations.end())
      destinations.try_emplace(inner, it->second);
  }
}

LogicalResult RouterLowering::lowerStages(ArrayRef<StageOp> stages) {
  // Row ops read only their token's rows, so consecutive stages' row ops share one
  // token loop; the last stage's whole ops follow it.
  SmallVector<Operation *> rowOps, wholeOps;
  for (StageOp stage : stages) {
    aliasStageResults(stage);
    for (Operation &op : stage.getBody().front().without_terminator())
      (isRowOp(&op) ? rowOps : wholeOps).push_back(&op);
  }
  if (!rowOps.empty() && failed(lowerRowLoop(rowOps)))
    return failure();
  for (Operation *op : wholeOps)
    if (failed(lowerOp(op)))
      return failure();
  return success();
}

LogicalResult RouterLowering::lowerStage(StageOp stage) {
  if (hasRowLoop(stage))
    return lowerStages({stage});
  aliasStageResults(stage);
  Block &body = stage.getBody().front();
  for (Operation &op : body.without_terminator())
    if (failed(lowerOp(&op)))
      return failure();
  return success();
}

LogicalResult RouterLowering::lowerWhen(WhenOp when) {
  Location loc = when.getLoc();
  using P = arith::CmpIPredicate;
  Value cond = emitter.cmpI(P::ule, numTokens, emitter.idx(when.getMaxTokens()));
  if (auto phases = when.getPhases()) {
    Value phase = scalar(when.getPhase());
    Value any = emitter.cmpI(P::ne, emitter.i32(0), emitter.i32(0));
    for (Attribute a : *phases) {
      int64_t p = static_cast<int64_t>(cast<PhaseAttr>(a).getValue());
      any = emitter.orI(any, emitter.cmpI(P::eq, phase, emitter.i32(p)));
    }
    cond = emitter.andI(cond, any);
  }
  SmallVector<Value> buffers;
  for (Value result : when.getResults()) {
    if (!isa<RankedTensorType, ExpertSetType>(result.getType()))
      return when.emitOpError()
             << "cannot lower a phase-gate result of type " << result.getType();
    buffers.push_back(allocFull(result));
    stored[result].mem = buffers.back();
  }
  for (Region *region : {&when.getGated(), &when.getFallback()}) {
    auto yield = cast<YieldOp>(region->front().getTerminator());
    for (auto [value, buffer] : llvm::zip(yield.getOperands(), buffers))
      if (value.getParentRegion() == region && !isa<BlockArgument>(value))
        destinations.try_emplace(value, buffer);
  }
  LogicalResult status = success();
  auto lowerRegion = [&](Region &region) {
    SmallVector<Value> outer;
    std::swap(outer, temporaries);
    if (failed(lowerBlock(region.front())))
      status = failure();
    auto yield = cast<YieldOp>(region.front().getTerminator());
    if (succeeded(status))
      for (auto [value, buffer] : llvm::zip(yield.getOperands(), buffers))
        if (mem(value) != buffer)
          copyInto(buffer, mem(value), value);
    for (Value temp : temporaries)
      memref::DeallocOp::create(b, loc, temp);
    std::swap(outer, temporaries);
  };
  emitter.ifThenElse(
      cond, [&] { lowerRegion(when.getGated()); },
      [&] { lowerRegion(when.getFallback()); });
  return status;
}

LogicalResult RouterLowering::lowerWholeOp(Operation *op) {
  prologue = b.saveInsertionPoint();
  return lowerThroughInterface(*this, op, Value());
}

LogicalResult RouterLowering::lowerOp(Operation *op) {
  if (isa<KnobOp>(op)) // a run-time parameter of the function, bound in run()
    return success();
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    stored[cst.getResult()].scalar = b.clone(*op)->getResult(0);
    return success();
  }
  if (auto count = dyn_cast<NumTokensOp>(op)) {
    stored[count.getResult()].scalar =
        arith::IndexCastOp::create(b, op->getLoc(), b.getI64Type(), numTokens);
    return success();
  }
  if (isa<arith::ArithDialect>(op->getDialect())) { // scalar arithmetic (verified)
    IRMapping mapping;
    for (Value operand : op->getOperands())
      mapping.map(operand, scalar(operand));
    Operation *copy = b.clone(*op, mapping);
    for (auto [result, value] : llvm::zip(op->getResults(), copy->getResults()))
      stored[result].scalar = value;
    return success();
  }
  if (auto stage = dyn_cast<StageOp>(op))
    return lowerStage(stage);
  if (auto when = dyn_cast<WhenOp>(op))
    return lowerWhen(when);
  if (isRowOp(op))
    return lowerRowLoop({op});
  if (op->getDialect() && isa<MoeDialect>(op->getDialect()))
    return lowerWholeOp(op);
  return op->emitOpError() << "cannot be lowered to loops inside a moe.router";
}

LogicalResult RouterLowering::lowerBlock(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (size_t i = 0; i < ops.size(); ++i) {
    // On the host, a run of token-loop stages (each but the last with row ops only:
    // softmax then routing) becomes ONE token loop, so a token's row is still in
    // cache when the next stage reads it. The GPU form keeps one loop per stage.
    auto stage = dyn_cast<StageOp>(ops[i]);
    if (!laneParallel && stage && hasRowLoop(stage)) {
      SmallVector<StageOp> run{stage};
      while (onlyRowOps(run.back()) && i + 1 < ops.size()) {
        auto next = dyn_cast<StageOp>(ops[i + 1]);
        if (!next || !hasRowLoop(next))
          break;
        run.push_back(next);
        ++i;
      }
      if (failed(lowerStages(run)))
        return failure();
      continue;
    }
    if (failed(lowerOp(ops[i])))
      return failure();
  }
  return success();
}

/// What values an argument of the policy may hold, beyond its type, from how the body
/// uses it: a moe.when's phase (0, 1, 2), or expert ids (-1 or [0, E)) read by an op
/// that indexes per-expert data with them. The runtime checks inputs against it.
static std::pair<StringRef, int64_t> valueRule(BlockArgument arg, int64_t experts) {
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (auto when = dyn_cast<WhenOp>(user); when && when.getPhase() == arg)
      return {"phase", 0};
    if (auto reader = dyn_cast<ExpertIdsReaderOpInterface>(user);
        reader && reader.getExpertIds() == arg)
      return {"expert_ids", experts};
  }
  return {"", 0};
}

/// A knob's rule as the C entry checks it and the runtime reports it (`#moe.rule`).
static KnobRuleAttr knobRuleAttr(MLIRContext *ctx, const ScalarRule &rule, Operation *op) {
  Builder b(ctx);
  std::string where;
  llvm::raw_string_ostream os(where);
  os << op->getName();
  if (auto file = op->getLoc()->findInstanceOf<FileLineColLoc>())
    os << " at " << llvm::sys::path::filename(file.getFilename().getValue()) << ":"
       << file.getLine() << ":" << file.getColumn();
  auto flag = [&](bool set) { return set ? b.getBoolAttr(true) : BoolAttr(); };
  auto real = [&](std::optional<double> v) {
    return v ? b.getF64FloatAttr(*v) : FloatAttr();
  };
  // The knob as its user writes it ("set_budget must be in [0, 16]"), the op's own name
  // for the parameter beside the op when it differs ("min_size of moe.fill at ...");
  // a relation names its operands itself.
  std::string knob = rule.value.getDefiningOp<KnobOp>().getName().str();
  if (rule.relation.empty() && knob != rule.name)
    where = rule.name + " of " + where;
  StringAttr text = b.getStringAttr(rule.relation.empty() ? knob + " " + rule.requirement()
                                                          : rule.relation);
  return KnobRuleAttr::get(
      ctx, text, b.getStringAttr(where), flag(rule.isFloat), rule.lo, rule.hi,
      flag(rule.finite), flag(rule.notNaN), flag(rule.nonzero), real(rule.min),
      real(rule.max), flag(rule.minOpen), flag(rule.maxOpen),
      rule.relation.empty() ? StringAttr() : b.getStringAttr(rule.relation));
}

FailureOr<func::FuncOp> RouterLowering::run() {
  MLIRContext *ctx = router.getOperation()->getContext();
  Location loc = router.getLoc();
  Builder attrs(ctx);
  SmallVector<Type> params{b.getIndexType()};
  SmallVector<AbiParamAttr> abi;
  std::pair<StringRef, int64_t> values{"", 0}; // the value rule of the next argument
  auto describe = [&](StringRef name, AbiRole role, AbiKind kind, Type type,
                      std::optional<std::array<int64_t, 3>> rule) {
    bool valued = !values.first.empty() && role == AbiRole::in;
    abi.push_back(AbiParamAttr::get(
        ctx, attrs.getStringAttr(name), role, kind, type,
        rule ? attrs.getDenseI64ArrayAttr(*rule) : DenseI64ArrayAttr(),
        valued ? attrs.getStringAttr(values.first) : StringAttr(),
        valued && values.first == "expert_ids" ? std::optional<int64_t>(values.second)
                                               : std::nullopt,
        Attribute(), ArrayAttr()));
    params.push_back(type);
  };
  describe("num_tokens", AbiRole::in, AbiKind::tokens, b.getIndexType(), std::nullopt);
  params.pop_back(); // T is params[0] already

  auto yield = cast<YieldOp>(router.getBodyBlock().getTerminator());
  for (auto [i, type] : llvm::enumerate(router.getArgumentTypes())) {
    StringRef name = cast<StringAttr>(router.getArgNames()[i]).getValue();
    values = valueRule(router.getBodyBlock().getArgument(i), router.getExperts());
    if (auto placement = dyn_cast<PlacementType>(type)) {
      int64_t e = placement.getExperts();
      describe((name + ".replica_count").str(), AbiRole::in, AbiKind::placement_replicas,
               MemRefType::get({e}, b.getI32Type()), std::nullopt);
      describe((name + ".log2phy").str(), AbiRole::in, AbiKind::placement_log2phy,
               MemRefType::get({e, placement.getMaxReplicas()}, b.getI32Type()),
               std::nullopt);
    } else if (isa<ExpertSetType>(type)) {
      describe(name, AbiRole::in, AbiKind::set, storageType(type), std::nullopt);
    } else if (auto tensor = dyn_cast<RankedTensorType>(type)) {
      std::optional<std::array<int64_t, 3>> rule;
      if (tensor.getRank() && tensor.isDynamicDim(0))
        rule = std::array<int64_t, 3>{1, 0, 1};
      describe(name, AbiRole::in, AbiKind::tensor, storageType(type), rule);
    } else if (type.isIntOrFloat()) {
      describe(name, AbiRole::in, AbiKind::scalar, type, std::nullopt);
    } else {
      return router.getOperation()->emitOpError()
             << "argument '" << name << "' of type " << type
             << " cannot be passed to compiled code";
    }
  }
  values = {"", 0};
  for (auto [j, type] : llvm::enumerate(router.getResultTypes())) {
    StringRef name = cast<StringAttr>(router.getResultNames()[j]).getValue();
    if (!isa<ExpertSetType, RankedTensorType>(type))
      return router.getOperation()->emitOpError()
             << "result '" << name << "' of type " << type
             << " cannot be returned by compiled code";
    std::optional<std::array<int64_t, 3>> rule;
    if (auto tensor = dyn_cast<RankedTensorType>(type);
        tensor && tensor.getRank() && tensor.isDynamicDim(0))
      rule = getDynamicSizeRule(yield.getOperand(j));
    describe(name, AbiRole::out, isa<ExpertSetType>(type) ? AbiKind::set : AbiKind::tensor,
             storageType(type), rule);
  }

  // Knobs left tunable (not frozen by moe-freeze-knobs) are run-time parameters after
  // the outputs; each carries its default and the rules of the ops that use it, which
  // the C entry checks (moe-emit-c-entry).
  SmallVector<KnobOp> knobs;
  router.getOperation()->walk([&](KnobOp knob) { knobs.push_back(knob); });
  llvm::DenseMap<Value, SmallVector<Attribute>> knobRules;
  router.getOperation()->walk([&](ScalarRulesOpInterface op) {
    SmallVector<ScalarRule> rules;
    op.getScalarRules(rules);
    for (const ScalarRule &rule : rules)
      if (rule.value && rule.value.getDefiningOp<KnobOp>())
        knobRules[rule.value].push_back(knobRuleAttr(ctx, rule, op));
  });
  for (KnobOp knob : knobs) {
    abi.push_back(AbiParamAttr::get(
        ctx, attrs.getStringAttr(knob.getName()), AbiRole::knob, AbiKind::scalar,
        knob.getType(), DenseI64ArrayAttr(), StringAttr(), std::nullopt, knob.getValue(),
        attrs.getArrayAttr(knobRules.lookup(knob.getResult()))));
    params.push_back(knob.getType());
  }

  b.setInsertionPointAfter(router.getOperation());
  auto func = func::FuncOp::create(b, loc, router.getSymName(),
                                   b.getFunctionType(params, TypeRange{}));
  setAbi(func, AbiAttr::get(ctx, abi));
  func->setAttr(MoeDialect::KindAttrHelper::getNameStr(),
                b.getStringAttr(router.getKind()));
  func->setAttr(MoeDialect::TopKAttrHelper::getNameStr(),
                b.getI64IntegerAttr(router.getTopK()));
  func->setAttr(MoeDialect::ExpertsAttrHelper::getNameStr(),
                b.getI64IntegerAttr(router.getExperts()));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  numTokens = entry->getArgument(0);

  // Bind the router's arguments and results to the function's parameters.
  unsigned p = 1;
  for (auto [i, arg] : llvm::enumerate(router.getBodyBlock().getArguments())) {
    Stored &s = stored[arg];
    if (isa<PlacementType>(arg.getType())) {
      s.replicas = entry->getArgument(p++);
      s.log2phy = entry->getArgument(p++);
    } else if (isa<MemRefType>(params[p])) {
      s.mem = entry->getArgument(p++);
    } else {
      s.scalar = entry->getArgument(p++);
    }
  }
  SmallVector<Value> outputs;
  for (Value v : yield.getOperands()) {
    outputs.push_back(entry->getArgument(p++));
    if (!isa<BlockArgument>(v))
      destinations.try_emplace(v, outputs.back());
  }

  for (auto [j, knob] : llvm::enumerate(knobs)) {
    stored[knob.getResult()].scalar = entry->getArgument(p++);
    knobIndex[knob.getResult()] = int32_t(j);
  }
  entryBlock = entry;

  if (failed(lowerBlock(router.getBodyBlock())))
    return failure();
  for (auto [v, out] : llvm::zip(yield.getOperands(), outputs))
    if (mem(v) != out)
      copyInto(out, mem(v), v);
  for (Value temp : temporaries)
    memref::DeallocOp::create(b, loc, temp);
  if (!statusSlot) {
    func::ReturnOp::create(b, loc);
    return func;
  }
  // A run-time rule was checked: the body returns its status (moe-emit-c-entry).
  func::ReturnOp::create(b, loc, memref::LoadOp::create(b, loc, statusSlot).getResult());
  func.setFunctionType(b.getFunctionType(params, b.getI32Type()));
  return func;
}

void RouterLowering::failIf(Value broken, ValueRange operands) {
  auto knob = llvm::find_if(operands, [&](Value v) { return knobIndex.count(v) != 0; });
  if (knob == operands.end())
    return;
  Location loc = router.getLoc();
  if (!statusSlot) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entryBlock);
    statusSlot = memref::AllocaOp::create(b, loc, MemRefType::get({}, b.getI32Type()));
    memref::StoreOp::create(b, loc, arith::ConstantIntOp::create(b, loc, 0, 32),
                            statusSlot);
  }
  int32_t status = 2 + knobIndex.lookup(*knob);
  emitter.ifThen(broken, [&] {
    memref::StoreOp::create(b, loc, arith::ConstantIntOp::create(b, loc, status, 32),
                            statusSlot);
  });
}

} // namespace switchyard::moe
