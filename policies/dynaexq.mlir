// dynaexq.mlir - DynaExq's online residency policy for one MoE layer
// (../shared/papers/002_*.txt, §3.3 budget model, §3.5 scheduling policy):
//   1. hotness: at the end of each update interval, S <- alpha*S + (1-alpha)*c, where c
//      counts the times each expert was selected during the interval (the engine calls
//      this rule when its interval timer fires and then resets the counters);
//   2. capacity: n_hi high-precision experts per layer fit the byte budget once the
//      fixed reservation and every expert's low-precision version are paid for;
//   3. target set: the top-n_hi experts by S, with hysteresis: an outsider replaces the
//      weakest member only if it is hotter by more than `margin` (no churn when scores
//      move within the margin);
//   4. queues: promotions = target \ current (hottest first), demotions = current \
//      target (coldest first), the order the transition pipeline admits them in.
//
// Shape: generic in E. The knobs' defaults are Qwen3-30B-A3B's (--model
// models/qwen3-30b-a3b.json: 128 experts): 48 layers, BF16 experts of 9 MiB (hi) with
// an INT4 fallback of 2.25 MiB (lo), on a 48 GiB budget with 20 GiB fixed (KV cache,
// dense weights, activations): n_hi = 34 experts per layer.
// Inputs: hotness f32 [E] (S from the last interval), counts i32 [E],
//         current: bool [E] (the high-precision set pinned now).
// Outputs: hotness (updated S), hi_set bool [E], promotions / demotions i32 [E]
//          (-1 padded), num_promotions / num_demotions i32 [1].
// Knobs: alpha (0.8), margin (score units, 1.0), budget_bytes, fixed_bytes, hi_bytes,
//        lo_bytes, layers (the budget model; a budget that cannot hold the low-precision
//        experts plus one high-precision expert per layer is rejected).
moe.residency @dynaexq(%hotness: tensor<?xf32>, %counts: tensor<?xi32>,
                       %current: !moe.set<?>)
    -> (hotness_out: tensor<?xf32>, hi_set: !moe.set<?>,
        promotions: tensor<?xi32>, num_promotions: tensor<1xi32>,
        demotions: tensor<?xi32>, num_demotions: tensor<1xi32>) {
  %alpha = moe.knob "alpha" = 0.8 : f32
  %margin = moe.knob "margin" = 1.0 : f32
  %budget = moe.knob "budget_bytes" = 51539607552 : i64
  %fixed = moe.knob "fixed_bytes" = 21474836480 : i64
  %hi_bytes = moe.knob "hi_bytes" = 9437184 : i64
  %lo_bytes = moe.knob "lo_bytes" = 2359296 : i64
  %layers = moe.knob "layers" = 48 : i64
  %s = moe.ema %hotness, %counts alpha(%alpha : f32) : tensor<?xf32>, tensor<?xi32>
  %n = moe.hi_capacity budget(%budget : i64) fixed(%fixed : i64) hi_bytes(%hi_bytes : i64)
      lo_bytes(%lo_bytes : i64) layers(%layers : i64) experts = ? -> i64
  %hi = moe.hot_set %s, %current capacity(%n : i64) margin(%margin : f32)
      : tensor<?xf32> -> !moe.set<?>
  %up = moe.difference %hi, %current : !moe.set<?>
  %down = moe.difference %current, %hi : !moe.set<?>
  %promotions, %num_up = moe.ranked %up by %s : !moe.set<?>, tensor<?xf32>
      -> tensor<?xi32>, tensor<1xi32>
  %demotions, %num_down = moe.ranked %down by %s ascending : !moe.set<?>, tensor<?xf32>
      -> tensor<?xi32>, tensor<1xi32>
  moe.yield %s, %hi, %promotions, %num_up, %demotions, %num_down
      : tensor<?xf32>, !moe.set<?>, tensor<?xi32>, tensor<1xi32>, tensor<?xi32>,
        tensor<1xi32>
}
