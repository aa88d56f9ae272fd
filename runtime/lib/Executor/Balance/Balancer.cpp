//===- Balancer.cpp - what an expert-parallel layer asks a balancer -------===//
#include "switchyard/Executor/Balance/Balancer.h"

namespace switchyard::exec {

Balancer::~Balancer() = default;

} // namespace switchyard::exec
