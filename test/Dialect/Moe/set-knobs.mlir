// moe-set-knobs rewrites knob defaults by name; moe-freeze-knobs turns knobs into
// constants so that canonicalization can fold by their value.
// RUN: moe-opt %s --moe-set-knobs="values=budget=12,alpha=0.5" | FileCheck %s --check-prefix=SET
// RUN: moe-opt %s --moe-freeze-knobs | FileCheck %s --check-prefix=FREEZE
// RUN: moe-opt %s --moe-set-knobs="values=budget=0" --moe-freeze-knobs --canonicalize | FileCheck %s --check-prefix=FOLD

// Errors: every bad override is reported with the knob's location or by name, and the
// tool exits non-zero.
// RUN: not moe-opt %s --moe-set-knobs="values=bugdet=3" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not moe-opt %s --moe-set-knobs="values=budget=lots" 2>&1 | FileCheck %s --check-prefix=NOTINT
// RUN: not moe-opt %s --moe-set-knobs="values=budget" 2>&1 | FileCheck %s --check-prefix=FORM
// RUN: not moe-opt %s --moe-set-knobs="values=budget=-1" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not moe-opt %s --moe-set-knobs="values=alpha=0" 2>&1 | FileCheck %s --check-prefix=ALPHA

moe.router @r(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, bins: tensor<?x8xi32>)
    attributes {experts = 8, top_k = 2} {
  // SET: moe.knob "budget" = 12 : i64
  // SET: moe.knob "alpha" = 5.000000e-01 : f32
  // FREEZE-NOT: moe.knob
  // FREEZE-DAG: arith.constant 3 : i64
  // FREEZE-DAG: arith.constant 2.000000e+00 : f32
  // NOTINT: set-knobs.mlir:[[@LINE+1]]:13: error: knob 'budget' is 'i64' but the override 'lots' is not
  %budget = moe.knob "budget" = 3 : i64
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = arith.constant 2 : i64
  %one = arith.constant 1 : i64
  %p = moe.softmax %logits : tensor<?x8xf32>
  %warm = moe.union_topk %p, %one : tensor<?x8xf32> -> !moe.set<8>
  %mass = moe.batch_reduce sum %p : tensor<?x8xf32> -> tensor<8xf32>
  // FOLD-NOT: moe.fill
  // RANGE: set-knobs.mlir:[[@LINE+1]]:10: error: 'moe.fill' op budget must be in [0, inf], got -1
  %sel = moe.fill %warm with %mass budget(%budget : i64) : tensor<8xf32> -> !moe.set<8>
  // ALPHA: set-knobs.mlir:[[@LINE+1]]:11: error: 'moe.bins' op alpha must be > 0, got 0
  %bins = moe.bins %logits, %alpha, %beta : tensor<?x8xf32> -> tensor<?x8xi32>
  %ids, %w = moe.route %p within %sel k = 2 : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w, %bins : tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x8xi32>
}

// UNKNOWN: error: unknown knob 'bugdet' (the policy's knobs: budget, alpha)
// FORM: error: knob override 'budget' is not of the form name=value
