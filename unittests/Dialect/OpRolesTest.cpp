//===- OpRolesTest.cpp - every moe op has a role and a lowering -----------===//
//
// Op roles live in ODS (MoeInterfaces.td), so nothing keeps a list of ops by hand;
// this test is what makes a new op impossible to forget: every registered op of the
// dialect has exactly one role trait, only token- and route-stage ops are row-wise,
// every compute op has a loop lowering (not the kernel synchronisation the GPU mapping
// writes after it), and every container is a PolicyOpInterface.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Conversion/MoeToLoops/LoopLoweringOpInterface.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/InitAllDialects.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace switchyard::moe;

namespace {

class MoeOpRoles : public ::testing::Test {
protected:
  MoeOpRoles() {
    DialectRegistry registry;
    switchyard::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  std::vector<RegisteredOperationName> moeOps() {
    std::vector<RegisteredOperationName> ops;
    for (RegisteredOperationName name : context.getRegisteredOperations())
      if (name.getDialectNamespace() == "moe")
        ops.push_back(name);
    return ops;
  }
  MLIRContext context;
};

TEST_F(MoeOpRoles, DialectHasOps) { EXPECT_GT(moeOps().size(), 40u); }

TEST_F(MoeOpRoles, EveryOpHasExactlyOneRole) {
  for (RegisteredOperationName name : moeOps()) {
    int roles = name.hasTrait<role::TokenStage>() + name.hasTrait<role::BatchStage>() +
                name.hasTrait<role::SelectStage>() + name.hasTrait<role::RouteStage>() +
                name.hasTrait<role::RuleStep>() + name.hasTrait<role::Structure>() +
                name.hasTrait<role::KernelSync>();
    EXPECT_EQ(roles, 1) << name.getStringRef().str();
  }
}

TEST_F(MoeOpRoles, RowWiseOpsAreTokenOrRouteStage) {
  for (RegisteredOperationName name : moeOps()) {
    if (name.hasTrait<role::RowWise>()) {
      EXPECT_TRUE(name.hasTrait<role::TokenStage>() || name.hasTrait<role::RouteStage>())
          << name.getStringRef().str();
    }
  }
}

TEST_F(MoeOpRoles, EveryComputeOpHasALoopLowering) {
  for (RegisteredOperationName name : moeOps()) {
    bool structure = name.hasTrait<role::Structure>();
    bool kernelSync = name.hasTrait<role::KernelSync>(); // made after the loop lowering
    EXPECT_EQ(name.hasInterface<LoopLoweringOpInterface>(), !structure && !kernelSync)
        << name.getStringRef().str();
  }
}

TEST_F(MoeOpRoles, ContainersArePolicies) {
  int policies = 0;
  for (RegisteredOperationName name : moeOps())
    if (name.hasInterface<PolicyOpInterface>()) {
      ++policies;
      EXPECT_TRUE(name.hasTrait<role::Structure>()) << name.getStringRef().str();
      EXPECT_TRUE(name.hasInterface<FunctionOpInterface>()) << name.getStringRef().str();
    }
  EXPECT_EQ(policies, 4); // router, residency, balance, prefetch
}

} // namespace
