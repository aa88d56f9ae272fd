//===- BalanceState.cpp - what balancers keep between steps ---------------===//
#include "switchyard/Executor/Balance/BalanceState.h"

#include <algorithm>

namespace switchyard::exec {

LoadWindow::LoadWindow(int64_t experts, int64_t steps)
    : perExpert(static_cast<size_t>(experts), 0.0f), steps(steps) {}

void LoadWindow::record(const Routing &routing) {
  for (int32_t id : routing.ids)
    if (id >= 0)
      perExpert[static_cast<size_t>(id)] += 1.0f;
  ++seen;
}

void LoadWindow::clear() {
  std::fill(perExpert.begin(), perExpert.end(), 0.0f);
  seen = 0;
}

double ReplicaForecast::hitRate(const Routing &routing) const {
  const int64_t total = routing.tokens, k = routing.k;
  if (predictedIds.empty() || total <= 0)
    return -1;
  const int64_t kp = static_cast<int64_t>(predictedIds.size()) / total;
  int64_t hits = 0, pairs = 0;
  for (int64_t slot = 0; slot < total * k; ++slot) {
    const int32_t e = routing.ids[static_cast<size_t>(slot)];
    if (e < 0)
      continue;
    ++pairs;
    const auto row = predictedIds.begin() + (slot / k) * kp;
    hits += std::find(row, row + kp, e) != row + kp;
  }
  return pairs ? double(hits) / double(pairs) : 1.0;
}

} // namespace switchyard::exec
