// Cluster topology: both JSON forms, validation errors, and routing with hand-computed answers.
#include <gtest/gtest.h>

#include <algorithm>

#include "planner/costs/roofline_costs.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::planner {
namespace test_cluster {
namespace {

nlohmann::json hgx(int nodes, const std::string& network, double oversubscription = 1.0) {
  auto j = nlohmann::json::parse(R"({"name": "t", "device": "h200", "gpus_per_node": 8,
    "intra_node": {"kind": "nvswitch", "bandwidth_gb_per_s": 450, "latency_us": 2.0},
    "inter_node": {"nics_per_node": 8, "nic_bandwidth_gb_per_s": 50, "latency_us": 5.0}})");
  j["nodes"] = nodes;
  j["inter_node"]["network"] = network;
  j["inter_node"]["oversubscription"] = oversubscription;
  return j;
}

Cluster parse_ok(const nlohmann::json& j) {
  auto c = parse_cluster(j, "test.json");
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return std::move(c).value();
}

std::vector<int> iota(int first, int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = first + i;
  return v;
}

// Relative tolerance: the answers are a few float operations from exact, so 1e-12 suffices.
void expect_close(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::abs(expected)) << actual << " vs " << expected;
}

// Resource limits (docs/RELIABILITY.md): 100,000 GPUs would need ~80 GiB of routing tables;
// refused before any is built.
TEST(Cluster, HundredThousandGpusAreRefusedNamingTheLimit) {
  auto j = hgx(4096, "fat_tree");
  j["gpus_per_node"] = 25;
  j["inter_node"]["nics_per_node"] = 5;
  auto c = parse_cluster(j, "big.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message,
            "big.json: key 'nodes': expected nodes × gpus_per_node ≤ 8192 GPUs (moeplan's "
            "cluster limit), got 4096 × 25 = 102400");
  // The explicit form: a star of 8193 GPUs around one switch.
  nlohmann::json e = {{"name", "star"}, {"device", "h100"}};
  e["vertices"] = nlohmann::json::array({{{"name", "s"}, {"kind", "switch"}}});
  e["edges"] = nlohmann::json::array();
  for (int i = 0; i <= kMaxClusterGpus; ++i) {
    const std::string n = "g" + std::to_string(i);
    e["vertices"].push_back({{"name", n}, {"kind", "gpu"}});
    e["edges"].push_back(
        {{"from", n}, {"to", "s"}, {"bandwidth_gb_per_s", 100}, {"latency_us", 1}});
  }
  c = parse_cluster(e, "star.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message,
            "star.json: 8193 GPUs, expected at most 8192 (moeplan's cluster limit)");
}

// A few GPUs joined through a million switch vertices: few GPUs, but GPUs × vertices routing
// entries past 2^28.
TEST(Cluster, RoutingTablesPastTheLimitAreRefused) {
  nlohmann::json e = {{"name", "chain"}, {"device", "h100"}};
  e["vertices"] = nlohmann::json::array();
  e["edges"] = nlohmann::json::array();
  const int switches = 140000;
  for (int g = 0; g < 2000; ++g) {
    e["vertices"].push_back({{"name", "g" + std::to_string(g)}, {"kind", "gpu"}});
  }
  for (int s = 0; s < switches; ++s) {
    e["vertices"].push_back({{"name", "s" + std::to_string(s)}, {"kind", "switch"}});
  }
  auto c = parse_cluster(e, "wide.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message,
            "wide.json: 2000 GPUs × 142000 vertices, expected at most 268435456 routing-table "
            "entries (moeplan's cluster limit, 1 GiB)");
}

TEST(Cluster, CompactExpandsToGpusNvswitchNicsAndRails) {
  const Cluster c = parse_ok(hgx(2, "rail_optimized"));
  EXPECT_EQ(c.num_gpus(), 16);
  // 16 GPUs + 2 NVSwitches + 16 NICs + 8 rail switches.
  EXPECT_EQ(boost::num_vertices(c.graph()), 42U);
  // Cables (two edges each): 16 GPU-NVSwitch, 16 GPU-NIC, 16 NIC-rail.
  EXPECT_EQ(c.num_links(), 96);
  EXPECT_EQ(c.info().form, "compact/rail_optimized");
  EXPECT_EQ(c.device().name, "h200");
}

TEST(Cluster, UniformAllToAllInOneNvswitchNode) {
  const Cluster c = parse_ok(hgx(1, "rail_optimized"));
  // Each rank sends S/8 to every rank: its NVLink uplink carries 7/8 S, one step of 2 µs.
  const double S = 64.0 * (1 << 20);
  CollectiveQuery q{CollectiveOp::kAllToAll, {iota(0, 8)}, S, {}, DType::kBf16};
  LinkLoad load;
  const double t = collective_seconds(c, q, &load);
  expect_close(t, 7.0 / 8.0 * S / 450e9 + 2e-6);
  expect_close(load.bytes[static_cast<std::size_t>(load.busiest_edge)], 7.0 / 8.0 * S);
  expect_close(load.max_path_latency, 2e-6);
  const RooflineCosts roofline(c);
  const auto est = roofline.collective(q);
  ASSERT_TRUE(est.ok());
  expect_close(est->seconds, t);
  EXPECT_EQ(est->source, "roofline");
}

TEST(Cluster, UniformAllToAllAcrossTwoRailOptimizedNodes) {
  const Cluster c = parse_ok(hgx(2, "rail_optimized"));
  // 16 ranks, B bytes per ordered pair. Cross-rail traffic first crosses NVLink to the GPU on
  // the destination's rail (PXN), so NIC j of node 0 carries the 8 flows from node 0 to GPU j
  // of node 1: 8B at 50 GB/s. An NVLink uplink carries 7B within the node plus 7B relayed:
  // 14B at 450 GB/s. The slowest path: 2 µs NVLink + 5 µs network.
  const double B = 1 << 20;
  CollectiveQuery q{CollectiveOp::kAllToAll, {iota(0, 16)}, 16.0 * B, {}, DType::kBf16};
  LinkLoad load;
  const double t = collective_seconds(c, q, &load);
  expect_close(t, 8.0 * B / 50e9 + 7e-6);
  expect_close(load.bytes[static_cast<std::size_t>(load.busiest_edge)], 8.0 * B);
  const std::string busiest = c.link_name(load.busiest_edge);
  EXPECT_TRUE(busiest.find("nic") != std::string::npos) << busiest;
  const auto uplink = c.path(0, 1).front();  // gpu0 -> nvswitch0
  EXPECT_EQ(c.link_name(uplink), "gpu0 -> nvswitch0");
  expect_close(load.bytes[static_cast<std::size_t>(uplink)], 14.0 * B);
  expect_close(c.path_latency(0, 9), 7e-6);  // gpu0 -> gpu1 of node 1, relayed
  expect_close(c.path_latency(0, 8), 5e-6);  // same rail
  EXPECT_EQ(c.path(0, 8).size(), 4U);
  EXPECT_EQ(c.path(0, 9).size(), 6U);
}

TEST(Cluster, FatTreeOversubscribedUplinkIsTheBottleneck) {
  const Cluster c = parse_ok(hgx(2, "fat_tree", 2.0));
  // 64 cross-node flows of B per direction share leaf0 -> core: 8 × 50 / 2 = 200 GB/s.
  const double B = 1 << 20;
  CollectiveQuery q{CollectiveOp::kAllToAll, {iota(0, 16)}, 16.0 * B, {}, DType::kBf16};
  LinkLoad load;
  const double t = collective_seconds(c, q, &load);
  EXPECT_EQ(c.link_name(load.busiest_edge), "leaf0 -> core");
  expect_close(load.bytes[static_cast<std::size_t>(load.busiest_edge)], 64.0 * B);
  expect_close(t, 64.0 * B / 200e9 + 5e-6);
}

TEST(Cluster, RingAllReduceInOneNode) {
  const Cluster c = parse_ok(hgx(1, "rail_optimized"));
  // Ring: each rank sends 2(p-1)/p·S to the next; 2(p-1) steps of 2 µs.
  const double S = 256.0 * (1 << 20);
  CollectiveQuery q{CollectiveOp::kAllReduce, {iota(0, 8)}, S, {}, DType::kBf16};
  expect_close(collective_seconds(c, q), 2.0 * 7.0 / 8.0 * S / 450e9 + 14.0 * 2e-6);
  // Two concurrent rings of 4 use disjoint uplinks: same time as one ring of 4.
  CollectiveQuery two{CollectiveOp::kAllReduce, {iota(0, 4), iota(4, 4)}, S, {}, DType::kBf16};
  expect_close(collective_seconds(c, two), 2.0 * 3.0 / 4.0 * S / 450e9 + 6.0 * 2e-6);
}

TEST(Cluster, SmallAllReduceRunsAsATree) {
  const Cluster c = parse_ok(hgx(2, "rail_optimized"));
  // 64 bytes over 16 GPUs: a ring pays 2·15 steps, a binary tree 2·4 (depth of 16 nodes). Both
  // include a cross-node hop whose slowest path is 7 µs (relayed over NVLink). Tree edge
  // loads: a parent sends S to each of 2 children and receives S from each, plus S to and from
  // its own parent: 3S on the busiest link at worst, tiny next to the latency.
  const double S = 64.0;
  CollectiveQuery q{CollectiveOp::kAllReduce, {iota(0, 16)}, S, {}, DType::kBf16};
  int ring_steps = 0, tree_steps = 0;
  collective_flows(q, &ring_steps, AllReduceAlgo::kRing);
  collective_flows(q, &tree_steps, AllReduceAlgo::kTree);
  EXPECT_EQ(ring_steps, 30);
  EXPECT_EQ(tree_steps, 8);
  const double t = collective_seconds(c, q);
  EXPECT_GE(t, 8 * 7e-6);
  EXPECT_LE(t, 8 * 7e-6 + 3.0 * S / 50e9);
  const RooflineCosts rc(c);
  const auto est = rc.collective(q);
  ASSERT_TRUE(est.ok());
  expect_close(est->seconds, t);
}

TEST(Cluster, ExplicitFormRoutesOverTheGivenLinks) {
  const auto j = nlohmann::json::parse(R"({"name": "chain", "device": "h100",
    "vertices": [{"name": "a", "kind": "gpu"}, {"name": "s", "kind": "switch"},
                 {"name": "b", "kind": "gpu"}],
    "edges": [{"from": "a", "to": "s", "bandwidth_gb_per_s": 100, "latency_us": 1},
              {"from": "s", "to": "b", "bandwidth_gb_per_s": 25, "latency_us": 3}]})");
  const Cluster c = parse_ok(j);
  EXPECT_EQ(c.num_gpus(), 2);
  EXPECT_EQ(c.info().form, "explicit");
  const auto load = c.route({{0, 1, 1e9}, {1, 0, 5e8}});
  EXPECT_EQ(c.link_name(load.busiest_edge), "s -> b");
  expect_close(load.busiest_seconds, 1e9 / 25e9);
  expect_close(load.max_path_latency, 4e-6);
}

TEST(Cluster, DisconnectedTopologyIsRejected) {
  const auto j = nlohmann::json::parse(R"({"device": "h200",
    "vertices": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"},
                 {"name": "c", "kind": "gpu"}],
    "edges": [{"from": "a", "to": "b", "bandwidth_gb_per_s": 100, "latency_us": 1}]})");
  const auto c = parse_cluster(j, "island.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message, "island.json: the topology is disconnected: a cannot reach c");
}

TEST(Cluster, ZeroBandwidthIsRejected) {
  auto j = hgx(2, "rail_optimized");
  j["intra_node"]["bandwidth_gb_per_s"] = 0;
  const auto c = parse_cluster(j, "zero.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message.rfind("zero.json: key 'intra_node.bandwidth_gb_per_s': expected a "
                                    "bandwidth > 0 GB/s, got 0",
                                    0),
            0U)
      << c.error().message;
  const auto e = nlohmann::json::parse(R"({"device": "h200",
    "vertices": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"}],
    "edges": [{"from": "a", "to": "b", "bandwidth_gb_per_s": 0, "latency_us": 1}]})");
  const auto c2 = parse_cluster(e, "zero2.json");
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.error().message.find("key 'edges[0].bandwidth_gb_per_s'"), std::string::npos);
}

TEST(Cluster, EveryKeyIsValidated) {
  struct Case {
    nlohmann::json patch;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{{"nodes", 0}}, "key 'nodes': expected an integer in [1, 4096], got 0"},
      {{{"device", "tpu"}}, "key 'device': unknown device 'tpu'"},
      {{{"nvlink_domain_gpus", 12}}, "key 'nvlink_domain_gpus': expected a multiple of"},
      {{{"intra_node", {{"kind", "pcie"}}}}, "key 'intra_node.kind': expected \"nvswitch\""},
      {{{"intra_node", {{"latency_us", "fast"}}}}, "key 'intra_node.latency_us': expected"},
      {{{"inter_node", {{"network", "torus"}}}}, "key 'inter_node.network': expected"},
      {{{"inter_node", {{"nics_per_node", 3}}}},
       "key 'inter_node.nics_per_node': expected a "
       "divisor of gpus_per_node=8, got 3"},
      {{{"inter_node", {{"oversubscription", 0.5}}}}, "key 'inter_node.oversubscription'"},
      {{{"inter_node", nullptr}}, "key 'inter_node': expected an object"},
  };
  for (const auto& k : cases) {
    auto j = hgx(2, "rail_optimized");
    j.merge_patch(k.patch);
    const auto c = parse_cluster(j, "bad.json");
    ASSERT_FALSE(c.ok()) << k.patch.dump();
    EXPECT_EQ(c.error().message.rfind("bad.json: ", 0), 0U) << c.error().message;
    EXPECT_NE(c.error().message.find(k.expected), std::string::npos) << c.error().message;
    EXPECT_EQ(c.error().message.find('\n'), std::string::npos);
  }
}

TEST(Cluster, ExplicitFormKeysAreValidated) {
  const auto base = nlohmann::json::parse(R"({"device": "h200",
    "vertices": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"}],
    "edges": [{"from": "a", "to": "b", "bandwidth_gb_per_s": 100, "latency_us": 1}]})");
  struct Case {
    std::string pointer;
    nlohmann::json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/vertices/1/kind", "tpu", "key 'vertices[1].kind': expected \"gpu\", \"nvswitch\""},
      {"/vertices/1/name", "a", "key 'vertices[1].name': expected a unique vertex name"},
      {"/edges/0/to", "c", "key 'edges[0].to': expected the name of a vertex, got \"c\""},
      {"/edges/0/to", "a", "key 'edges[0].to': expected a vertex other than 'from'"},
      {"/edges/0/latency_us", -1, "key 'edges[0].latency_us': expected"},
      {"/edges/0", 3, "key 'edges[0]': expected an object"},
      {"/vertices", nlohmann::json::array(), "key 'vertices': expected a non-empty array"},
  };
  for (const auto& k : cases) {
    auto j = base;
    j[nlohmann::json::json_pointer(k.pointer)] = k.value;
    const auto c = parse_cluster(j, "x.json");
    ASSERT_FALSE(c.ok()) << k.pointer;
    EXPECT_EQ(c.error().message.rfind("x.json: ", 0), 0U) << c.error().message;
    EXPECT_NE(c.error().message.find(k.expected), std::string::npos) << c.error().message;
  }
  auto no_gpu = base;
  no_gpu["vertices"] = nlohmann::json::parse(R"([{"name": "a", "kind": "switch"},
                                                 {"name": "b", "kind": "switch"}])");
  const auto c = parse_cluster(no_gpu, "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message, "x.json: the topology has no GPU");
}

TEST(Cluster, BundledClusters) {
  const std::vector<std::pair<std::string, int>> expected = {
      {"128x-hgx-h200", 1024}, {"16x-hgx-h200", 128}, {"1x-hgx-h200", 8},
      {"2x-hgx-h200", 16},     {"4x-hgx-h100", 32},   {"gb200-nvl72", 72}};
  const auto names = bundled_cluster_names();
  ASSERT_EQ(names.size(), expected.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(names[i], expected[i].first);
    const auto c = load_cluster(names[i]);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->num_gpus(), expected[i].second) << names[i];
    EXPECT_EQ(c->name(), names[i]);
  }
  const auto nvl = load_cluster("gb200-nvl72");
  ASSERT_TRUE(nvl.ok());
  // One NVLink domain: GPU 0 reaches GPU 71 in two NVLink hops.
  EXPECT_EQ(nvl->path(0, 71).size(), 2U);
  EXPECT_EQ(nvl->device().name, "b200");
  const auto unknown = load_cluster("no-such-cluster");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message.rfind("unknown cluster 'no-such-cluster': expected one of "
                                          "128x-hgx-h200, ",
                                          0),
            0U);
}

}  // namespace
}  // namespace test_cluster
}  // namespace moeplan::planner
