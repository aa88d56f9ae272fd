//===- FoldRouteSoftmax.cpp - moe-fold-route-softmax ----------------------===//
//
// A renormalized route weighted by the softmax of its own scores needs only the
// selected scores' exponentials: p[j] / sum_selected p = exp(s[j] - m) / sum_selected
// exp(s - m) for any m. The route takes `softmax_weights` and the softmax (E exp per
// token) goes away; the lowering computes k exp per token.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEFOLDROUTESOFTMAX
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

namespace {

struct FoldRouteSoftmaxPass
    : public switchyard::moe::impl::MoeFoldRouteSoftmaxBase<FoldRouteSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<RouteOp> routes;
    getOperation().walk([&](RouteOp route) { routes.push_back(route); });
    for (RouteOp route : routes) {
      // Top-p truncates on the probabilities themselves, and max_rank may empty the best
      // slot the folded form scales by: the softmax stays.
      if (!route.getRenormalize() || route.getSoftmaxWeights() || !route.getWeights() ||
          route.getTopP() || route.getMaxRank())
        continue;
      auto softmax = route.getWeights().getDefiningOp<SoftmaxOp>();
      if (!softmax || softmax.getInput() != route.getScores() ||
          !softmax.getResult().hasOneUse())
        continue;
      route.getWeightsMutable().clear();
      route.setSoftmaxWeights(true);
      softmax.erase();
    }
  }
};

} // namespace
