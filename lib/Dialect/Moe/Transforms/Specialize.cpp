//===- Specialize.cpp - moe-specialize: bind generic policies to a shape --===//
#include "switchyard/Dialect/Moe/Transforms/Specialize.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/KnobDiagnostics.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOESPECIALIZE
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

static bool isParam(int64_t v) { return ShapedType::isDynamic(v); }

/// The member of an integer parameter; null for another kind.
static const std::optional<Bound<int64_t>> *
intMember(const std::optional<Bound<int64_t>> &member) {
  return &member;
}
template <typename T>
static const std::optional<Bound<int64_t>> *intMember(const std::optional<Bound<T>> &) {
  return nullptr;
}

const std::optional<Bound<int64_t>> *ShapeRequest::size(StringRef name) const {
#define SHAPE_PARAMETER(FIELD, KIND, NAME, ...)                                            \
  if (name == NAME)                                                                        \
    return intMember(FIELD);
#include "switchyard/Dialect/Moe/ShapeParameters.def"
  return nullptr;
}

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
    // Which policies are generic, before anything is bound.
    llvm::SmallPtrSet<Operation *, 4> generic;
    for (PolicyOpInterface p : policies)
      if (isParam(p.getExperts()) || isParam(p.getTopK()) || hasGenericSizes(p))
        generic.insert(p);
    for (PolicyOpInterface p : policies)
      if (failed(bindExperts(p)))
        return failure();
    for (RouterOp router : routers)
      if (failed(bindRouter(router)))
        return failure();
    for (PolicyOpInterface p : policies) {
      ShapeBinding binding;
      if (failed(bindSizes(p, binding)) ||
          (generic.contains(p) && failed(refinePolicy(p, binding))))
        return failure();
      if (auto router = dyn_cast<RouterOp>(p.getOperation())) {
        replaceParams(router);
        warnOnLargeBudgets(router);
      }
    }
    return success();
  }

private:
  /// Every size parameter of the ops in `p`, with the op that has it.
  static void forEachSize(PolicyOpInterface p,
                          function_ref<void(Operation *, const SizeParameter &)> fn) {
    p->walk([&](ShapeRefinementOpInterface op) {
      SmallVector<SizeParameter> params;
      op.getSizeParameters(params);
      for (const SizeParameter &param : params) {
        assert(lookupShapeParameter(param.name) &&
               "a size parameter missing from ShapeParameters.def");
        fn(op, param);
      }
    });
  }

  static bool hasGenericSizes(PolicyOpInterface p) {
    bool generic = false;
    forEachSize(p, [&](Operation *, const SizeParameter &param) {
      generic |= isParam(param.value);
    });
    return generic;
  }

  /// A request that no policy of the module uses is an error; a model config's value
  /// is only where it could have changed a routing decision (see Bound::fromModel).
  LogicalResult checkUsed() {
    Location loc = policies.empty() ? module.getLoc() : policies.front()->getLoc();
    llvm::StringSet<> used = {"experts"};
    if (!routers.empty())
      for (StringRef name : {"top_k", "shared_experts", "scaling", "norm_topk_prob"})
        used.insert(name);
    for (PolicyOpInterface p : policies) {
      forEachSize(
          p, [&](Operation *, const SizeParameter &param) { used.insert(param.name); });
      if (llvm::any_of(p.getArgumentTypes(), llvm::IsaPred<PlacementType>)) {
        used.insert("devices");
        used.insert("slots");
      }
    }
    // The table's every parameter ("experts" is always used).
    auto check = [&](StringRef name, const auto &bound) -> LogicalResult {
      if (!bound || used.contains(name) || request.allowUnused)
        return success();
      if (bound->fromModel && (routers.empty() || name == "hidden_size"))
        return success();
      return emitError(loc) << bound->source
                            << " is not used by this policy file: no router or rule in it "
                               "has a `"
                            << name << "` parameter";
    };
#define SHAPE_PARAMETER(FIELD, KIND, NAME, ...)                                            \
  if (failed(check(NAME, request.FIELD)))                                                  \
    return failure();
#include "switchyard/Dialect/Moe/ShapeParameters.def"
    return success();
  }

  /// Binds `current` (a policy's parameter `what`, `?` when generic) to `wanted`.
  LogicalResult bindValue(Operation *at, StringRef what, int64_t &current,
                          const std::optional<Bound<int64_t>> &wanted,
                          std::optional<int64_t> fallback = std::nullopt,
                          bool mayDiffer = false) {
    if (!isParam(current)) {
      if (wanted && wanted->value != current && !mayDiffer)
        return at->emitError() << wanted->source << " conflicts with " << describe(at)
                               << ", which fixes " << what << " = " << current;
      return success();
    }
    if (wanted)
      current = wanted->value;
    else if (fallback)
      current = *fallback;
    else
      return at->emitError() << describe(at) << " is generic in " << what << ": bind it ("
                             << flagFor(what) << " or --model)";
    if (current < 1)
      return at->emitError() << (wanted ? wanted->source : std::string(what)) << ": "
                             << what << " must be >= 1";
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
      return p->emitError() << request.experts->source
                            << ": experts must be <= " << kMaxExperts;
    p.setExperts(experts);
    return success();
  }

  LogicalResult bindRouter(RouterOp router) {
    Builder b(router.getContext());
    int64_t topK = router.getTopK();
    if (failed(bindValue(router, "top_k", topK, request.topK)))
      return failure();
    if (topK > router.getExperts())
      return router.emitError()
             << "top_k = " << topK << " is more than the " << router.getExperts()
             << " experts of " << describe(router);
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
    if (!request.scaling && !request.normTopkProb)
      return success();

    WalkResult walk = router.getBody().walk([&](RouteOp route) {
      if (request.scaling) {
        if (!(request.scaling->value > 0) || !std::isfinite(request.scaling->value)) {
          route.emitError() << request.scaling->source
                            << ": the routed scaling factor must be finite and > 0";
          return WalkResult::interrupt();
        }
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
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// The value a size parameter of `p` takes: E and (in a router) k are the policy's;
  /// a rule's k is the request's or its file's router's; the rest come from the request.
  std::optional<Bound<int64_t>> wantedSize(PolicyOpInterface p, StringRef name) {
    if (name == "experts")
      return Bound<int64_t>{p.getExperts(), describe(p) + "'s experts"};
    if (name == "top_k") {
      if (p.isRouter())
        return Bound<int64_t>{p.getTopK(), describe(p) + "'s top_k"};
      if (!request.topK && !routers.empty())
        return Bound<int64_t>{routers.front().getTopK(),
                              describe(routers.front()) + "'s top_k"};
    }
    return *request.size(name);
  }

  /// Binds the size parameters of every op in `p` (ShapeRefinementOpInterface::
  /// getSizeParameters) and records the bound values in `binding`.
  LogicalResult bindSizes(PolicyOpInterface p, ShapeBinding &binding) {
    binding.experts = p.getExperts();
    binding.topK = p.isRouter() ? p.getTopK() : ShapedType::kDynamic;
    if (std::optional<Bound<int64_t>> k = wantedSize(p, "top_k"))
      binding.topK = k->value;
    if (request.slots)
      binding.slots = request.slots->value;
    if (request.hidden)
      binding.hidden = request.hidden->value;
    LogicalResult result = success();
    forEachSize(p, [&](Operation *op, const SizeParameter &param) {
      if (failed(result))
        return;
      int64_t value = param.value;
      if (failed(bindValue(op, param.name, value, wantedSize(p, param.name), std::nullopt,
                           param.mayDiffer))) {
        result = failure();
        return;
      }
      if (!param.attr.empty())
        op->setAttr(param.attr, Builder(op).getI64IntegerAttr(value));
      if (param.name == "slots")
        binding.slots = value;
      else if (param.name == "hidden_size")
        binding.hidden = value;
      else if (param.name == "top_k" && !p.isRouter())
        binding.topK = value;
    });
    return result;
  }

  /// Gives a generic policy's arguments, ops and results their bound types.
  LogicalResult refinePolicy(PolicyOpInterface policy, ShapeBinding &binding) {
    Block &body = policy.getBodyBlock();
    SmallVector<Type> argTypes;
    for (BlockArgument arg : body.getArguments()) {
      FailureOr<Type> type = bindArgument(policy, arg, binding);
      if (failed(type))
        return failure();
      binding.writtenTypes[arg] = arg.getType();
      arg.setType(*type);
      argTypes.push_back(*type);
    }
    if (failed(refineBlock(body, binding)))
      return failure();
    policy.setFunctionTypeAttr(TypeAttr::get(FunctionType::get(
        policy->getContext(), argTypes, body.getTerminator()->getOperandTypes())));
    return success();
  }

  FailureOr<Type> bindArgument(PolicyOpInterface policy, BlockArgument arg,
                               ShapeBinding &binding) {
    Type type = arg.getType();
    if (isa<ExpertSetType>(type))
      return Type(ExpertSetType::get(policy->getContext(), binding.experts));
    if (auto placement = dyn_cast<PlacementType>(type)) {
      int64_t experts = placement.getExperts(), devices = placement.getDevices(),
              slots = placement.getSlots();
      if (failed(bindValue(policy, "devices", devices, request.devices)) ||
          failed(bindValue(policy, "slots", slots, request.slots, binding.experts)))
        return failure();
      if (!isParam(experts) && experts != binding.experts)
        return policy->emitError() << "argument '" << argName(policy, arg) << "' places "
                                   << experts << " experts, expected " << binding.experts;
      auto bound = PlacementType::getChecked(
          [&] {
            return policy->emitError()
                   << "argument '" << argName(policy, arg) << "' bound to " << devices
                   << " devices and " << slots << " slots: ";
          },
          policy->getContext(), binding.experts, devices, slots);
      if (!bound)
        return failure();
      binding.slots = slots;
      return Type(bound);
    }
    // What the first user expects (ShapeRefinementOpInterface::bindOperandType).
    for (OpOperand &use : arg.getUses())
      if (auto user = dyn_cast<ShapeRefinementOpInterface>(use.getOwner()))
        return user.bindOperandType(use.getOperandNumber(), binding);
    return type;
  }

  static StringRef argName(PolicyOpInterface policy, BlockArgument arg) {
    return cast<StringAttr>(policy.getArgNames()[arg.getArgNumber()]).getValue();
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
      // The rows of ShapeParameters.def with PARAM = 1 (ParamOp's verifier).
      int64_t value = llvm::StringSwitch<int64_t>(p.getName())
                          .Case("experts", router.getExperts())
                          .Case("top_k", router.getTopK())
                          .Default(ShapedType::kDynamic);
      assert(!isParam(value) && "a moe.param name without a value in replaceParams");
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
      std::optional<int64_t> budget = getKnownInt(fill.getAmount());
      if (!budget || *budget <= experts)
        return;
      // A knob's default can be overridden per call: the warning names the knob (in
      // its metadata too), so that a caller who sets it can tell this warning is not
      // about its value.
      if (auto knob = fill.getAmount().getDefiningOp<KnobOp>()) {
        InFlightDiagnostic warning = fill.emitWarning();
        warning << "knob '" << knob.getName() << "' defaults to " << *budget
                << ", more than the " << experts
                << " experts: by default the policy selects every expert";
        setDiagnosticKnob(*warning.getUnderlyingDiagnostic(), knob.getName());
      } else
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
  for (PolicyOpInterface p : getPolicyOps(module))
    if (isParam(p.getExperts()) || isParam(p.getTopK()))
      return true;
  return false;
}

namespace {
struct MoeSpecializePass : switchyard::moe::impl::MoeSpecializeBase<MoeSpecializePass> {
  using MoeSpecializeBase::MoeSpecializeBase;

  /// An integer option: -1 is unset.
  LogicalResult take(std::optional<Bound<int64_t>> &into, int64_t value, StringRef name) {
    if (value != -1)
      into = Bound<int64_t>{value, (name + "=" + Twine(value)).str()};
    return success();
  }
  /// A number option: 0 is unset.
  LogicalResult take(std::optional<Bound<double>> &into, double value, StringRef name) {
    if (value != 0.0)
      into = Bound<double>{value, name.str() + "=" + std::to_string(value)};
    return success();
  }
  /// A boolean option is a string ("" unset, "true" or "false"), so that unset differs
  /// from false.
  LogicalResult take(std::optional<Bound<bool>> &into, const std::string &value,
                     StringRef name) {
    if (value.empty())
      return success();
    if (value != "true" && value != "false")
      return emitError(getOperation().getLoc())
             << name << " must be true or false, got '" << value << "'";
    into = Bound<bool>{value == "true", name.str() + "=" + value};
    return success();
  }

  void runOnOperation() override {
    // One option per row of ShapeParameters.def, of the same member name (a row
    // without its option in Passes.td does not compile).
    ShapeRequest request;
#define SHAPE_PARAMETER(FIELD, KIND, NAME, ...)                                            \
  if (failed(take(request.FIELD, FIELD, NAME)))                                            \
    return signalPassFailure();
#include "switchyard/Dialect/Moe/ShapeParameters.def"
    if (failed(specializePolicies(getOperation(), request)))
      signalPassFailure();
  }
};
} // namespace

namespace {
/// moe-specialize with a request built in C++ (sources name the tools' flags).
struct SpecializeWithRequest : PassWrapper<SpecializeWithRequest, OperationPass<ModuleOp>> {
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
