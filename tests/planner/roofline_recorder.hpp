// A roofline that remembers what the cost model asked it: the planner tests that check which
// queries a layout's cost makes (their shapes, dtypes and bytes) rather than the times.
#pragma once

#include <string>
#include <vector>

#include "planner/costs/cost_source.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

class RooflineRecorder final : public CostSource {
 public:
  explicit RooflineRecorder(const Cluster& c) : roof_(c) {}
  std::string name() const override { return roof_.name(); }
  Result<CostEstimate> gemm(const GemmQuery& q) const override {
    gemms.push_back(q);
    return roof_.gemm(q);
  }
  Result<CostEstimate> grouped_gemm(const GroupedGemmQuery& q) const override {
    grouped.push_back(q);
    return roof_.grouped_gemm(q);
  }
  Result<CostEstimate> elementwise(const ElementwiseQuery& q) const override {
    elementwise_ops.push_back(q);
    return roof_.elementwise(q);
  }
  Result<CostEstimate> collective(const CollectiveQuery& q) const override {
    collectives.push_back(q);
    return roof_.collective(q);
  }
  Result<CostEstimate> attention(const AttentionQuery& q) const override {
    attention_queries.push_back(q);
    return roof_.attention(q);
  }
  mutable std::vector<GemmQuery> gemms;
  mutable std::vector<GroupedGemmQuery> grouped;
  mutable std::vector<ElementwiseQuery> elementwise_ops;
  mutable std::vector<CollectiveQuery> collectives;
  mutable std::vector<AttentionQuery> attention_queries;

 private:
  RooflineCosts roof_;
};

}  // namespace moeplan::planner
