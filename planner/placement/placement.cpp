// Expert placement policies. `eplb` mirrors DeepSeek's eplb.py operation by operation, in
// float32 like its `weight.float()`; `best` refines that result (placement/best_search).
#include "planner/placement/placement.hpp"

#include "models/index.hpp"
#include "planner/placement/best_search.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace moeplan::planner {

namespace {

using Clock = std::chrono::steady_clock;

// ---- DeepSeek EPLB, step by step ---------------------------------------------------------

// balanced_packing: items by descending weight (stable), each into the lightest pack that has
// room (first such pack on ties); every pack gets exactly n / m items.
void balanced_packing(const std::vector<float>& weight, int num_packs, std::vector<int>& pack_index,
                      std::vector<int>& rank_in_pack) {
  const int n = static_cast<int>(weight.size());
  const int per_pack = n / num_packs;
  pack_index.assign(uz(n), -1);
  rank_in_pack.assign(uz(n), -1);
  if (per_pack == 1) {
    std::iota(pack_index.begin(), pack_index.end(), 0);
    std::fill(rank_in_pack.begin(), rank_in_pack.end(), 0);
    return;
  }
  std::vector<int> order(uz(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return weight[uz(a)] > weight[uz(b)]; });
  std::vector<float> pack_weights(uz(num_packs), 0.0F);
  std::vector<int> pack_items(uz(num_packs), 0);
  for (const int item : order) {
    int pack = -1;
    for (int p = 0; p < num_packs; ++p) {
      if (pack_items[uz(p)] >= per_pack) continue;
      if (pack < 0 || pack_weights[uz(p)] < pack_weights[uz(pack)]) pack = p;
    }
    pack_index[uz(item)] = pack;
    rank_in_pack[uz(item)] = pack_items[uz(pack)];
    pack_weights[uz(pack)] += weight[uz(item)];
    ++pack_items[uz(pack)];
  }
}

// replicate_experts: slot i < num_log holds expert i; each further slot goes to the expert with
// the highest weight / count (first index on ties).
void replicate_experts(const std::vector<float>& weight, int num_phy, std::vector<int>& phy2log,
                       std::vector<int>& rank, std::vector<int>& logcnt) {
  const int num_log = static_cast<int>(weight.size());
  phy2log.resize(uz(num_phy));
  std::iota(phy2log.begin(), phy2log.begin() + num_log, 0);
  rank.assign(uz(num_phy), 0);
  logcnt.assign(uz(num_log), 1);
  for (int i = num_log; i < num_phy; ++i) {
    int best = 0;
    float best_value = weight[0] / static_cast<float>(logcnt[0]);
    for (int e = 1; e < num_log; ++e) {
      const float v = weight[uz(e)] / static_cast<float>(logcnt[uz(e)]);
      if (v > best_value) {
        best_value = v;
        best = e;
      }
    }
    phy2log[uz(i)] = best;
    rank[uz(i)] = logcnt[uz(best)];
    ++logcnt[uz(best)];
  }
}

std::vector<int> inverse(const std::vector<int>& perm) {
  std::vector<int> inv(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inv[uz(perm[i])] = static_cast<int>(i);
  return inv;
}

// rebalance_experts_hierarchical for one layer: pack groups onto nodes, replicate within each
// node, pack each node's replicas onto its GPUs.
void eplb_layer(const std::vector<double>& counts, int num_phy, int num_groups, int num_nodes,
                int num_gpus, std::vector<int>& phy2log, std::vector<int>& phyrank,
                std::vector<int>& logcnt) {
  const int num_log = static_cast<int>(counts.size());
  std::vector<float> weight(counts.size());
  for (std::size_t e = 0; e < counts.size(); ++e) weight[e] = static_cast<float>(counts[e]);
  const int group_size = num_log / num_groups;
  const int groups_per_node = num_groups / num_nodes;
  const int phy_per_gpu = num_phy / num_gpus;
  const int log_per_node = num_log / num_nodes;
  const int phy_per_node = num_phy / num_nodes;

  // Step 1: groups onto nodes.
  std::vector<float> tokens_per_group(uz(num_groups), 0.0F);
  for (int g = 0; g < num_groups; ++g) {
    for (int j = 0; j < group_size; ++j) {
      tokens_per_group[uz(g)] += weight[uz(g * group_size + j)];
    }
  }
  std::vector<int> group_pack, group_rank;
  balanced_packing(tokens_per_group, num_nodes, group_pack, group_rank);
  std::vector<int> log2mlog(uz(num_log));
  for (int e = 0; e < num_log; ++e) {
    const int g = e / group_size;
    log2mlog[uz(e)] =
        (group_pack[uz(g)] * groups_per_node + group_rank[uz(g)]) * group_size + e % group_size;
  }
  const std::vector<int> mlog2log = inverse(log2mlog);

  // Steps 2 and 3 per node.
  phy2log.assign(uz(num_phy), -1);
  phyrank.assign(uz(num_phy), -1);
  std::vector<int> mlogcnt(uz(num_log), 0);
  const int gpus_per_node = num_gpus / num_nodes;
  for (int n = 0; n < num_nodes; ++n) {
    std::vector<float> tokens_per_mlog(uz(log_per_node));
    for (int j = 0; j < log_per_node; ++j) {
      tokens_per_mlog[uz(j)] = weight[uz(mlog2log[uz(n * log_per_node + j)])];
    }
    std::vector<int> phy2mlog, rank, cnt;
    replicate_experts(tokens_per_mlog, phy_per_node, phy2mlog, rank, cnt);
    std::vector<float> tokens_per_phy(uz(phy_per_node));
    for (int p = 0; p < phy_per_node; ++p) {
      const int m = phy2mlog[uz(p)];
      tokens_per_phy[uz(p)] = tokens_per_mlog[uz(m)] / static_cast<float>(cnt[uz(m)]);
    }
    std::vector<int> pack_index, rank_in_pack;
    balanced_packing(tokens_per_phy, gpus_per_node, pack_index, rank_in_pack);
    std::vector<int> phy2pphy(uz(phy_per_node));
    for (int p = 0; p < phy_per_node; ++p) {
      phy2pphy[uz(p)] = pack_index[uz(p)] * phy_per_gpu + rank_in_pack[uz(p)];
    }
    const std::vector<int> pphy2phy = inverse(phy2pphy);
    for (int q = 0; q < phy_per_node; ++q) {
      const int p = pphy2phy[uz(q)];
      const int mlog = phy2mlog[uz(p)] + n * log_per_node;
      phy2log[uz(n * phy_per_node + q)] = mlog2log[uz(mlog)];
      phyrank[uz(n * phy_per_node + q)] = rank[uz(p)];
    }
    for (int j = 0; j < log_per_node; ++j) mlogcnt[uz(n * log_per_node + j)] = cnt[uz(j)];
  }
  logcnt.assign(uz(num_log), 0);
  for (int e = 0; e < num_log; ++e) logcnt[uz(e)] = mlogcnt[uz(log2mlog[uz(e)])];
}

Result<PlacementResult> run_eplb(const ExpertLoad& load, const PlacementConfig& c, int num_slots) {
  PlacementResult r;
  const int groups = c.hierarchical() ? c.num_groups : 1;
  const int nodes = c.hierarchical() ? c.num_nodes : 1;
  std::vector<std::vector<int>> ranks;
  for (int l = 0; l < load.num_layers(); ++l) {
    std::vector<int> phy2log, phyrank, logcnt;
    eplb_layer(load.counts[uz(l)], num_slots, groups, nodes, c.num_gpus, phy2log, phyrank, logcnt);
    r.placement.physical_to_logical.push_back(std::move(phy2log));
    ranks.push_back(std::move(phyrank));
    r.logical_count.push_back(std::move(logcnt));
  }
  int max_replicas = 1;
  for (const auto& row : r.logical_count) {
    max_replicas = std::max(max_replicas, *std::max_element(row.begin(), row.end()));
  }
  for (int l = 0; l < load.num_layers(); ++l) {
    std::vector<std::vector<int>> l2p(uz(load.num_experts), std::vector<int>(uz(max_replicas), -1));
    const auto& map = r.placement.physical_to_logical[uz(l)];
    for (int s = 0; s < num_slots; ++s) l2p[uz(map[uz(s)])][uz(ranks[uz(l)][uz(s)])] = s;
    r.logical_to_physical.push_back(std::move(l2p));
  }
  return r;
}

}  // namespace

std::string policy_name(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kContiguous: return "contiguous";
    case PlacementPolicy::kRoundRobin: return "round_robin";
    case PlacementPolicy::kEplb: return "eplb";
    case PlacementPolicy::kBest: return "best";
  }
  return "unknown";
}

Result<PlacementPolicy> parse_policy(const std::string& name) {
  for (const auto p : {PlacementPolicy::kContiguous, PlacementPolicy::kRoundRobin,
                       PlacementPolicy::kEplb, PlacementPolicy::kBest}) {
    if (policy_name(p) == name) return p;
  }
  return Error{"unknown placement policy '" + name +
               "', expected contiguous, round_robin, eplb or best"};
}

Status validate_config(const PlacementConfig& c, int num_experts, PlacementPolicy policy) {
  const std::string e = std::to_string(num_experts);
  if (num_experts <= 0) return Error{"placement: expected at least one expert"};
  if (c.num_gpus <= 0 || c.num_nodes <= 0 || c.num_groups <= 0) {
    return Error{"placement: expected positive GPU, node and group counts"};
  }
  if (c.num_gpus % c.num_nodes != 0) {
    return Error{"placement: expected the GPU count (" + std::to_string(c.num_gpus) +
                 ") to be a multiple of the node count (" + std::to_string(c.num_nodes) + ")"};
  }
  const int slots = c.num_slots == 0 ? num_experts : c.num_slots;
  if (slots < num_experts) {
    return Error{"placement: expected at least " + e + " slots (one per expert), got " +
                 std::to_string(slots)};
  }
  if (slots % c.num_gpus != 0) {
    return Error{"placement: expected the slot count (" + std::to_string(slots) +
                 ") to be a multiple of the GPU count (" + std::to_string(c.num_gpus) + ")"};
  }
  if (policy == PlacementPolicy::kContiguous || policy == PlacementPolicy::kRoundRobin) {
    if (slots != num_experts) {
      return Error{"placement: policy " + policy_name(policy) +
                   " places no redundant experts, expected " + e + " slots, got " +
                   std::to_string(slots)};
    }
    return Status::Ok();
  }
  if (c.hierarchical() && num_experts % c.num_groups != 0) {
    return Error{"placement: expected the expert count (" + e +
                 ") to be a multiple of the group count (" + std::to_string(c.num_groups) + ")"};
  }
  return Status::Ok();
}

std::vector<int> replicate_counts(const std::vector<double>& weight, int num_slots) {
  std::vector<int> cnt(weight.size(), 1);
  if (weight.empty()) return cnt;
  for (int i = static_cast<int>(weight.size()); i < num_slots; ++i) {
    std::size_t best = 0;
    for (std::size_t e = 1; e < weight.size(); ++e) {
      if (weight[e] / cnt[e] > weight[best] / cnt[best]) best = e;
    }
    ++cnt[best];
  }
  return cnt;
}

void fill_logical_maps(PlacementResult& r) {
  const auto& p = r.placement;
  r.logical_count.assign(uz(p.num_layers()), std::vector<int>(uz(p.num_experts), 0));
  int max_replicas = 1;
  for (int l = 0; l < p.num_layers(); ++l) {
    for (const int e : p.physical_to_logical[uz(l)]) {
      max_replicas = std::max(max_replicas, ++r.logical_count[uz(l)][uz(e)]);
    }
  }
  r.logical_to_physical.assign(
      uz(p.num_layers()),
      std::vector<std::vector<int>>(uz(p.num_experts), std::vector<int>(uz(max_replicas), -1)));
  for (int l = 0; l < p.num_layers(); ++l) {
    std::vector<int> next(uz(p.num_experts), 0);
    const auto& map = p.physical_to_logical[uz(l)];
    for (std::size_t s = 0; s < map.size(); ++s) {
      const auto e = uz(map[s]);
      r.logical_to_physical[uz(l)][e][uz(next[e]++)] = static_cast<int>(s);
    }
  }
}

Result<PlacementResult> place_experts(const ExpertLoad& load, PlacementPolicy policy,
                                      const PlacementConfig& config, const BestOptions& best) {
  MOEPLAN_TRY_STATUS(validate_config(config, load.num_experts, policy));
  if (load.num_layers() == 0)
    return Error{"load '" + load.source + "': expected at least one layer"};
  for (const auto& row : load.counts) {
    if (static_cast<int>(row.size()) != load.num_experts) {
      return Error{"load '" + load.source + "': expected " + std::to_string(load.num_experts) +
                   " experts in every layer"};
    }
  }
  const int num_slots = config.num_slots == 0 ? load.num_experts : config.num_slots;
  if (policy == PlacementPolicy::kBest) {
    if (!best.samples.empty() && static_cast<int>(best.samples.size()) != load.num_layers()) {
      return Error{"best placement: expected samples for " + std::to_string(load.num_layers()) +
                   " layers, got " + std::to_string(best.samples.size())};
    }
    for (const auto& layer : best.samples) {
      for (const auto& row : layer) {
        if (static_cast<int>(row.size()) != load.num_experts) {
          return Error{"best placement: expected samples of " + std::to_string(load.num_experts) +
                       " experts"};
        }
      }
    }
    if (!best.coactivation.pairs.empty() &&
        (best.coactivation.num_experts != load.num_experts ||
         static_cast<int>(best.coactivation.pairs.size()) != load.num_layers())) {
      return Error{"best placement: co-activation does not match the load's layers and experts"};
    }
  }

  const auto start = Clock::now();
  PlacementResult r;
  switch (policy) {
    case PlacementPolicy::kContiguous: {
      r.placement = contiguous_placement(load.num_layers(), load.num_experts, config.num_gpus);
      break;
    }
    case PlacementPolicy::kRoundRobin: {
      // vLLM's round_robin: expert e lives on rank e % ep.
      const int per_rank = load.num_experts / config.num_gpus;
      std::vector<int> row(uz(load.num_experts));
      for (int e = 0; e < load.num_experts; ++e) {
        row[uz((e % config.num_gpus) * per_rank + e / config.num_gpus)] = e;
      }
      r.placement.physical_to_logical.assign(uz(load.num_layers()), row);
      break;
    }
    case PlacementPolicy::kEplb: {
      auto e = run_eplb(load, config, num_slots);
      if (!e) return e.error();
      r = std::move(*e);
      break;
    }
    case PlacementPolicy::kBest: {
      auto e = run_eplb(load, config, num_slots);
      if (!e) return e.error();
      r.placement.physical_to_logical = std::move(e->placement.physical_to_logical);
      // Each layer is searched on its own (its counts, samples and EPLB map): the layers are
      // shared among the cores, each taking the next one left, and every layer's result is the
      // one a single thread gives. With fewer than two layers per core one thread does it all:
      // starting the others costs more than they share (a 3-layer load: 0.24 → 0.6–0.9 ms).
      // (Asking for the cores reads a file: not done where two cores could not share it.)
      const int layers = load.num_layers();
      const int cores =
          layers >= 4 ? std::max(1, static_cast<int>(std::thread::hardware_concurrency())) : 1;
      const int workers = layers >= 2 * cores ? cores : 1;
      std::atomic<int> next{0};
      std::exception_ptr failure;
      std::mutex failure_mutex;
      const auto work = [&] {
        try {
          for (int l = next++; l < layers; l = next++) {
            auto& map = r.placement.physical_to_logical[uz(l)];
            map = best_layer_map(load.counts[uz(l)], map, config, num_slots, best, l);
          }
        } catch (...) {
          const std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
          next = layers;  // the others stop at their next layer
        }
      };
      std::vector<std::thread> threads;
      for (int t = 1; t < workers; ++t) threads.emplace_back(work);
      work();
      for (auto& t : threads) t.join();
      if (failure) std::rethrow_exception(failure);
      break;
    }
  }
  r.placement.policy = policy_name(policy);
  r.placement.num_experts = load.num_experts;
  r.placement.ep_size = config.num_gpus;
  r.placement.num_slots = num_slots;
  if (policy != PlacementPolicy::kEplb) fill_logical_maps(r);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  MOEPLAN_TRY_STATUS(r.placement.validate());
  return r;
}

}  // namespace moeplan::planner
