//===- Specialize.cpp - moe-specialize: bind generic policies to a shape --===//
#include "switchyard/Dialect/Moe/Transforms/Specialize.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOESPECIALIZE
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

static bool isParam(int64_t v) { return ShapedType::isDynamic(v); }

namespace {
/// Binds one module's policies (see specializePolicies).
class Specializer {
public:
  Specializer(ModuleOp module, const ShapeRequest &request)
      : module(module), request(request), policies(getPolicyOps(module)) {
    for (PolicyOpInterface p : policies)
      if (auto router = dyn_cast<RouterOp>(p.getOperation()))
        routers.push_back(router);
  }

  LogicalResult run() {
    if (failed(checkUsed()))
      return failure();
    for (PolicyOpInterface p : policies)
      if (failed(bindExperts(p)))
        return failure();
    for (RouterOp router : routers) {
      bool generic = isParam(router.getExperts()) || isParam(router.getTopK());
      if (failed(bindRouter(router)) || (generic && failed(refineRouter(router))))
        return failure();
      replaceParams(router);
      warnOnLargeBudgets(router);
    }
    return success();
  }

private:
  /// A request that no policy of the module uses is an error.
  LogicalResult checkUsed() {
    Location loc = policies.empty() ? module.getLoc() : policies.front()->getLoc();
    auto unused = [&](const std::string &source, StringRef why) {
      return emitError(loc) << source << " is not used by this policy file: " << why;
    };
    auto any = [&](auto predicate) { return llvm::any_of(routers, predicate); };
    bool hasGroups = any([](RouterOp r) {
      return r.getBody().walk([](GroupLimitOp) { return WalkResult::interrupt(); })
          .wasInterrupted();
    });
    bool hasPlacement = any([](RouterOp r) {
      return llvm::any_of(r.getArgumentTypes(), llvm::IsaPred<PlacementType>);
    });
    if (routers.empty()) {
      for (const auto *b : {&request.topK, &request.sharedExperts})
        if (*b)
          return unused((*b)->source, "it has no moe.router");
      if (request.scaling)
        return unused(request.scaling->source, "it has no moe.router");
      if (request.normTopkProb)
        return unused(request.normTopkProb->source, "it has no moe.router");
    }
    for (const auto *b : {&request.groups, &request.topkGroups})
      if (*b && !hasGroups)
        return unused((*b)->source, "no router limits expert groups (moe.group_limit)");
    for (const auto *b : {&request.devices, &request.slots})
      if (*b && !hasPlacement)
        return unused((*b)->source, "no router takes a !moe.placement");
    return success();
  }

  /// Binds `current` (a policy's parameter `what`, `?` when generic) to `wanted`.
  LogicalResult bindValue(Operation *at, StringRef what, int64_t &current,
                          const std::optional<Bound<int64_t>> &wanted,
                          std::optional<int64_t> fallback = std::nullopt) {
    if (!isParam(current)) {
      if (wanted && wanted->value != current)
        return at->emitError() << wanted->source << " conflicts with " << describe(at)
                               << ", which fixes " << what << " = " << current;
      return success();
    }
    if (wanted)
      current = wanted->value;
    else if (fallback)
      current = *fallback;
    else
      return at->emitError() << describe(at) << " is generic in " << what
                             << ": bind it (" << flagFor(what) << " or --model)";
    if (current < 1)
      return at->emitError() << (wanted ? wanted->source : std::string(what))
                             << ": " << what << " must be >= 1";
    return success();
  }

  static std::string describe(Operation *op) {
    if (auto p = dyn_cast<PolicyOpInterface>(op))
      return (p.isRouter() ? "router @" : (p.getKind() + " rule @").str()) +
             p.getSymName().str();
    auto policy = op->getParentOfType<PolicyOpInterface>();
    return ("'" + op->getName().getStringRef() + "' in " +
            (policy ? describe(policy) : std::string("the module")))
        .str();
  }

  static std::string flagFor(StringRef what) {
    std::string flag = "--" + what.str();
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
  }

  LogicalResult bindExperts(PolicyOpInterface p) {
    int64_t experts = p.getExperts();
    if (failed(bindValue(p, "experts", experts, request.experts)))
      return failure();
    if (experts > kMaxExperts)
      return p->emitError() << request.experts->source << ": experts must be <= "
                            << kMaxExperts;
    if (auto router = dyn_cast<RouterOp>(p.getOperation()))
      router.setExperts(experts);
    return success();
  }

  LogicalResult bindRouter(RouterOp router) {
    Builder b(router.getContext());
    int64_t topK = router.getTopK();
    if (failed(bindValue(router, "top_k", topK, request.topK)))
      return failure();
    if (topK > router.getExperts())
      return router.emitError() << "top_k = " << topK << " is more than the "
                                << router.getExperts() << " experts of "
                                << describe(router);
    router.setTopK(topK);

    if (request.sharedExperts) {
      int64_t wanted = request.sharedExperts->value;
      // 0 (the default) is "the policy does not say": the model binds it.
      if (router.getSharedExperts() != 0 && router.getSharedExperts() != wanted)
        return router.emitError()
               << request.sharedExperts->source << " conflicts with " << describe(router)
               << ", which fixes shared_experts = " << router.getSharedExperts();
      if (wanted < 0)
        return router.emitError() << request.sharedExperts->source << " must be >= 0";
      router.setSharedExperts(wanted);
    }

    WalkResult walk = router.getBody().walk([&](Operation *op) {
      LogicalResult ok = success();
      if (auto route = dyn_cast<RouteOp>(op)) {
        if (isParam(route.getK()))
          route.setK(topK);
        if (request.scaling) {
          if (!(request.scaling->value > 0) || !std::isfinite(request.scaling->value))
            ok = route.emitError() << request.scaling->source
                                   << ": the routed scaling factor must be finite and > 0";
          // A route scaled by a knob: the model's factor becomes the knob's default.
          if (auto knob = route.getScalingFactor()
                              ? route.getScalingFactor().getDefiningOp<KnobOp>()
                              : KnobOp())
            knob.setValueAttr(b.getF32FloatAttr(float(request.scaling->value)));
          else
            route.setScalingAttr(b.getF32FloatAttr(float(request.scaling->value)));
        }
        if (request.normTopkProb)
          route.setRenormalize(request.normTopkProb->value);
      } else if (auto topk = dyn_cast<TopKOp>(op)) {
        if (isParam(topk.getK()))
          topk.setK(topK);
      } else if (auto limit = dyn_cast<GroupLimitOp>(op)) {
        int64_t groups = limit.getGroups(), keep = limit.getTopkGroups();
        ok = failed(bindValue(op, "groups", groups, request.groups)) ||
                     failed(bindValue(op, "topk_groups", keep, request.topkGroups))
                 ? failure()
                 : success();
        limit.setGroups(groups);
        limit.setTopkGroups(keep);
      }
      return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// Gives a generic router's arguments, ops and results their bound types.
  LogicalResult refineRouter(RouterOp router) {
    ShapeBinding binding;
    binding.experts = router.getExperts();
    binding.topK = router.getTopK();
    Block &body = router.getBody().front();
    SmallVector<Type> argTypes;
    for (BlockArgument arg : body.getArguments()) {
      FailureOr<Type> type = bindArgument(router, arg, binding);
      if (failed(type))
        return failure();
      binding.writtenTypes[arg] = arg.getType();
      arg.setType(*type);
      argTypes.push_back(*type);
    }
    if (failed(refineBlock(body, binding)))
      return failure();
    router.setFunctionTypeAttr(TypeAttr::get(FunctionType::get(
        router.getContext(), argTypes, body.getTerminator()->getOperandTypes())));
    return success();
  }

  FailureOr<Type> bindArgument(RouterOp router, BlockArgument arg,
                               const ShapeBinding &binding) {
    Type type = arg.getType();
    if (isa<ExpertSetType>(type))
      return Type(ExpertSetType::get(router.getContext(), binding.experts));
    if (auto placement = dyn_cast<PlacementType>(type)) {
      int64_t experts = placement.getExperts(), devices = placement.getDevices(),
              slots = placement.getSlots();
      if (failed(bindValue(router, "devices", devices, request.devices)) ||
          failed(bindValue(router, "slots", slots, request.slots, binding.experts)))
        return failure();
      if (!isParam(experts) && experts != binding.experts)
        return router.emitError() << "argument '" << argName(router, arg)
                                  << "' places " << experts << " experts, expected "
                                  << binding.experts;
      auto bound = PlacementType::getChecked(
          [&] {
            return router.emitError()
                   << "argument '" << argName(router, arg) << "' bound to " << devices
                   << " devices and " << slots << " slots: ";
          },
          router.getContext(), binding.experts, devices, slots);
      if (!bound)
        return failure();
      return Type(bound);
    }
    // What the first user expects (ShapeRefinementOpInterface::bindOperandType).
    for (OpOperand &use : arg.getUses())
      if (auto user = dyn_cast<ShapeRefinementOpInterface>(use.getOwner()))
        return user.bindOperandType(use.getOperandNumber(), binding);
    return type;
  }

  static StringRef argName(RouterOp router, BlockArgument arg) {
    return cast<StringAttr>(router.getArgNames()[arg.getArgNumber()]).getValue();
  }

  /// Nested regions first, so that an op's results follow what its regions yield.
  LogicalResult refineBlock(Block &block, ShapeBinding &binding) {
    for (Operation &op : block) {
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          if (failed(refineBlock(nested, binding)))
            return failure();
      auto refinable = dyn_cast<ShapeRefinementOpInterface>(&op);
      if (!refinable || op.getNumResults() == 0)
        continue;
      SmallVector<Type> types;
      if (failed(refinable.refineResultTypes(binding, types)))
        return failure();
      for (auto [result, type] : llvm::zip_equal(op.getResults(), types)) {
        binding.writtenTypes[result] = result.getType();
        result.setType(type);
      }
    }
    return success();
  }

  /// `moe.param` values become constants of the bound router.
  static void replaceParams(RouterOp router) {
    SmallVector<ParamOp> params;
    router.getBody().walk([&](ParamOp p) { params.push_back(p); });
    for (ParamOp p : params) {
      OpBuilder b(p);
      int64_t value = p.getName() == "experts" ? router.getExperts() : router.getTopK();
      p.replaceAllUsesWith(
          arith::ConstantOp::create(b, p.getLoc(), b.getI64IntegerAttr(value)).getResult());
      p.erase();
    }
  }

  static void warnOnLargeBudgets(RouterOp router) {
    int64_t experts = router.getExperts();
    router.getBody().walk([&](FillOp fill) {
      if (fill.getMode() != FillMode::budget)
        return;
      if (std::optional<int64_t> budget = getKnownInt(fill.getAmount());
          budget && *budget > experts)
        fill.emitWarning() << "budget = " << *budget << " is more than the " << experts
                           << " experts: the policy will select every expert";
    });
  }

  ModuleOp module;
  const ShapeRequest &request;
  SmallVector<PolicyOpInterface> policies;
  SmallVector<RouterOp> routers;
};
} // namespace

LogicalResult switchyard::moe::specializePolicies(ModuleOp module,
                                                  const ShapeRequest &request) {
  return Specializer(module, request).run();
}

bool switchyard::moe::hasUnboundParameters(ModuleOp module) {
  for (PolicyOpInterface p : getPolicyOps(module)) {
    if (isParam(p.getExperts()))
      return true;
    if (auto router = dyn_cast<RouterOp>(p.getOperation()))
      if (isParam(router.getTopK()))
        return true;
  }
  return false;
}

namespace {
struct MoeSpecializePass : switchyard::moe::impl::MoeSpecializeBase<MoeSpecializePass> {
  using MoeSpecializeBase::MoeSpecializeBase;

  void runOnOperation() override {
    ShapeRequest request;
    auto take = [](std::optional<Bound<int64_t>> &into, int64_t value, StringRef name) {
      if (value != -1)
        into = Bound<int64_t>{value, (name + "=" + Twine(value)).str()};
    };
    take(request.experts, experts, "experts");
    take(request.topK, topK, "top_k");
    take(request.groups, groups, "groups");
    take(request.topkGroups, topkGroups, "topk_groups");
    take(request.devices, devices, "devices");
    take(request.slots, slots, "slots");
    take(request.sharedExperts, sharedExperts, "shared_experts");
    if (scaling != 0.0)
      request.scaling = Bound<double>{scaling, "scaling=" + std::to_string(scaling)};
    if (!normTopkProb.empty()) {
      if (normTopkProb != "true" && normTopkProb != "false") {
        emitError(getOperation().getLoc())
            << "norm_topk_prob must be true or false, got '" << normTopkProb << "'";
        return signalPassFailure();
      }
      request.normTopkProb =
          Bound<bool>{normTopkProb == "true", "norm_topk_prob=" + normTopkProb};
    }
    if (failed(specializePolicies(getOperation(), request)))
      signalPassFailure();
  }
};
} // namespace

namespace {
/// moe-specialize with a request built in C++ (sources name the tools' flags).
struct SpecializeWithRequest
    : PassWrapper<SpecializeWithRequest, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SpecializeWithRequest)
  explicit SpecializeWithRequest(ShapeRequest request) : request(std::move(request)) {}
  StringRef getArgument() const override { return "moe-specialize-request"; }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect>();
  }
  void runOnOperation() override {
    if (failed(specializePolicies(getOperation(), request)))
      signalPassFailure();
  }
  ShapeRequest request;
};
} // namespace

std::unique_ptr<Pass> switchyard::moe::createSpecializePass(ShapeRequest request) {
  return std::make_unique<SpecializeWithRequest>(std::move(request));
}
