/* Calls the xshare policy compiled by moe-compile through its C header and shared
 * library, and checks the invariants of its outputs. */
#include "xshare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { T = 8, E = 128, K = 4 };

int main(void) {
  float logits[T * E];
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < E; ++e)
      logits[t * E + e] = (float)((t * 37 + e * 11) % 97) / 10.0f;
  int32_t ids[T * K], counts[E], active[E], num_active, padded;
  float weights[T * K];
  uint8_t selected[E];
  int32_t *sorted = malloc(sizeof(int32_t) * xshare_sorted_token_ids_size(T));
  int32_t *blocks = malloc(sizeof(int32_t) * xshare_expert_ids_size(T));
  if (xshare(T, logits, ids, weights, selected, counts, active, &num_active, sorted, blocks,
             &padded, /*knobs: the defaults*/ NULL) != 0)
    return 1;

  int routed = 0, in_set = 1, used = 0;
  for (int e = 0; e < E; ++e) {
    routed += counts[e];
    used += counts[e] > 0;
  }
  double worst = 0;
  for (int t = 0; t < T; ++t) {
    double sum = 0;
    for (int j = 0; j < K; ++j) {
      sum += weights[t * K + j];
      in_set &= ids[t * K + j] >= 0 && selected[ids[t * K + j]];
    }
    worst = fmax(worst, fabs(sum - 1.0));
  }
  printf("routed=%d in_set=%d active_ok=%d weights_ok=%d padded_multiple=%d\n", routed,
         in_set, used == num_active, worst < 1e-5, padded % 64 == 0);
  free(sorted);
  free(blocks);
  return 0;
}
