// moe-lower-to-loops on the set family (SetOps.cpp; moe.difference from ResidencyOps.cpp,
// the fills' top-k from EmitHelpers.cpp): a !moe.set<8> is a memref<8xi8> of 0/1 flags.
// The set algebra is one loop over the experts; a fill copies its initial set into the
// result, then adds the best experts outside it (a sorted top-k list in [8] temporaries:
// strictly greater moves ahead, NaN last, ties keep the lower id); greedy rounds (fill by
// threshold, drop_lowest, fill_per_device) are arg-max / arg-min scans over the experts.
// Covers moe.union, moe.intersect, moe.difference, moe.threshold_set, moe.full_set,
// moe.empty_set, moe.fill (budget, threshold, min_size), moe.drop_lowest and
// moe.fill_per_device.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @algebra(
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<8xi8>, %[[B:[a-z0-9]+]]: memref<8xi8>, %[[MASS:[a-z0-9]+]]: memref<8xf32>,
// CHECK-SAME: %[[U:[a-z0-9]+]]: memref<8xi8>, %[[X:[a-z0-9]+]]: memref<8xi8>, %[[HOT:[a-z0-9]+]]: memref<8xi8>, %[[ALL:[a-z0-9]+]]: memref<8xi8>,
// CHECK-SAME: %[[THETA:[a-z0-9]+]]: f32)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i8
// CHECK-NOT: memref.alloc
// union: a | b.
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[BV:.*]] = memref.load %[[B]][%[[E]]] : memref<8xi8>
// CHECK:   %[[AV:.*]] = memref.load %[[A]][%[[E]]] : memref<8xi8>
// CHECK:   %[[OR:.*]] = arith.ori %[[AV]], %[[BV]] : i8
// CHECK:   memref.store %[[OR]], %[[U]][%[[E]]] : memref<8xi8>
// intersect: a & b.
// CHECK: scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[BV2:.*]] = memref.load %[[B]][%[[E2]]] : memref<8xi8>
// CHECK:   %[[AV2:.*]] = memref.load %[[A]][%[[E2]]] : memref<8xi8>
// CHECK:   %[[AND:.*]] = arith.andi %[[AV2]], %[[BV2]] : i8
// CHECK:   memref.store %[[AND]], %[[X]][%[[E2]]] : memref<8xi8>
// threshold_set: mass[e] >= theta (ordered: NaN is out).
// CHECK: scf.for %[[E3:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[M:.*]] = memref.load %[[MASS]][%[[E3]]] : memref<8xf32>
// CHECK:   %[[GE:.*]] = arith.cmpf oge, %[[M]], %[[THETA]] : f32
// CHECK:   %[[FLAG:.*]] = arith.extui %[[GE]] : i1 to i8
// CHECK:   memref.store %[[FLAG]], %[[HOT]][%[[E3]]] : memref<8xi8>
// full_set: every flag 1.
// CHECK: scf.for %[[E4:.*]] = %c0 to %c8 step %c1 {
// CHECK:   memref.store %[[ONE]], %[[ALL]][%[[E4]]] : memref<8xi8>
// CHECK: return
moe.router @algebra(%a: !moe.set<8>, %b: !moe.set<8>, %mass: tensor<8xf32>)
    -> (u: !moe.set<8>, x: !moe.set<8>, hot: !moe.set<8>, all: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %theta = moe.knob "theta" = 1.0 : f32
  %u = moe.union %a, %b : !moe.set<8>
  %x = moe.intersect %a, %b : !moe.set<8>
  %h = moe.threshold_set %mass, %theta : tensor<8xf32> -> !moe.set<8>
  %all = moe.full_set : !moe.set<8>
  moe.yield %u, %x, %h, %all : !moe.set<8>, !moe.set<8>, !moe.set<8>, !moe.set<8>
}

// difference: a & !b.
// CHECK-LABEL: func.func @difference(
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<8xi8>, %[[B:[a-z0-9]+]]: memref<8xi8>, %[[D:[a-z0-9]+]]: memref<8xi8>)
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[BV:.*]] = memref.load %[[B]][%[[E]]] : memref<8xi8>
// CHECK:   %[[OUT:.*]] = arith.cmpi eq, %[[BV]], %c0_i8 : i8
// CHECK:   %[[NOTB:.*]] = arith.extui %[[OUT]] : i1 to i8
// CHECK:   %[[AV:.*]] = memref.load %[[A]][%[[E]]] : memref<8xi8>
// CHECK:   %[[R:.*]] = arith.andi %[[AV]], %[[NOTB]] : i8
// CHECK:   memref.store %[[R]], %[[D]][%[[E]]] : memref<8xi8>
moe.router @difference(%a: !moe.set<8>, %b: !moe.set<8>) -> (d: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %d = moe.difference %a, %b : !moe.set<8>
  moe.yield %d : !moe.set<8>
}

// fill by budget: the initial set copied into the output; the knob clamped to [0, 8]
// as the count; the top-k of the experts not yet in the set (the two-phase sorted
// list); then the picked ids marked. The output is written in place.
// CHECK-LABEL: func.func @fill_budget(
// CHECK-SAME: %[[INIT:[a-z0-9]+]]: memref<8xi8>, %[[MASS:[a-z0-9]+]]: memref<8xf32>, %[[OUT:[a-z0-9]+]]: memref<8xi8>, %[[BUDGET:[a-z0-9]+]]: i64)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i8
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[F:.*]] = memref.load %[[INIT]][%[[E]]] : memref<8xi8>
// CHECK:   memref.store %[[F]], %[[OUT]][%[[E]]] : memref<8xi8>
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[BUDGET]], %c0_i64 : i64
// CHECK: %[[NONNEG:.*]] = arith.select %[[NEG]], %c0_i64, %[[BUDGET]] : i64
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[NONNEG]], %c8_i64 : i64
// CHECK: %[[K:.*]] = arith.index_cast %[[CLAMPED]] : i64 to index
// CHECK: %[[LV:.*]] = memref.alloc() : memref<8xf32>
// CHECK: %[[LI:.*]] = memref.alloc() : memref<8xindex>
// CHECK: %[[FILLED:.*]]:2 = scf.while (%{{.*}} = %c0, %{{.*}} = %c0) : (index, index) -> (index, index) {
// CHECK:   arith.cmpi ult, %{{.*}}, %[[K]] : index
// CHECK: } do {
// Only experts outside the set are candidates.
// CHECK:   %[[IN:.*]] = memref.load %[[OUT]][%{{.*}}] : memref<8xi8>
// CHECK:   %[[FREE:.*]] = arith.cmpi eq, %[[IN]], %c0_i8 : i8
// CHECK:   scf.if %[[FREE]] {
// CHECK:     memref.load %[[MASS]]
// CHECK:     scf.while
// CHECK:       arith.cmpf ogt
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8 step %c1 {
// CHECK:   memref.load %[[MASS]]
// CHECK:   scf.if
// CHECK: scf.for %[[J:.*]] = %c0 to %[[K]] step %c1 {
// CHECK:   %[[HAVE:.*]] = arith.cmpi ult, %[[J]], %[[FILLED]]#1 : index
// CHECK:   scf.if %[[HAVE]] {
// CHECK:     %[[ID:.*]] = memref.load %[[LI]][%[[J]]] : memref<8xindex>
// CHECK:     memref.store %[[ONE]], %[[OUT]][%[[ID]]] : memref<8xi8>
// CHECK: memref.dealloc %[[LV]]
// CHECK: memref.dealloc %[[LI]]
moe.router @fill_budget(%init: !moe.set<8>, %mass: tensor<8xf32>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %budget = moe.knob "budget" = 3 : i64
  %s = moe.fill %init with %mass budget(%budget : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// fill by threshold (XShare Alg. 1) from the empty set: the empty set is a cleared
// temporary copied into the output; target = tau * total mass; up to 8 rounds, each
// adding the arg-max outside the set while the set's mass is below the target.
// CHECK-LABEL: func.func @fill_threshold(
// CHECK-SAME: %[[MASS:[a-z0-9]+]]: memref<8xf32>, %[[OUT:[a-z0-9]+]]: memref<8xi8>, %[[TAU:[a-z0-9]+]]: f32)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NONE:.*]] = arith.constant -1 : i32
// CHECK: %[[EMPTY:.*]] = memref.alloc() : memref<8xi8>
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   memref.store %c0_i8, %[[EMPTY]][%[[E]]] : memref<8xi8>
// CHECK: scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[F:.*]] = memref.load %[[EMPTY]][%[[E2]]] : memref<8xi8>
// CHECK:   memref.store %[[F]], %[[OUT]][%[[E2]]] : memref<8xi8>
// CHECK: %[[TOTAL:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
// CHECK: %[[TARGET:.*]] = arith.mulf %[[TAU]], %[[TOTAL]] : f32
// CHECK: %[[HAVE:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args(%[[CUR:.*]] = %[[HAVE]]) -> (f32) {
// CHECK:   %[[BELOW:.*]] = arith.cmpf olt, %[[CUR]], %[[TARGET]] : f32
// CHECK:   %[[BEST:.*]]:2 = scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args(%{{.*}} = %[[NONE]], %{{.*}} = %[[ZERO]]) -> (i32, f32) {
// CHECK:     arith.cmpf ogt
// CHECK:   %[[FOUND:.*]] = arith.cmpi sge, %[[BEST]]#0, %c0_i32 : i32
// CHECK:   %[[ADD:.*]] = arith.andi %[[BELOW]], %[[FOUND]] : i1
// CHECK:   scf.if %[[ADD]] {
// CHECK:     %[[AT:.*]] = arith.index_cast %[[BEST]]#0 : i32 to index
// CHECK:     memref.store %c1_i8, %[[OUT]][%[[AT]]] : memref<8xi8>
// CHECK:   %[[MORE:.*]] = arith.addf %[[CUR]], %[[BEST]]#1 : f32
// CHECK:   %[[NEXT:.*]] = arith.select %[[ADD]], %[[MORE]], %[[CUR]] : f32
// CHECK:   scf.yield %[[NEXT]] : f32
// CHECK: memref.dealloc %[[EMPTY]]
moe.router @fill_threshold(%mass: tensor<8xf32>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %tau = moe.knob "tau" = 0.9 : f32
  %none = moe.empty_set : !moe.set<8>
  %s = moe.fill %none with %mass threshold(%tau : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// fill to a minimum size: the count is max(min_size - |S|, 0), |S| a popcount in i64.
// CHECK-LABEL: func.func @fill_min_size(
// CHECK-SAME: %[[INIT:[a-z0-9]+]]: memref<8xi8>, %[[MASS:[a-z0-9]+]]: memref<8xf32>, %[[OUT:[a-z0-9]+]]: memref<8xi8>)
// CHECK: scf.for
// CHECK:   memref.store %{{.*}}, %[[OUT]]
// CHECK: %[[SIZE:.*]] = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args(%[[N:.*]] = %c0_i64) -> (i64) {
// CHECK:   %[[F:.*]] = memref.load %[[OUT]][%[[E]]] : memref<8xi8>
// CHECK:   %[[W:.*]] = arith.extui %[[F]] : i8 to i64
// CHECK:   arith.addi %[[N]], %[[W]] : i64
// CHECK: %[[DIFF:.*]] = arith.subi %c2_i64, %[[SIZE]] : i64
// CHECK: %[[SHORT:.*]] = arith.cmpi slt, %[[SIZE]], %c2_i64 : i64
// CHECK: %[[MISSING:.*]] = arith.select %[[SHORT]], %[[DIFF]], %c0_i64 : i64
// CHECK: %[[K:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: scf.while
// CHECK:   arith.cmpi ult, %{{.*}}, %[[K]] : index
// CHECK: scf.for %{{.*}} = %c0 to %[[K]] step %c1 {
// CHECK:   memref.store %c1_i8, %[[OUT]]
moe.router @fill_min_size(%init: !moe.set<8>, %mass: tensor<8xf32>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %two = arith.constant 2 : i64
  %s = moe.fill %init with %mass min_size(%two : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// drop_lowest (count 2): 2 rounds, each clearing the arg-min member (ties: the higher
// id, the negated outranks test; NaN lowest).
// CHECK-LABEL: func.func @drop_lowest(
// CHECK-SAME: %[[INIT:[a-z0-9]+]]: memref<8xi8>, %[[MASS:[a-z0-9]+]]: memref<8xf32>, %[[OUT:[a-z0-9]+]]: memref<8xi8>)
// CHECK-DAG: %[[TRUE:.*]] = arith.constant true
// CHECK: scf.for
// CHECK:   memref.store %{{.*}}, %[[OUT]]
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK:   %[[WORST:.*]]:2 = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args(%{{.*}} = %c-1_i32, %{{.*}} = %{{.*}}) -> (i32, f32) {
// CHECK:     %[[OUTRANKS:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK:     %[[NOTBETTER:.*]] = arith.xori %[[OUTRANKS]], %[[TRUE]] : i1
// CHECK:     %[[TAKE0:.*]] = arith.ori %{{.*}}, %[[NOTBETTER]] : i1
// CHECK:     %[[MEMBER:.*]] = memref.load %[[OUT]][%[[E]]] : memref<8xi8>
// CHECK:     %[[ISMEMBER:.*]] = arith.cmpi ne, %[[MEMBER]], %c0_i8 : i8
// CHECK:     arith.andi %[[ISMEMBER]], %[[TAKE0]] : i1
// CHECK:   %[[FOUND:.*]] = arith.cmpi sge, %[[WORST]]#0, %c0_i32 : i32
// CHECK:   scf.if %[[FOUND]] {
// CHECK:     %[[AT:.*]] = arith.index_cast %[[WORST]]#0 : i32 to index
// CHECK:     memref.store %c0_i8, %[[OUT]][%[[AT]]] : memref<8xi8>
moe.router @drop_lowest(%init: !moe.set<8>, %mass: tensor<8xf32>) -> (selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %two = arith.constant 2 : i64
  %s = moe.drop_lowest %init by %mass, %two : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// fill_per_device (XShare Alg. 5), 2 devices of 4 slots: the placement arrives as
// replica counts and log2phy; state [|S|, done] in a [2] i64 temporary; at most 8 + 1
// rounds while |S| < budget * devices; each round one arg-max per device over the
// experts outside S whose primary copy (log2phy[e, 0] / 4) is on that device.
// CHECK-LABEL: func.func @fill_per_device(
// CHECK-SAME: %[[MASS:[a-z0-9]+]]: memref<8xf32>, %[[REPLICAS:[a-z0-9]+]]: memref<8xi32>, %[[LOG2PHY:[a-z0-9]+]]: memref<8x1xi32>,
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<8xi8>, %[[BUDGET:[a-z0-9]+]]: i64)
// CHECK: %[[CLAMPED:.*]] = arith.minui %{{.*}}, %c8_i64 : i64
// CHECK: %[[TARGET:.*]] = arith.muli %[[CLAMPED]], %c2_i64 : i64
// CHECK: %[[STATE:.*]] = memref.alloc() : memref<2xi64>
// CHECK: memref.store %{{.*}}, %[[STATE]][%c0] : memref<2xi64>
// CHECK: memref.store %c0_i64, %[[STATE]][%c1] : memref<2xi64>
// CHECK: scf.for %{{.*}} = %c0 to %c9 step %c1 {
// CHECK:   %[[SIZE:.*]] = memref.load %[[STATE]][%c0] : memref<2xi64>
// CHECK:   %[[SHORT:.*]] = arith.cmpi slt, %[[SIZE]], %[[TARGET]] : i64
// CHECK:   %[[ACTIVE:.*]] = arith.andi %{{.*}}, %[[SHORT]] : i1
// CHECK:   scf.if %[[ACTIVE]] {
// CHECK:     %[[ADDED:.*]] = scf.for %[[G:.*]] = %c0 to %c2 step %c1 iter_args(%{{.*}} = %c0_i64) -> (i64) {
// CHECK:       %[[GI:.*]] = arith.index_cast %[[G]] : index to i32
// CHECK:       %[[BEST:.*]]:2 = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:         %[[SLOT:.*]] = memref.load %[[LOG2PHY]][%[[E]], %c0] : memref<8x1xi32>
// CHECK:         %[[DEV:.*]] = arith.divsi %[[SLOT]], %c4_i32 : i32
// CHECK:         %[[NOCOPY:.*]] = arith.cmpi slt, %[[SLOT]], %c0_i32 : i32
// CHECK:         %[[DEVOF:.*]] = arith.select %[[NOCOPY]], %c-1_i32, %[[DEV]] : i32
// CHECK:         arith.cmpi eq, %[[DEVOF]], %[[GI]] : i32
// CHECK:       scf.if %{{.*}} {
// CHECK:         memref.store %c1_i8, %[[OUT]]
// CHECK:     %[[GROWN:.*]] = arith.addi %[[SIZE]], %[[ADDED]] : i64
// CHECK:     memref.store %[[GROWN]], %[[STATE]][%c0] : memref<2xi64>
// CHECK:     %[[STUCK:.*]] = arith.cmpi eq, %[[ADDED]], %c0_i64 : i64
// CHECK:     scf.if %[[STUCK]] {
// CHECK:       memref.store %c1_i64, %[[STATE]][%c1] : memref<2xi64>
// CHECK:   } else {
// CHECK:     memref.store %c1_i64, %[[STATE]][%c1] : memref<2xi64>
// CHECK: memref.dealloc %[[STATE]]
moe.router @fill_per_device(%mass: tensor<8xf32>,
                            %placement: !moe.placement<experts = 8, devices = 2, slots = 8>)
    -> (selected: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %budget = moe.knob "budget" = 2 : i64
  %none = moe.empty_set : !moe.set<8>
  %s = moe.fill_per_device %none with %mass on %placement budget(%budget : i64)
      : tensor<8xf32>, !moe.placement<experts = 8, devices = 2, slots = 8> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}
