/* Calls one compiled xshare (8 experts, top-2) with the defaults and with two knob
   structs, then with a knob and a token count its entry rejects. */
#include "xshare.h"

#include <stdio.h>

enum { T = 4, E = 8, K = 2 };

static void run(const char *label, const struct xshare_knobs *knobs) {
  float logits[T * E];
  for (int i = 0; i < T * E; ++i)
    logits[i] = (float)((i * 37) % 11) - 5.0f; /* a fixed pattern */
  int32_t ids[T * K], counts[E], active[E], num_active[1], padded[1];
  float weights[T * K];
  uint8_t selected[E];
  int32_t sorted[T * K + E * 63], blocks[(T * K + E * 63 + 63) / 64];
  int32_t status = xshare(T, logits, ids, weights, selected, counts, active, num_active,
                          sorted, blocks, padded, knobs);
  int n = 0;
  for (int e = 0; e < E; ++e)
    n += selected[e];
  printf("%s: status %d, %d experts selected, token 0 -> %d %d\n", label, status, n,
         ids[0], ids[1]);
}

int main(void) {
  run("defaults", NULL);
  struct xshare_knobs knobs = xshare_knobs_default();
  printf("default knobs: k0 = %lld, budget = %lld\n", (long long)knobs.k0,
         (long long)knobs.budget);
  knobs.budget = 0;
  run("budget 0", &knobs);
  knobs.k0 = 0;
  run("k0 0, budget 0", &knobs);
  knobs.budget = -1;
  int32_t status = xshare(1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                          &knobs);
  printf("budget -1: status %d: %s\n", status, xshare_status_message(status));
  status = xshare(-1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  printf("num_tokens -1: status %d: %s\n", status, xshare_status_message(status));
  return 0;
}
