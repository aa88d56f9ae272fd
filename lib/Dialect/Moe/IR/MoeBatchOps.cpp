//===- MoeBatchOps.cpp - batch reduction verifiers and folders ------------===//
#include "MoeVerifyUtils.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace switchyard::moe;
using namespace switchyard::moe::detail;

LogicalResult BatchReduceOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getInput().getType(), "input");
  if (failed(e))
    return failure();
  auto out = getResult().getType();
  if (out.getDimSize(0) != *e)
    return emitOpError() << "result must have one entry per expert (" << *e << "), got "
                         << out;
  bool isCount = getKind() == ReduceKind::count;
  Type want = isCount ? Type(IntegerType::get(getContext(), 32))
                      : Type(Float32Type::get(getContext()));
  if (out.getElementType() != want)
    return emitOpError() << "a '" << stringifyReduceKind(getKind()) << "' reduction yields "
                         << want << " elements, got " << out;
  if (isCount && !getTopk())
    return emitOpError() << "'count' needs 'over topk = k' to say which entries count";
  if (auto k = getTopk(); k && (*k < 1 || (!isParam(*e) && *k > *e)))
    return emitOpError() << "topk must be in [1, " << *e << "], got " << *k;
  if (getRows() && failed(verifySameTokens(*this, getInput().getType(), "input",
                                           getRows().getType(), "rows")))
    return failure();
  return success();
}

LogicalResult SegmentReduceOp::verify() {
  if (failed(verifyScoreMatrix(*this, getInput().getType(), "input")) ||
      failed(verifySameTokens(*this, getInput().getType(), "input",
                              getRequestIds().getType(), "request_ids")))
    return failure();
  if (getKind() == ReduceKind::count)
    return emitOpError()
           << "'count' is not a segment reduction (use 'sum' of a 0/1 matrix)";
  return success();
}

LogicalResult BinScoreOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getBins().getType(), "bins");
  if (failed(e) || failed(verifyIdMatrix(*this, getIds().getType(), "ids")) ||
      failed(
          verifySameTokens(*this, getBins().getType(), "bins", getIds().getType(), "ids")))
    return failure();
  if (getResult().getType().getDimSize(0) != *e)
    return emitOpError() << "result must have one entry per expert (" << *e << "), got "
                         << getResult().getType();
  int64_t k = getIds().getType().getDimSize(1);
  if (!isParam(k) && !isParam(*e) && k > *e)
    return emitOpError() << "ids hold " << k << " choices per token but there are only "
                         << *e << " experts";
  return success();
}

OpFoldResult BatchReduceOp::fold(FoldAdaptor) {
  // Every expert is in a token's top-E, so the filter does nothing (count keeps it:
  // it needs a top-k by definition).
  auto k = getTopk();
  if (k && getKind() != ReduceKind::count && *k == getInput().getType().getDimSize(1)) {
    removeTopkAttr();
    return getResult();
  }
  return {};
}
