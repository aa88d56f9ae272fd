// moe-lower-to-loops on the token family (TokenOps.cpp; top-k rows from EmitHelpers.cpp,
// lane loops from LaneLoops.cpp): every per-token op runs inside ONE scf.parallel over
// the tokens, writing the token's row of its result; a row that stays inside the stage
// lives in a [T, n] temporary read through the token's subview, a router output is
// written in place. Covers moe.softmax, moe.topk, moe.sigmoid, moe.add_bias, moe.scale,
// moe.group_limit, moe.bins, moe.mask, moe.bias_resident and moe.gate.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s
// The lane-parallel form: a top-k is k rounds of an arg-max over packed i64 keys.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize | FileCheck %s --check-prefix=LANES

// Softmax: the row maximum, the exponentials stored as they are summed, then the
// division; a row whose maximum is -inf (all masked) becomes zeros, not NaN.
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[P:[a-z0-9]+]]: memref<?x8xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NOT: memref.alloc
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   %[[MAX:.*]] = scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args(%{{.*}} = %[[NEGINF]]) -> (f32) {
// CHECK:     arith.maximumf
// CHECK:   %[[ALLMASKED:.*]] = arith.cmpf oeq, %[[MAX]], %[[NEGINF]] : f32
// CHECK:   %[[SUM:.*]] = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
// CHECK:     %[[SHIFTED:.*]] = arith.subf %{{.*}}, %[[MAX]] : f32
// CHECK:     %[[EXP:.*]] = math.exp %[[SHIFTED]] : f32
// CHECK:     memref.store %[[EXP]], %[[P]][%[[TOK]], %[[E]]] : memref<?x8xf32>
// CHECK:     arith.addf
// CHECK:   scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[Q:.*]] = arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK:     %[[R:.*]] = arith.select %[[ALLMASKED]], %[[ZERO]], %[[Q]] : f32
// CHECK:     memref.store %[[R]], %[[P]][%[[TOK]], %[[E2]]] : memref<?x8xf32>
// CHECK: return
moe.router @softmax(%logits: tensor<?x8xf32>) -> (probs: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x8xf32>
  moe.yield %p : tensor<?x8xf32>
}

// Top-k on the host: a sorted list of k (value, id) per token in [T, k] temporaries;
// the first k experts fill it, every later one that strictly outranks the last entry
// (NaN below every number, so ties keep the lower id) is inserted; missing slots are
// id -1, value 0.
// CHECK-LABEL: func.func @topk(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[VALS:[a-z0-9]+]]: memref<?x2xf32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>)
// CHECK-DAG: %[[NONE:.*]] = arith.constant -1 : i32
// CHECK: %[[LV:.*]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: %[[LI:.*]] = memref.alloc(%[[T]]) : memref<?x2xindex>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   %[[ROWV:.*]] = memref.subview %[[LV]][%[[TOK]], 0] [1, 2] [1, 1]
// CHECK:   %[[ROWI:.*]] = memref.subview %[[LI]][%[[TOK]], 0] [1, 2] [1, 1]
// Phase 1: the first k candidates.
// CHECK:   %[[FILLED:.*]]:2 = scf.while (%{{.*}} = %c0, %{{.*}} = %c0) : (index, index) -> (index, index) {
// CHECK:     arith.cmpi ult, %{{.*}}, %c2 : index
// CHECK:     arith.cmpi ult, %{{.*}}, %c8 : index
// The insertion moves an entry back only past strictly worse (or NaN) ones.
// CHECK:     scf.while
// CHECK:       %[[NAN:.*]] = arith.cmpf uno, %[[V:.*]], %[[V]] : f32
// CHECK:       %[[GT:.*]] = arith.cmpf ogt, %[[V]], %[[PREV:.*]] : f32
// CHECK:       %[[PREVNAN:.*]] = arith.cmpf uno, %[[PREV]], %[[PREV]] : f32
// CHECK:       arith.ori %[[PREVNAN]], %[[GT]] : i1
// Phase 2: the rest against the last entry (slot k - 1).
// CHECK:   scf.for %{{.*}} = %[[FILLED]]#0 to %c8 step %c1 {
// CHECK:     memref.load %[[ROWV]][%c1]
// CHECK:     scf.if
// The k slots written to the outputs.
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[FOUND:.*]] = arith.cmpi ult, %[[J]], %[[FILLED]]#1 : index
// CHECK:     %[[ID:.*]] = arith.select %[[FOUND]], %{{.*}}, %[[NONE]] : i32
// CHECK:     memref.store %{{.*}}, %[[VALS]][%[[TOK]], %[[J]]] : memref<?x2xf32>
// CHECK:     memref.store %[[ID]], %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK: memref.dealloc %[[LV]]
// CHECK: memref.dealloc %[[LI]]
// CHECK: return

// LANES-LABEL: func.func @topk(
// LANES-SAME: %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[VALS:[a-z0-9]+]]: memref<?x2xf32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>)
// LANES-DAG: %[[SIGN:.*]] = arith.constant -2147483648 : i32
// LANES-NOT: memref.alloc
// LANES: scf.parallel (%[[TOK:.*]]) = (%c0) to (%{{.*}}) step (%c1) {
// Round j: the largest key below the previous round's (no flags).
// LANES:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%[[BOUND:.*]] = %c-1_i64) -> (i64) {
// LANES:     %[[KEY:.*]] = scf.parallel (%[[E:.*]]) = (%c0) to (%c8) step (%c1) init (%c0_i64) -> i64 {
// The score's rank in IEEE total order (-0 folded into +0 by the + 0.0, NaN rank 0)...
// LANES:       %[[BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
// LANES:       %[[POS:.*]] = arith.xori %[[BITS]], %[[SIGN]] : i32
// LANES:       %[[NEG:.*]] = arith.xori %[[BITS]], %c-1_i32 : i32
// LANES:       %[[ISNEG:.*]] = arith.cmpi slt, %[[BITS]], %c0_i32 : i32
// LANES:       arith.select %[[ISNEG]], %[[NEG]], %[[POS]] : i32
// LANES:       arith.cmpf uno
// ... plus one in the high word, the complemented id in the low word (ties: lower id).
// LANES:       %[[HIGH:.*]] = arith.addi %{{.*}}, %c1_i64 : i64
// LANES:       %[[ID:.*]] = arith.index_cast %[[E]] : index to i32
// LANES:       %[[NOTID:.*]] = arith.xori %[[ID]], %c-1_i32 : i32
// LANES:       %[[LOW:.*]] = arith.extui %[[NOTID]] : i32 to i64
// LANES:       %[[SHIFTED:.*]] = arith.shli %[[HIGH]], %c32_i64 : i64
// LANES:       %[[PACKED:.*]] = arith.ori %[[SHIFTED]], %[[LOW]] : i64
// LANES:       arith.cmpi ult, %[[PACKED]], %[[BOUND]] : i64
// LANES:       scf.reduce(%{{.*}} : i64) {
// LANES:         arith.maxui
// The winner's id from the low word, -1 when no key was found.
// LANES:     %[[FOUND:.*]] = arith.cmpi ne, %[[KEY]], %c0_i64 : i64
// LANES:     %[[LOWID:.*]] = arith.trunci %[[KEY]] : i64 to i32
// LANES:     %[[WIN:.*]] = arith.xori %[[LOWID]], %c-1_i32 : i32
// LANES:     %[[OUTID:.*]] = arith.select %[[FOUND]], %[[WIN]], %c-1_i32 : i32
// LANES:     memref.store %{{.*}}, %[[VALS]][%[[TOK]], %[[J]]] : memref<?x2xf32>
// LANES:     memref.store %[[OUTID]], %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// LANES:     scf.yield %[[KEY]] : i64
moe.router @topk(%logits: tensor<?x8xf32>) -> (values: tensor<?x2xf32>, ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  %v, %i = moe.topk %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  moe.yield %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// Element-wise ops fused in one token loop: sigmoid and add_bias rows in [T, 8]
// temporaries (the token's subview), the scale written to the output; the knob is a
// scalar parameter after the outputs.
// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[BIAS:[a-z0-9]+]]: memref<8xf32>,
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<?x8xf32>, %[[TEMP:[a-z0-9]+]]: f32)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[S:.*]] = memref.alloc(%[[T]]) : memref<?x8xf32>
// CHECK: %[[B:.*]] = memref.alloc(%[[T]]) : memref<?x8xf32>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// sigmoid: 1 / (1 + exp(-x)).
// CHECK:   %[[SROW:.*]] = memref.subview %[[S]][%[[TOK]], 0] [1, 8] [1, 1]
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[XV:.*]] = memref.load %[[X]][%[[TOK]], %[[E]]] : memref<?x8xf32>
// CHECK:     %[[NEGX:.*]] = arith.negf %[[XV]] : f32
// CHECK:     %[[EXP:.*]] = math.exp %[[NEGX]] : f32
// CHECK:     %[[DEN:.*]] = arith.addf %[[EXP]], %[[ONE]] : f32
// CHECK:     %[[SIG:.*]] = arith.divf %[[ONE]], %[[DEN]] : f32
// CHECK:     memref.store %[[SIG]], %[[SROW]][%[[E]]]
// add_bias: + bias[e], in the same token loop.
// CHECK-NOT: scf.parallel
// CHECK:   %[[BROW:.*]] = memref.subview %[[B]][%[[TOK]], 0] [1, 8] [1, 1]
// CHECK:   scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[SV:.*]] = memref.load %[[SROW]][%[[E2]]]
// CHECK:     %[[BV:.*]] = memref.load %[[BIAS]][%[[E2]]] : memref<8xf32>
// CHECK:     %[[SUM:.*]] = arith.addf %[[SV]], %[[BV]] : f32
// CHECK:     memref.store %[[SUM]], %[[BROW]][%[[E2]]]
// scale: * the knob, into the output, in the same token loop.
// CHECK-NOT: scf.parallel
// CHECK:   scf.for %[[E3:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[BV2:.*]] = memref.load %[[BROW]][%[[E3]]]
// CHECK:     %[[SCALED:.*]] = arith.mulf %[[BV2]], %[[TEMP]] : f32
// CHECK:     memref.store %[[SCALED]], %[[OUT]][%[[TOK]], %[[E3]]] : memref<?x8xf32>
// CHECK: memref.dealloc %[[S]]
// CHECK: memref.dealloc %[[B]]
moe.router @elementwise(%logits: tensor<?x8xf32>, %bias: tensor<8xf32>)
    -> (scores: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %temp = moe.knob "temperature" = 0.5 : f32
  %s = moe.sigmoid %logits : tensor<?x8xf32>
  %b = moe.add_bias %s, %bias : tensor<?x8xf32>, tensor<8xf32>
  %y = moe.scale %b, %temp : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// group_limit (4 groups of 2, keep 2): per token, each group's score is the sum of its
// group_topk = 2 best (arg-max rounds excluded by per-token flags), the best 2 groups
// are flagged by a top-k over the 4 group scores, and experts outside them get -inf.
// CHECK-LABEL: func.func @group_limit(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[OUT:[a-z0-9]+]]: memref<?x8xf32>)
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[SET:.*]] = arith.constant 1 : i8
// CHECK: %[[GSCORE:.*]] = memref.alloc(%[[T]]) : memref<?x4xf32>
// CHECK: %[[TAKEN:.*]] = memref.alloc(%[[T]]) : memref<?x8xi8>
// CHECK: %[[KEPT:.*]] = memref.alloc(%[[T]]) : memref<?x4xi8>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   %[[GROW:.*]] = memref.subview %[[GSCORE]][%[[TOK]], 0] [1, 4] [1, 1]
// CHECK:   %[[TROW:.*]] = memref.subview %[[TAKEN]][%[[TOK]], 0] [1, 8] [1, 1]
// CHECK:   scf.for %[[G:.*]] = %c0 to %c4 step %c1 {
// CHECK:     %[[BASE:.*]] = arith.muli %[[G]], %c2 : index
// CHECK:     %[[GSUM:.*]] = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// CHECK:       %[[BEST:.*]]:2 = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:       %[[PICK:.*]] = arith.index_cast %[[BEST]]#0 : i32 to index
// CHECK:       %[[AT:.*]] = arith.addi %[[BASE]], %[[PICK]] : index
// CHECK:       memref.store %[[SET]], %[[TROW]][%[[AT]]]
// CHECK:       arith.addf %{{.*}}, %[[BEST]]#1 : f32
// CHECK:     memref.store %[[GSUM]], %[[GROW]][%[[G]]]
// CHECK:   %[[KROW:.*]] = memref.subview %[[KEPT]][%[[TOK]], 0] [1, 4] [1, 1]
// CHECK:   scf.while
// CHECK:     arith.cmpi ult, %{{.*}}, %c4 : index
// CHECK:   scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK:     memref.store %[[SET]], %[[KROW]][%{{.*}}]
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[GROUP:.*]] = arith.divui %[[E]], %c2 : index
// CHECK:     %[[FLAG:.*]] = memref.load %[[KROW]][%[[GROUP]]]
// CHECK:     %[[IN:.*]] = arith.cmpi ne, %[[FLAG]], %c0_i8 : i8
// CHECK:     %[[V:.*]] = memref.load %[[X]][%[[TOK]], %[[E]]] : memref<?x8xf32>
// CHECK:     %[[R:.*]] = arith.select %[[IN]], %[[V]], %[[NEGINF]] : f32
// CHECK:     memref.store %[[R]], %[[OUT]][%[[TOK]], %[[E]]] : memref<?x8xf32>
moe.router @group_limit(%scores: tensor<?x8xf32>) -> (limited: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %g = moe.group_limit %scores groups = 4 keep = 2 : tensor<?x8xf32>
  moe.yield %g : tensor<?x8xf32>
}

// bins: -min(floor(alpha * (max - z)), beta) as i32, 0 for the row maximum; beta is
// clamped to 2^30 (exact in f32) once per token.
// CHECK-LABEL: func.func @bins(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[OUT:[a-z0-9]+]]: memref<?x8xi32>, %[[ALPHA:[a-z0-9]+]]: f32, %[[BETA:[a-z0-9]+]]: i64)
// CHECK-DAG: %[[CAP:.*]] = arith.constant 1073741824 : i64
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%{{.*}}) step (%c1) {
// CHECK:   %[[BIG:.*]] = arith.cmpi sgt, %[[BETA]], %[[CAP]] : i64
// CHECK:   %[[B:.*]] = arith.select %[[BIG]], %[[CAP]], %[[BETA]] : i64
// CHECK:   %[[BF:.*]] = arith.sitofp %[[B]] : i64 to f32
// CHECK:   %[[MAX:.*]] = scf.for {{.*}} -> (f32) {
// CHECK:     arith.maximumf
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[Z:.*]] = memref.load %[[X]][%[[TOK]], %[[E]]]
// CHECK:     %[[GAP:.*]] = arith.subf %[[MAX]], %[[Z]] : f32
// CHECK:     %[[SCALED:.*]] = arith.mulf %[[ALPHA]], %[[GAP]] : f32
// CHECK:     %[[FL:.*]] = math.floor %[[SCALED]] : f32
// CHECK:     %[[Q:.*]] = arith.minnumf %[[FL]], %[[BF]] : f32
// CHECK:     %[[TOP:.*]] = arith.cmpf oeq, %[[Z]], %[[MAX]] : f32
// CHECK:     %[[Q0:.*]] = arith.select %[[TOP]], %{{.*}}, %[[Q]] : f32
// CHECK:     %[[QI:.*]] = arith.fptosi %[[Q0]] : f32 to i32
// CHECK:     %[[BIN:.*]] = arith.subi %c0_i32, %[[QI]] : i32
// CHECK:     memref.store %[[BIN]], %[[OUT]][%[[TOK]], %[[E]]] : memref<?x8xi32>
moe.router @bins(%logits: tensor<?x8xf32>) -> (bins: tensor<?x8xi32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  %b = moe.bins %logits, %alpha, %beta : tensor<?x8xf32> -> tensor<?x8xi32>
  moe.yield %b : tensor<?x8xi32>
}

// Set-driven rows: mask keeps a member's score and writes -inf elsewhere; bias_resident
// adds the bonus to a resident expert's score. Sets are i8 flags, read per expert.
// CHECK-LABEL: func.func @masks(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[ALLOWED:[a-z0-9]+]]: memref<8xi8>,
// CHECK-SAME: %[[RESIDENT:[a-z0-9]+]]: memref<8xi8>, %[[OUT:[a-z0-9]+]]: memref<?x8xf32>, %[[BONUS:[a-z0-9]+]]: f32)
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[M:.*]] = memref.alloc(%[[T]]) : memref<?x8xf32>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   %[[MROW:.*]] = memref.subview %[[M]][%[[TOK]], 0] [1, 8] [1, 1]
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[V:.*]] = memref.load %[[X]][%[[TOK]], %[[E]]]
// CHECK:     %[[F:.*]] = memref.load %[[ALLOWED]][%[[E]]] : memref<8xi8>
// CHECK:     %[[IN:.*]] = arith.cmpi ne, %[[F]], %c0_i8 : i8
// CHECK:     %[[MV:.*]] = arith.select %[[IN]], %[[V]], %[[NEGINF]] : f32
// CHECK:     memref.store %[[MV]], %[[MROW]][%[[E]]]
// CHECK:   scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[V2:.*]] = memref.load %[[MROW]][%[[E2]]]
// CHECK:     %[[PLUS:.*]] = arith.addf %[[V2]], %[[BONUS]] : f32
// CHECK:     %[[R:.*]] = memref.load %[[RESIDENT]][%[[E2]]] : memref<8xi8>
// CHECK:     %[[RES:.*]] = arith.cmpi ne, %[[R]], %c0_i8 : i8
// CHECK:     %[[Y:.*]] = arith.select %[[RES]], %[[PLUS]], %[[V2]] : f32
// CHECK:     memref.store %[[Y]], %[[OUT]][%[[TOK]], %[[E2]]] : memref<?x8xf32>
moe.router @masks(%logits: tensor<?x8xf32>, %allowed: !moe.set<8>, %resident: !moe.set<8>)
    -> (scores: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %bonus = moe.knob "bonus" = 0.05 : f32
  %m = moe.mask %logits, %allowed : tensor<?x8xf32>, !moe.set<8>
  %r = moe.bias_resident %m, %resident, %bonus : tensor<?x8xf32>, !moe.set<8>
  moe.yield %r : tensor<?x8xf32>
}

// Libra's lookahead gate: logits[t, e] = sum over h in order of hidden[t, h] * w[h, e].
// CHECK-LABEL: func.func @gate(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[H:[a-z0-9]+]]: memref<?x16xf32>, %[[W:[a-z0-9]+]]: memref<16x8xf32>, %[[OUT:[a-z0-9]+]]: memref<?x8xf32>)
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[DOT:.*]] = scf.for %[[I:.*]] = %c0 to %c16 step %c1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK:       %[[WV:.*]] = memref.load %[[W]][%[[I]], %[[E]]] : memref<16x8xf32>
// CHECK:       %[[HV:.*]] = memref.load %[[H]][%[[TOK]], %[[I]]] : memref<?x16xf32>
// CHECK:       %[[PROD:.*]] = arith.mulf %[[HV]], %[[WV]] : f32
// CHECK:       arith.addf %[[ACC]], %[[PROD]] : f32
// CHECK:     memref.store %[[DOT]], %[[OUT]][%[[TOK]], %[[E]]] : memref<?x8xf32>
moe.router @gate(%hidden: tensor<?x16xf32>, %weight: tensor<16x8xf32>)
    -> (logits: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %l = moe.gate %hidden, %weight : tensor<?x16xf32>, tensor<16x8xf32> -> tensor<?x8xf32>
  moe.yield %l : tensor<?x8xf32>
}
