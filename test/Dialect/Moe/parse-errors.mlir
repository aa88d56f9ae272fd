// Malformed input is reported as file:line:col with a non-zero exit, never a crash.
// (Verifier rules are in errors.mlir; this file is about the parser.)
// RUN: not moe-opt %s -split-input-file 2>&1 | FileCheck %s
// RUN: not moe-opt %s -split-input-file 2>&1 | grep -c "error:" | FileCheck %s --check-prefix=COUNT
// COUNT: 10
// RUN: not moe-opt %s.does-not-exist 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: cannot open input file '{{.*}}parse-errors.mlir.does-not-exist': No such file or directory

// CHECK: parse-errors.mlir:[[@LINE+1]]:27: error: unknown {{ *}}type `bogus` in dialect `moe`
func.func private @f(!moe.bogus)

// -----

moe.router @r(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:8: error: custom op 'moe.frobnicate' is unknown
  %x = moe.frobnicate %logits : tensor<?x8xf32>
}

// -----

moe.router @r(%logits: tensor<?x8xf32>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  // An operand used with another type than it has.
  // CHECK: parse-errors.mlir:[[@LINE+1]]:20: error: use of value '%logits' expects different type than prior uses: 'tensor<?x8xi32>' vs 'tensor<?x8xf32>'
  %p = moe.softmax %logits : tensor<?x8xi32>
  moe.yield %p : !moe.set<8>
}

// -----

moe.router @r(%logits: tensor<?x8xf32>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:39: error: expected ':'
  %s = moe.union_topk %logits, %logits tensor<?x8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @r(%logits: tensor<?x8xf32>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:32: error: use of undeclared SSA value name
  %s = moe.union_topk %logits, %k0 : tensor<?x8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

// CHECK: parse-errors.mlir:[[@LINE+1]]:53: error: expected ':'
moe.router @r(%logits: tensor<?x8xf32>) -> (topk_ids tensor<?x2xi32>) {
}

// -----

moe.router @r(%logits: tensor<?x8xf32>, %phase: i32) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:83: error: custom op 'moe.when' unknown phase 'decoding' (expected prefill, decode or mixed)
  moe.when %logits : tensor<?x8xf32> phase(%phase : i32) max_tokens = 8 phases = [decoding] {
  } else {
  }
}

// -----

moe.router @r(%x: tensor<8xf32>, %s: !moe.set<8>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %m = arith.constant 1 : i64
  // CHECK: parse-errors.mlir:[[@LINE+1]]:28: error: custom op 'moe.fill' expected string or keyword containing one of the following enum values for attribute 'mode' [budget, threshold, min_size]
  %f = moe.fill %s with %x everything(%m : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %f : !moe.set<8>
}

// -----

// CHECK: parse-errors.mlir:[[@LINE+1]]:12: error: custom op 'moe.router' expected valid '@'-identifier for symbol name
moe.router r(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>) {
}

// -----

// An unterminated region is reported at the end of the input.
// CHECK: parse-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: expected operation name in quotes
moe.router @r(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x8xf32>
