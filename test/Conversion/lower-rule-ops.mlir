// moe-lower-to-loops on the rule steps: moe.residency / moe.prefetch / moe.balance
// bodies (ResidencyOps.cpp, PrefetchOps.cpp, EplbOps.cpp, LibraOps.cpp) are host code,
// plain sequential scf.for / scf.while loops over the experts and devices in the order
// the papers state them, with static temporaries; no scf.parallel. Covers moe.ema,
// moe.hi_capacity (its run-time budget rule: the function returns a status),
// moe.hot_set (margin and rank_slack), moe.difference, moe.ranked, moe.expected_experts,
// moe.step_size, moe.step_feedback, moe.two_level_lru, moe.resident_first,
// moe.eplb, moe.device_loads, moe.imbalance, moe.gpu_requests, moe.served_loads,
// moe.libra_replicate and moe.libra_shard (lower-balance-ops.mlir has moe.least_loaded).
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s

// DynaExq: the hotness EMA; the high-precision capacity in i128 (no wrap), with the
// budget rule checked at run time (status 2 + 2, the budget being knob 2, in an alloca
// the function returns); the hot set with a margin: the current set cut or filled to
// the capacity, then swaps while the best outsider beats the worst member by the margin.
// CHECK-LABEL: func.func @dynaexq(
// CHECK-SAME: %[[HOT:[a-z0-9]+]]: memref<8xf32>, %[[COUNTS:[a-z0-9]+]]: memref<8xi32>, %[[CUR:[a-z0-9]+]]: memref<8xi8>,
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<8xf32>, %[[HI:[a-z0-9]+]]: memref<8xi8>,
// CHECK-SAME: %[[ALPHA:[a-z0-9]+]]: f32, %[[MARGIN:[a-z0-9]+]]: f32, %[[BUDGET:[a-z0-9]+]]: i64) -> i32
// CHECK-SAME: #moe.rule<text = "budget >= fixed + layers * experts * lo_bytes + layers * hi_bytes
// CHECK-SAME: moe.kind = "residency"
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[STATUS:.*]] = memref.alloca() : memref<i32>
// CHECK: memref.store %c0_i32, %[[STATUS]][] : memref<i32>
// ema: alpha * s + (1 - alpha) * max(count, 0).
// CHECK: %[[KEEP:.*]] = arith.subf %[[ONE]], %[[ALPHA]] : f32
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[C:.*]] = memref.load %[[COUNTS]][%[[E]]] : memref<8xi32>
// CHECK:   %[[CF:.*]] = arith.sitofp %{{.*}} : i32 to f32
// CHECK:   %[[NEW:.*]] = arith.mulf %[[KEEP]], %[[CF]] : f32
// CHECK:   %[[OLD:.*]] = memref.load %[[HOT]][%[[E]]] : memref<8xf32>
// CHECK:   %[[DECAY:.*]] = arith.mulf %[[ALPHA]], %[[OLD]] : f32
// CHECK:   %[[SUM:.*]] = arith.addf %[[DECAY]], %[[NEW]] : f32
// CHECK:   memref.store %[[SUM]], %[[S]][%[[E]]] : memref<8xf32>
// hi_capacity: (budget - fixed - layers*E*lo) / (layers*hi), clamped to [0, 8].
// CHECK: %[[B128:.*]] = arith.extsi %[[BUDGET]] : i64 to i128
// CHECK: %[[SHORT:.*]] = arith.cmpi slt, %[[B128]], %c2200_i128 : i128
// CHECK: scf.if %[[SHORT]] {
// CHECK:   memref.store %c4_i32, %[[STATUS]][] : memref<i32>
// CHECK: %[[FREE:.*]] = arith.subi %[[B128]], %c1800_i128 : i128
// CHECK: %[[N:.*]] = arith.divsi %{{.*}}, %c400_i128 : i128
// CHECK: %[[N8:.*]] = arith.select %{{.*}}, %c8_i128, %[[N]] : i128
// CHECK: %[[CAP:.*]] = arith.trunci %[[N8]] : i128 to i64
// hot_set: the current set copied, then cut to the capacity (arg-min rounds) and
// filled to it (the top-k of the outsiders).
// CHECK: scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[F:.*]] = memref.load %[[CUR]][%[[E2]]] : memref<8xi8>
// CHECK:   memref.store %[[F]], %[[HI]][%[[E2]]] : memref<8xi8>
// CHECK: %[[CAPC:.*]] = arith.minui %{{.*}}, %c8_i64 : i64
// CHECK: %[[SIZE:.*]] = scf.for {{.*}} -> (i64) {
// CHECK: %[[OVER:.*]] = arith.subi %[[SIZE]], %[[CAPC]] : i64
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 {
// CHECK:   %[[WORST:.*]]:2 = scf.for {{.*}} -> (i32, f32) {
// CHECK:   scf.if
// CHECK:     memref.store %c0_i8, %[[HI]]
// CHECK: scf.while
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 {
// CHECK:   memref.store %c1_i8, %[[HI]]
// The swaps: at most capacity rounds.
// CHECK: %[[ROUNDS:.*]] = arith.index_cast %[[CAPC]] : i64 to index
// CHECK: scf.for %{{.*}} = %c0 to %[[ROUNDS]] step %c1 {
// CHECK:   %[[BEST:.*]]:2 = scf.for {{.*}} -> (i32, f32) {
// CHECK:   %[[LOW:.*]]:2 = scf.for {{.*}} -> (i32, f32) {
// CHECK:   %[[WSEL:.*]] = arith.select %{{.*}}, %[[LOW]]#0, %c0_i32 : i32
// CHECK:   %[[W:.*]] = arith.index_cast %[[WSEL]] : i32 to index
// CHECK:   %[[WV:.*]] = memref.load %[[S]][%[[W]]] : memref<8xf32>
// CHECK:   %[[BAR:.*]] = arith.addf %[[WV]], %[[MARGIN]] : f32
// CHECK:   %[[BEATS:.*]] = arith.cmpf ogt, %[[BEST]]#1, %[[BAR]] : f32
// CHECK:   %[[SWAP:.*]] = arith.andi %{{.*}}, %[[BEATS]] : i1
// CHECK:   scf.if %[[SWAP]] {
// CHECK:     memref.store %c1_i8, %[[HI]]
// CHECK:     memref.store %c0_i8, %[[HI]][%[[W]]]
// CHECK: %[[RC:.*]] = memref.load %[[STATUS]][] : memref<i32>
// CHECK: return %[[RC]] : i32
moe.residency @dynaexq(%hotness: tensor<8xf32>, %counts: tensor<8xi32>, %current: !moe.set<8>)
    -> (hot: tensor<8xf32>, hi: !moe.set<8>) attributes {experts = 8} {
  %alpha = moe.knob "alpha" = 0.8 : f32
  %margin = moe.knob "margin" = 1.0 : f32
  %budget = moe.knob "budget" = 1000000 : i64
  %fixed = arith.constant 1000 : i64
  %hi_b = arith.constant 100 : i64
  %lo_b = arith.constant 25 : i64
  %layers = arith.constant 4 : i64
  %s = moe.ema %hotness, %counts alpha(%alpha : f32) : tensor<8xf32>, tensor<8xi32>
  %n = moe.hi_capacity budget(%budget : i64) fixed(%fixed : i64) hi_bytes(%hi_b : i64)
      lo_bytes(%lo_b : i64) layers(%layers : i64) experts = 8 -> i64
  %hi = moe.hot_set %s, %current capacity(%n : i64) margin(%margin : f32)
      : tensor<8xf32> -> !moe.set<8>
  moe.yield %s, %hi : tensor<8xf32>, !moe.set<8>
}

// The demotion queue: current minus hi (a & !b, into a temporary), ranked ascending
// (the negated scores' top-8 among its members, -1 past them) and its size; the hot
// set with rank slack: a member stays when fewer than capacity + slack experts rank
// ahead of it (a greater score, or an equal one - NaN equal NaN - at a lower id).
// CHECK-LABEL: func.func @queues(
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<8xf32>, %[[HI:[a-z0-9]+]]: memref<8xi8>, %[[CUR:[a-z0-9]+]]: memref<8xi8>,
// CHECK-SAME: %[[DOWN:[a-z0-9]+]]: memref<8xi32>, %[[NDOWN:[a-z0-9]+]]: memref<1xi32>, %[[KEPT:[a-z0-9]+]]: memref<8xi8>, %[[SLACK:[a-z0-9]+]]: i64)
// CHECK-SAME: moe.kind = "residency"
// CHECK-NOT: scf.parallel
// CHECK: %[[DIFF:.*]] = memref.alloc() : memref<8xi8>
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[H:.*]] = memref.load %[[HI]][%[[E]]] : memref<8xi8>
// CHECK:   %[[NOTH:.*]] = arith.cmpi eq, %[[H]], %c0_i8 : i8
// CHECK:   %[[NOTHI8:.*]] = arith.extui %[[NOTH]] : i1 to i8
// CHECK:   %[[CV:.*]] = memref.load %[[CUR]][%[[E]]] : memref<8xi8>
// CHECK:   %[[D:.*]] = arith.andi %[[CV]], %[[NOTHI8]] : i8
// CHECK:   memref.store %[[D]], %[[DIFF]][%[[E]]] : memref<8xi8>
// CHECK: %[[TAKEN:.*]] = memref.alloc() : memref<8xi8>
// CHECK: scf.while
// CHECK:   %[[MEMBER:.*]] = memref.load %[[DIFF]]
// CHECK:   scf.if
// CHECK:     %[[V:.*]] = memref.load %[[S]]
// CHECK:     arith.negf %[[V]] : f32
// CHECK: scf.for %[[J:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[ID:.*]] = arith.select %{{.*}}, %{{.*}}, %c-1_i32 : i32
// CHECK:   memref.store %[[ID]], %[[DOWN]][%[[J]]] : memref<8xi32>
// CHECK: %[[POP:.*]] = scf.for {{.*}} -> (i64) {
// CHECK:   memref.load %[[DIFF]]
// CHECK: %[[POP32:.*]] = arith.trunci %[[POP]] : i64 to i32
// CHECK: memref.store %[[POP32]], %[[NDOWN]][%c0] : memref<1xi32>
// hot_set with rank slack (capacity 3).
// CHECK: %[[LIMIT:.*]] = arith.addi %{{.*}}, %c3_i64 : i64
// CHECK: scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[MINE:.*]] = memref.load %[[S]][%[[E2]]] : memref<8xf32>
// CHECK:   %[[RANK:.*]] = scf.for %[[J2:.*]] = %c0 to %c8 step %c1 iter_args(%{{.*}} = %c0_i64) -> (i64) {
// CHECK:     %[[O:.*]] = memref.load %[[S]][%[[J2]]] : memref<8xf32>
// CHECK:     %[[EQ:.*]] = arith.cmpf oeq, %[[O]], %[[MINE]] : f32
// CHECK:     %[[LOWER:.*]] = arith.cmpi ult, %[[J2]], %[[E2]] : index
// CHECK:     arith.cmpf ogt, %[[O]], %[[MINE]] : f32
// CHECK:   %[[OUT:.*]] = arith.cmpi sge, %[[RANK]], %[[LIMIT]] : i64
// CHECK:   scf.if %[[OUT]] {
// CHECK:     memref.store %c0_i8, %[[KEPT]][%[[E2]]] : memref<8xi8>
// CHECK: memref.dealloc %[[DIFF]]
// CHECK: return
moe.residency @queues(%s: tensor<8xf32>, %hi: !moe.set<8>, %current: !moe.set<8>)
    -> (down: tensor<8xi32>, n_down: tensor<1xi32>, kept: !moe.set<8>)
    attributes {experts = 8} {
  %n = arith.constant 3 : i64
  %r = moe.knob "rank_slack" = 2 : i64
  %down = moe.difference %current, %hi : !moe.set<8>
  %ids, %nd = moe.ranked %down by %s ascending
      : !moe.set<8>, tensor<8xf32> -> tensor<8xi32>, tensor<1xi32>
  %kept = moe.hot_set %s, %current capacity(%n : i64) rank_slack(%r : i64)
      : tensor<8xf32> -> !moe.set<8>
  moe.yield %ids, %nd, %kept : tensor<8xi32>, tensor<1xi32>, !moe.set<8>
}

// ExpertFlow's step: expected experts (up to 8 arg-max rounds while the prefix mass is
// below threshold * total; the running mass and count in [1] temporaries); the step
// size ceil(n * bytes / (bandwidth * layer_time)) clamped to [1, layers]; the feedback
// over the events (1: a stall grows the step past the threshold, 2: an overfetch
// shrinks it), the step after each event traced.
// CHECK-LABEL: func.func @expertflow(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[MASS:[a-z0-9]+]]: memref<8xf32>, %[[EVENTS:[a-z0-9]+]]: memref<?xi32>, %[[STEP:[a-z0-9]+]]: memref<1xi32>,
// CHECK-SAME: %[[STALLS:[a-z0-9]+]]: memref<1xi32>, %[[OVERS:[a-z0-9]+]]: memref<1xi32>, %[[SET:[a-z0-9]+]]: memref<8xi8>, %[[SOUT:[a-z0-9]+]]: memref<1xi32>, %[[TRACE:[a-z0-9]+]]: memref<?xi32>)
// CHECK-SAME: moe.kind = "prefetch"
// CHECK-DAG: %[[P:.*]] = arith.constant 0.899999976 : f32
// CHECK-NOT: scf.parallel
// CHECK: %[[COUNT:.*]] = memref.alloc() : memref<1xi32>
// CHECK: %[[TOTAL:.*]] = scf.for {{.*}} -> (f32) {
// CHECK: %[[TARGET:.*]] = arith.mulf %[[TOTAL]], %[[P]] : f32
// CHECK: %[[CUM:.*]] = memref.alloc() : memref<1xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:   %[[HAVE:.*]] = memref.load %[[CUM]][%c0] : memref<1xf32>
// CHECK:   %[[BELOW:.*]] = arith.cmpf olt, %[[HAVE]], %[[TARGET]] : f32
// CHECK:   scf.if %[[BELOW]] {
// CHECK:     %[[BEST:.*]]:2 = scf.for {{.*}} -> (i32, f32) {
// CHECK:     scf.if
// CHECK:       memref.store %c1_i8, %[[SET]]
// CHECK:       arith.addf %{{.*}}, %[[BEST]]#1 : f32
// CHECK:       arith.addi %{{.*}}, %c1_i32 : i32
// CHECK: %[[NE:.*]] = memref.load %[[COUNT]][%c0] : memref<1xi32>
// CHECK: %[[NEF:.*]] = arith.sitofp %[[NE]] : i32 to f32
// CHECK: %[[UP:.*]] = math.ceil %{{.*}} : f32
// CHECK: %[[MIN:.*]] = arith.minnumf %[[UP]], %{{.*}} : f32
// CHECK: %[[MAX:.*]] = arith.maxnumf %[[MIN]], %{{.*}} : f32
// CHECK: %[[S0:.*]] = memref.alloc() : memref<1xi32>
// CHECK: %[[S0I:.*]] = arith.fptosi %[[MAX]] : f32 to i32
// CHECK: memref.store %[[S0I]], %[[S0]][%c0] : memref<1xi32>
// The feedback starts from the given step (else the computed one), clamped to [1, 8].
// CHECK: %[[GIVEN:.*]] = memref.load %[[STEP]][%c0] : memref<1xi32>
// CHECK: %[[COMPUTED:.*]] = memref.load %[[S0]][%c0] : memref<1xi32>
// CHECK: %[[HASGIVEN:.*]] = arith.cmpi sgt, %[[GIVEN]], %c0_i32 : i32
// CHECK: arith.select %[[HASGIVEN]], %[[GIVEN]], %[[COMPUTED]] : i32
// CHECK: memref.store %{{.*}}, %[[SOUT]][%c0] : memref<1xi32>
// CHECK: scf.for %[[I:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   %[[EV:.*]] = memref.load %[[EVENTS]][%[[I]]] : memref<?xi32>
// CHECK:   %[[STALL:.*]] = arith.cmpi eq, %[[EV]], %c1_i32 : i32
// CHECK:   scf.if %[[STALL]] {
// CHECK:     %[[GROW:.*]] = arith.cmpi sgt, %{{.*}}, %c2_i32 : i32
// CHECK:     memref.store %{{.*}}, %[[SOUT]][%c0] : memref<1xi32>
// CHECK:   %[[OVER:.*]] = arith.cmpi eq, %[[EV]], %c2_i32 : i32
// CHECK:   scf.if %[[OVER]] {
// CHECK:     %[[SHRINK:.*]] = arith.cmpi sge, %{{.*}}, %c3_i32 : i32
// CHECK:     memref.store %{{.*}}, %[[SOUT]][%c0] : memref<1xi32>
// CHECK:   %[[NOW:.*]] = memref.load %[[SOUT]][%c0] : memref<1xi32>
// CHECK:   memref.store %[[NOW]], %[[TRACE]][%[[I]]] : memref<?xi32>
moe.prefetch @expertflow(%mass: tensor<8xf32>, %events: tensor<?xi32>, %step: tensor<1xi32>,
                         %stalls: tensor<1xi32>, %overs: tensor<1xi32>)
    -> (set: !moe.set<8>, s: tensor<1xi32>, trace: tensor<?xi32>) attributes {experts = 8} {
  %p = arith.constant 0.9 : f32
  %es = arith.constant 1000 : i64
  %cs = arith.constant 1.0e6 : f32
  %tl = arith.constant 1.0e-3 : f32
  %layers = arith.constant 8 : i64
  %t1 = arith.constant 2 : i64
  %t2 = arith.constant 3 : i64
  %set, %ne = moe.expected_experts %mass threshold(%p : f32)
      : tensor<8xf32> -> !moe.set<8>, tensor<1xi32>
  %s0 = moe.step_size %ne expert_bytes(%es : i64) bandwidth(%cs : f32) layer_time(%tl : f32)
      layers(%layers : i64) : tensor<1xi32> -> tensor<1xi32>
  %s, %st, %ov, %trace = moe.step_feedback %step, %s0, %stalls, %overs, %events
      stall_threshold(%t1 : i64) overfetch_threshold(%t2 : i64) layers(%layers : i64)
      : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
      -> tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
  moe.yield %set, %s, %trace : !moe.set<8>, tensor<1xi32>, tensor<?xi32>
}

// The two-level LRU: last use (now when requested), the high level (predicted or used
// within the step), loads / evictions lists at -1; counters [size, loads, evictions]
// in a [3] temporary; requested misses first, then predicted ones; a full cache evicts
// the least recently used resident (low level first, then high, then any for a
// requested expert).
// CHECK-LABEL: func.func @lru(
// CHECK-SAME: %[[REQ:[a-z0-9]+]]: memref<8xi8>, %[[PRED:[a-z0-9]+]]: memref<8xi8>, %[[RES:[a-z0-9]+]]: memref<8xi8>,
// CHECK-SAME: %[[LAST:[a-z0-9]+]]: memref<8xi32>, %[[NOWB:[a-z0-9]+]]: memref<1xi32>, %[[STEPB:[a-z0-9]+]]: memref<1xi32>,
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<8xi8>, %[[LOADS:[a-z0-9]+]]: memref<8xi32>)
// CHECK: %[[HIGH:.*]] = memref.alloc() : memref<8xi8>
// CHECK: %[[LU:.*]] = memref.alloc() : memref<8xi32>
// CHECK: %[[NOW:.*]] = memref.load %[[NOWB]][%c0] : memref<1xi32>
// CHECK: %[[STEP:.*]] = memref.load %[[STEPB]][%c0] : memref<1xi32>
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   memref.store %{{.*}}, %[[OUT]][%[[E]]]
// CHECK: scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[USED:.*]] = arith.select %{{.*}}, %[[NOW]], %{{.*}} : i32
// CHECK:   memref.store %[[USED]], %[[LU]][%[[E2]]] : memref<8xi32>
// CHECK:   %[[AGE:.*]] = arith.subi %[[NOW]], %[[USED]] : i32
// CHECK:   arith.cmpi slt, %[[AGE]], %[[STEP]] : i32
// CHECK:   memref.store %{{.*}}, %[[HIGH]][%[[E2]]] : memref<8xi8>
// CHECK:   memref.store %c-1_i32, %[[LOADS]][%[[E2]]] : memref<8xi32>
// CHECK: %[[CTR:.*]] = memref.alloc() : memref<3xi32>
// CHECK: memref.store %{{.*}}, %[[CTR]][%c0] : memref<3xi32>
// Requested misses.
// CHECK: scf.for %[[E3:.*]] = %c0 to %c8 step %c1 {
// CHECK:   scf.if
// CHECK:     %[[SIZE:.*]] = memref.load %[[CTR]][%c0] : memref<3xi32>
// CHECK:     %[[ROOM:.*]] = arith.cmpi slt, %[[SIZE]], %c4_i32 : i32
// CHECK:     scf.if %[[ROOM]] {
// CHECK:       memref.store %c1_i8, %[[OUT]][%[[E3]]]
// CHECK:     } else {
// CHECK:       scf.for {{.*}} -> (i32, i32) {
// CHECK:         memref.load %[[LU]]
// CHECK:       scf.for {{.*}} -> (i32, i32) {
// CHECK:       scf.for {{.*}} -> (i32, i32) {
// CHECK:       scf.if
// CHECK:         memref.store %c0_i8, %[[OUT]]
// Predicted misses.
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:   memref.load %[[PRED]]
// CHECK:   scf.if
// The high level ends as the residents it holds.
// CHECK: scf.for %[[E4:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[R:.*]] = memref.load %[[OUT]][%[[E4]]] : memref<8xi8>
// CHECK:   %[[HV:.*]] = memref.load %[[HIGH]][%[[E4]]] : memref<8xi8>
// CHECK:   %[[BOTH:.*]] = arith.andi %[[HV]], %[[R]] : i8
// CHECK:   memref.store %[[BOTH]], %[[HIGH]][%[[E4]]] : memref<8xi8>
moe.prefetch @lru(%requested: !moe.set<8>, %predicted: !moe.set<8>, %resident: !moe.set<8>,
                  %last_use: tensor<8xi32>, %now: tensor<1xi32>, %step: tensor<1xi32>)
    -> (res: !moe.set<8>, loads: tensor<8xi32>) attributes {experts = 8} {
  %cap = arith.constant 4 : i64
  %r, %h, %lu, %loads, %ev = moe.two_level_lru %resident, %last_use, %requested, %predicted,
      %now, %step capacity(%cap : i64)
      : !moe.set<8>, tensor<8xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %r, %loads : !moe.set<8>, tensor<8xi32>
}

// resident_first on the host: a stable partition of the tokens, those whose valid ids
// are all resident (id -1 skipped) first, then the others; ready = their number.
// CHECK-LABEL: func.func @resident_first(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[RES:[a-z0-9]+]]: memref<8xi8>, %[[ORDER:[a-z0-9]+]]: memref<?xi32>, %[[READY:[a-z0-9]+]]: memref<1xi32>)
// CHECK-NOT: scf.parallel
// CHECK: %[[FIRST:.*]] = scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 iter_args(%[[AT:.*]] = %c0) -> (index) {
// CHECK:   %[[OK:.*]] = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args(%[[ALL:.*]] = %true) -> (i1) {
// CHECK:     %[[SKIP:.*]] = arith.cmpi slt, %{{.*}}, %c0_i32 : i32
// CHECK:     %[[F:.*]] = memref.load %[[RES]][%{{.*}}] : memref<8xi8>
// CHECK:     %[[IN:.*]] = arith.cmpi ne, %[[F]], %c0_i8 : i8
// CHECK:     arith.ori %[[SKIP]], %{{.*}} : i1
// CHECK:   scf.if %[[OK]] {
// CHECK:     memref.store %{{.*}}, %[[ORDER]][%[[AT]]] : memref<?xi32>
// CHECK: scf.for %{{.*}} = %c0 to %[[T]] step %c1 iter_args(%[[AT2:.*]] = %[[FIRST]]) -> (index) {
// CHECK:   %[[NOTOK:.*]] = arith.xori %{{.*}}, %true : i1
// CHECK:   scf.if %[[NOTOK]] {
// CHECK:     memref.store %{{.*}}, %[[ORDER]][%[[AT2]]] : memref<?xi32>
// CHECK: %[[N:.*]] = arith.index_cast %[[FIRST]] : index to i32
// CHECK: memref.store %[[N]], %[[READY]][%c0] : memref<1xi32>
moe.router @resident_first(%ids: tensor<?x2xi32>, %resident: !moe.set<8>)
    -> (order: tensor<?xi32>, ready: tensor<1xi32>) attributes {experts = 8, top_k = 2} {
  %order, %ready = moe.resident_first %ids, %resident
      : tensor<?x2xi32>, !moe.set<8> -> tensor<?xi32>, tensor<1xi32>
  moe.yield %order, %ready : tensor<?xi32>, tensor<1xi32>
}

// EPLB, hierarchical (4 groups of 2 experts, 2 nodes, 4 GPUs, 12 slots): group loads;
// groups packed onto nodes (a stable insertion sort by descending load, then the
// lightest pack with room); per node, 6 slots: 4 experts once, then each extra slot to
// the expert with the highest load per replica, the slots packed onto the node's 2
// GPUs; results phy2log, log2phy (-1 first) and replica counts. Then the per-GPU loads
// (contiguous experts; placed: each slot's expert load / its replica count) and
// max / mean.
// CHECK-LABEL: func.func @eplb(
// CHECK-SAME: %[[W:[a-z0-9]+]]: memref<8xf32>, %[[P2L:[a-z0-9]+]]: memref<12xi32>, %[[L2P:[a-z0-9]+]]: memref<8x5xi32>, %[[CNT:[a-z0-9]+]]: memref<8xi32>,
// CHECK-SAME: %[[BEFORE:[a-z0-9]+]]: memref<4xf32>, %[[RATIO:[a-z0-9]+]]: memref<1xf32>)
// CHECK-SAME: moe.kind = "balance"
// CHECK-DAG: %[[FOUR:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-NOT: scf.parallel
// CHECK: %[[GLOAD:.*]] = memref.alloc() : memref<4xf32>
// CHECK: scf.for %[[G:.*]] = %c0 to %c4 step %c1 {
// CHECK:   scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args
// CHECK:   memref.store %{{.*}}, %[[GLOAD]][%[[G]]] : memref<4xf32>
// CHECK: %[[GPACK:.*]] = memref.alloc() : memref<4xi32>
// CHECK: %[[GRANK:.*]] = memref.alloc() : memref<4xi32>
// CHECK: %[[ORDER:.*]] = memref.alloc() : memref<4xindex>
// CHECK: scf.for %{{.*}} = %c1 to %c4 step %c1 {
// CHECK:   scf.while
// CHECK:     arith.cmpf olt
// CHECK: %[[PLOAD:.*]] = memref.alloc() : memref<2xf32>
// CHECK: %[[PITEMS:.*]] = memref.alloc() : memref<2xi32>
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK:   %[[PACK:.*]]:2 = scf.for %[[PK:.*]] = %c0 to %c2 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:     %[[ITEMS:.*]] = memref.load %[[PITEMS]][%[[PK]]] : memref<2xi32>
// CHECK:     %[[OPEN:.*]] = arith.cmpi slt, %[[ITEMS]], %c2_i32 : i32
// CHECK:     arith.cmpf olt
// CHECK:   memref.store %[[PACK]]#0, %[[GPACK]]
// Replication inside each node.
// CHECK: scf.for %[[NODE:.*]] = %c0 to %c2 step %c1 {
// CHECK:   scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK:   scf.for %{{.*}} = %c4 to %c6 step %c1 {
// CHECK:     %[[HOTTEST:.*]]:2 = scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:       %[[PER:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:       arith.cmpf ogt, %[[PER]], %{{.*}} : f32
// CHECK:   scf.for %{{.*}} = %c0 to %c6 step %c1 {
// CHECK:     arith.divf
// The node's slots onto its 2 GPUs, 3 each.
// CHECK:   scf.for %{{.*}} = %c0 to %c6 step %c1 {
// CHECK:     scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:       arith.cmpi slt, %{{.*}}, %c3_i32 : i32
// Results.
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   memref.store %{{.*}}, %[[CNT]][%[[E]]] : memref<8xi32>
// CHECK:   scf.for %[[R:.*]] = %c0 to %c5 step %c1 {
// CHECK:     memref.store %c-1_i32, %[[L2P]][%[[E]], %[[R]]] : memref<8x5xi32>
// CHECK: scf.for %[[SLOT:.*]] = %c0 to %c12 step %c1 {
// CHECK:   %[[LOGICAL:.*]] = memref.load %{{.*}} : memref<8xi32>
// CHECK:   memref.store %[[LOGICAL]], %[[P2L]][%[[SLOT]]] : memref<12xi32>
// CHECK:   %[[SI:.*]] = arith.index_cast %[[SLOT]] : index to i32
// CHECK:   memref.store %[[SI]], %[[L2P]][%{{.*}}, %{{.*}}] : memref<8x5xi32>
// device_loads, unplaced: 4 GPUs of 2 contiguous experts.
// CHECK: scf.for %[[D:.*]] = %c0 to %c4 step %c1 {
// CHECK:   %[[DSUM:.*]] = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args
// CHECK:     memref.load %[[W]]
// CHECK:   memref.store %[[DSUM]], %[[BEFORE]][%[[D]]] : memref<4xf32>
// device_loads, placed: each GPU's 3 slots share their expert's load.
// CHECK: %[[AFTER:.*]] = memref.alloc() : memref<4xf32>
// CHECK: scf.for %[[D2:.*]] = %c0 to %c4 step %c1 {
// CHECK:   scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args
// CHECK:     %[[X:.*]] = memref.load %[[P2L]][%{{.*}}] : memref<12xi32>
// CHECK:     %[[RCNT:.*]] = memref.load %[[CNT]][%{{.*}}] : memref<8xi32>
// CHECK:     %[[SHARE:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:   memref.store %{{.*}}, %[[AFTER]][%[[D2]]] : memref<4xf32>
// imbalance: max / mean, 1 when the sum is 0.
// CHECK: %[[SM:.*]]:2 = scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args({{.*}}) -> (f32, f32) {
// CHECK:   memref.load %[[AFTER]]
// CHECK:   arith.addf
// CHECK:   arith.maximumf
// CHECK: %[[MEAN:.*]] = arith.divf %[[SM]]#0, %[[FOUR]] : f32
// CHECK: %[[Q:.*]] = arith.divf %[[SM]]#1, %[[MEAN]] : f32
// CHECK: %[[ZEROSUM:.*]] = arith.cmpf oeq, %[[SM]]#0, %{{.*}} : f32
// CHECK: %[[RES:.*]] = arith.select %[[ZEROSUM]], %{{.*}}, %[[Q]] : f32
// CHECK: memref.store %[[RES]], %[[RATIO]][%c0] : memref<1xf32>
moe.balance @eplb(%loads: tensor<8xf32>)
    -> (phy2log: tensor<12xi32>, log2phy: tensor<8x5xi32>, count: tensor<8xi32>,
        before: tensor<4xf32>, ratio: tensor<1xf32>) attributes {experts = 8} {
  %p, %l, %c = moe.eplb %loads groups = 4 nodes = 2 gpus = 4
      : tensor<8xf32> -> tensor<12xi32>, tensor<8x5xi32>, tensor<8xi32>
  %b = moe.device_loads %loads gpus = 4 : tensor<8xf32> -> tensor<4xf32>
  %a = moe.device_loads %loads placed(%p, %c : tensor<12xi32>, tensor<8xi32>) gpus = 4
      : tensor<8xf32> -> tensor<4xf32>
  %r = moe.imbalance %a : tensor<4xf32> -> tensor<1xf32>
  moe.yield %p, %l, %c, %b, %r
      : tensor<12xi32>, tensor<8x5xi32>, tensor<8xi32>, tensor<4xf32>, tensor<1xf32>
}

// Libra's requests [G = 2, E = 8] (a token's valid ids on its GPU, in token order) and
// served loads: GPU g's requests for e go to g when it hosts e (home: e / 4, or the
// placement's flag), else to e's home.
// CHECK-LABEL: func.func @requests(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[TG:[a-z0-9]+]]: memref<?xi32>, %[[M:[a-z0-9]+]]: memref<8x2xi32>,
// CHECK-SAME: %[[BEFORE:[a-z0-9]+]]: memref<2xf32>, %[[REP:[a-z0-9]+]]: memref<2xf32>)
// CHECK: %[[REQ:.*]] = memref.alloc() : memref<2x8xi32>
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK:   scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:     memref.store %c0_i32, %[[REQ]]
// CHECK: scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   %[[G:.*]] = memref.load %[[TG]][%[[TOK]]] : memref<?xi32>
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[E:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     scf.if %{{.*}} {
// CHECK:       %[[GI:.*]] = arith.index_cast %[[G]] : i32 to index
// CHECK:       %[[EI:.*]] = arith.index_cast %[[E]] : i32 to index
// CHECK:       %[[OLD:.*]] = memref.load %[[REQ]][%[[GI]], %[[EI]]] : memref<2x8xi32>
// CHECK:       %[[NEW:.*]] = arith.addi %[[OLD]], %c1_i32 : i32
// CHECK:       memref.store %[[NEW]], %[[REQ]][%[[GI]], %[[EI]]] : memref<2x8xi32>
// CHECK: %[[L0:.*]] = memref.alloc() : memref<2xi32>
// CHECK: scf.for %[[G2:.*]] = %c0 to %c2 step %c1 {
// CHECK:   scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[HOME:.*]] = arith.divui %[[E2]], %c4 : index
// CHECK:     %[[HERE:.*]] = arith.cmpi eq, %{{.*}}, %[[G2]] : index
// CHECK:     %[[H:.*]] = arith.select %[[HERE]], %[[G2]], %[[HOME]] : index
// CHECK:     %[[R:.*]] = memref.load %[[REQ]][%[[G2]], %[[E2]]]
// CHECK:     %[[A:.*]] = memref.load %[[L0]][%[[H]]]
// CHECK:     %[[B:.*]] = arith.addi %[[A]], %[[R]] : i32
// CHECK:     memref.store %[[B]], %[[L0]][%[[H]]]
// CHECK: scf.for %[[G3:.*]] = %c0 to %c2 step %c1 {
// CHECK:   %[[LV:.*]] = memref.load %[[L0]][%[[G3]]]
// CHECK:   %[[LF:.*]] = arith.sitofp %[[LV]] : i32 to f32
// CHECK:   memref.store %[[LF]], %[[BEFORE]][%[[G3]]] : memref<2xf32>
// CHECK: %[[L1:.*]] = memref.alloc() : memref<2xi32>
// CHECK: scf.for %[[G4:.*]] = %c0 to %c2 step %c1 {
// CHECK:   scf.for %[[E4:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[HOSTS:.*]] = memref.load %[[M]][%[[E4]], %[[G4]]] : memref<8x2xi32>
// CHECK:     %[[HAS:.*]] = arith.cmpi ne, %[[HOSTS]], %c0_i32 : i32
// CHECK:     arith.select %[[HAS]], %[[G4]], %{{.*}} : index
// CHECK:   memref.store %{{.*}}, %[[REP]]
moe.balance @requests(%ids: tensor<?x2xi32>, %token_gpu: tensor<?xi32>, %m: tensor<8x2xi32>)
    -> (before: tensor<2xf32>, replicated: tensor<2xf32>) attributes {experts = 8} {
  %req = moe.gpu_requests %ids, %token_gpu gpus = 2
      : tensor<?x2xi32>, tensor<?xi32> -> tensor<2x8xi32>
  %before = moe.served_loads %req : tensor<2x8xi32> -> tensor<2xf32>
  %rep = moe.served_loads %req placed(%m : tensor<8x2xi32>) : tensor<2x8xi32> -> tensor<2xf32>
  moe.yield %before, %rep : tensor<2xf32>, tensor<2xf32>
}

// libra_replicate (App. B Alg. 1): N = clamp(extra, 0, 8), L = clamp(floor(N * alpha),
// 0, N); the home placement; phase 1, per GPU, the top-L requested remote experts
// (a top-k under per-GPU flags); phase 2, (N - L) * 2 steps while not stopped: the
// most loaded GPU above the target, its hottest homed expert, the least loaded GPU
// without it and with room, a copy when the load stays within the target.
// CHECK-LABEL: func.func @replicate(
// CHECK-SAME: %[[REQ:[a-z0-9]+]]: memref<2x8xi32>, %[[M:[a-z0-9]+]]: memref<8x2xi32>, %[[EXTRA:[a-z0-9]+]]: i64, %[[ALPHA:[a-z0-9]+]]: f32)
// CHECK: %[[N:.*]] = arith.minui %{{.*}}, %c8_i64 : i64
// CHECK: %[[NF:.*]] = arith.sitofp %[[N]] : i64 to f32
// CHECK: %[[NA:.*]] = arith.mulf %[[NF]], %[[ALPHA]] : f32
// CHECK: %[[FL:.*]] = math.floor %[[NA]] : f32
// CHECK: arith.fptosi %[[FL]] : f32 to i64
// CHECK: %[[L:.*]] = arith.select %{{.*}}, %c0_i64, %{{.*}} : i64
// CHECK: %[[XTRA:.*]] = memref.alloc() : memref<2xi32>
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[HOME:.*]] = arith.divui %[[E]], %c4 : index
// CHECK:     %[[ISHOME:.*]] = arith.cmpi eq, %[[HOME]], %[[G]] : index
// CHECK:     %[[FLAG:.*]] = arith.extui %[[ISHOME]] : i1 to i32
// CHECK:     memref.store %[[FLAG]], %[[M]][%[[E]], %[[G]]] : memref<8x2xi32>
// Phase 1.
// CHECK: %[[TAKEN:.*]] = memref.alloc() : memref<8xi8>
// CHECK: scf.for %[[G1:.*]] = %c0 to %c2 step %c1 {
// CHECK:   %[[LI:.*]] = arith.index_cast %[[L]] : i64 to index
// CHECK:   scf.while
// CHECK:     arith.cmpi ult, %{{.*}}, %[[LI]] : index
// CHECK:   scf.for %{{.*}} = %c0 to %[[LI]] step %c1 {
// CHECK:     scf.if
// CHECK:       memref.store %c1_i32, %[[M]][%{{.*}}, %[[G1]]] : memref<8x2xi32>
// Phase 2.
// CHECK: %[[STOP:.*]] = memref.alloc() : memref<1xi8>
// CHECK: %[[LEFT:.*]] = arith.subi %[[N]], %[[L]] : i64
// CHECK: %[[STEPS:.*]] = arith.muli %[[LEFT]], %c2_i64 : i64
// CHECK: %[[STEPSI:.*]] = arith.index_cast %[[STEPS]] : i64 to index
// CHECK: scf.for %{{.*}} = %c0 to %[[STEPSI]] step %c1 {
// CHECK:   %[[STOPPED:.*]] = memref.load %[[STOP]][%c0] : memref<1xi8>
// CHECK:   %[[GO:.*]] = arith.cmpi eq, %[[STOPPED]], %c0_i8 : i8
// CHECK:   scf.if %[[GO]] {
// CHECK:     %[[SRC:.*]]:2 = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:     %[[HOT:.*]]:2 = scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:     %[[DST:.*]]:2 = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args({{.*}}) -> (i32, f32) {
// CHECK:       arith.negf
// CHECK:     %[[FITS:.*]] = arith.cmpf ole, %{{.*}}, %{{.*}} : f32
// CHECK:     %[[DO:.*]] = arith.andi %{{.*}}, %[[FITS]] : i1
// CHECK:     scf.if %[[DO]] {
// CHECK:       memref.store %c1_i32, %[[M]]
// CHECK:     } else {
// CHECK:       memref.store %c1_i8, %[[STOP]][%c0] : memref<1xi8>
moe.balance @replicate(%req: tensor<2x8xi32>) -> (m: tensor<8x2xi32>) attributes {experts = 8} {
  %n = moe.knob "extra_experts" = 2 : i64
  %a = moe.knob "alpha" = 0.5 : f32
  %m = moe.libra_replicate %req extra(%n : i64) alpha(%a : f32)
      : tensor<2x8xi32> -> tensor<8x2xi32>
  moe.yield %m : tensor<8x2xi32>
}

// libra_shard (App. C Alg. 2): local and remote loads; limit = (1 + epsilon) * target;
// at most 4 * G * E = 64 rounds while not done: when the max load is over the limit,
// sources in descending load, the feasible expert with the largest remote share (a
// replicated one, >= 2 copies, with a destination below the target) moves
// min(share, floor(target - load)) tokens; done when a round moves nothing.
// CHECK-LABEL: func.func @shard(
// CHECK-SAME: %[[REQ:[a-z0-9]+]]: memref<2x8xi32>, %[[M:[a-z0-9]+]]: memref<8x2xi32>, %[[PLAN:[a-z0-9]+]]: memref<2x8xi32>, %[[OUT:[a-z0-9]+]]: memref<2xf32>, %[[EPS:[a-z0-9]+]]: f32)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[LOADS:.*]] = memref.alloc() : memref<2xi32>
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     memref.store %c0_i32, %[[PLAN]]
// CHECK: %[[TARGET:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: %[[SLACK:.*]] = arith.addf %[[EPS]], %[[ONE]] : f32
// CHECK: %[[LIMIT:.*]] = arith.mulf %[[SLACK]], %[[TARGET]] : f32
// CHECK: %[[STATE:.*]] = memref.alloc() : memref<2xi8>
// CHECK: %[[HOSTS:.*]] = memref.alloc() : memref<8xi32>
// CHECK: scf.while (%[[ROUND:.*]] = %c0) : (index) -> index {
// CHECK:   %[[DONE:.*]] = memref.load %[[STATE]][%c0] : memref<2xi8>
// CHECK:   arith.cmpi ult, %[[ROUND]], %c64 : index
// CHECK: } do {
// CHECK:   %[[MAX:.*]] = scf.for {{.*}} -> (f32) {
// CHECK:     arith.maximumf
// CHECK:   %[[OVER:.*]] = arith.cmpf ogt, %[[MAX]], %[[LIMIT]] : f32
// CHECK:   scf.if %[[OVER]] {
// CHECK:     scf.while
// CHECK:       %[[BEST:.*]]:4 = scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args({{.*}}) -> (i32, i32, i32, i32) {
// CHECK:         %[[COPIES:.*]] = memref.load %[[HOSTS]]
// CHECK:         arith.cmpi sge, %[[COPIES]], %c2_i32 : i32
// CHECK:         scf.if %{{.*}} -> (i32, i32) {
// CHECK:           math.floor
// CHECK:       scf.if
// CHECK:         %[[MOVED:.*]] = arith.select %{{.*}}, %[[BEST]]#1, %[[BEST]]#3 : i32
// CHECK:         memref.store %{{.*}}, %[[PLAN]]
// CHECK:         memref.store %c1_i8, %[[STATE]][%c1] : memref<2xi8>
// CHECK:   } else {
// CHECK:     memref.store %c1_i8, %[[STATE]][%c0] : memref<2xi8>
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK:   %[[LV:.*]] = memref.load %[[LOADS]][%[[G]]]
// CHECK:   %[[LF:.*]] = arith.sitofp %[[LV]] : i32 to f32
// CHECK:   memref.store %[[LF]], %[[OUT]][%[[G]]] : memref<2xf32>
moe.balance @shard(%req: tensor<2x8xi32>, %m: tensor<8x2xi32>)
    -> (plan: tensor<2x8xi32>, after: tensor<2xf32>) attributes {experts = 8} {
  %eps = moe.knob "epsilon" = 0.05 : f32
  %plan, %after = moe.libra_shard %req, %m epsilon(%eps : f32)
      : tensor<2x8xi32>, tensor<8x2xi32> -> tensor<2x8xi32>, tensor<2xf32>
  moe.yield %plan, %after : tensor<2x8xi32>, tensor<2xf32>
}
