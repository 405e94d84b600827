// local:N and local:KxM: parsing, the K-node topology (shared memory within a node, a network
// between nodes), and the cost set-up from profiles made on one node or several (which device,
// which collectives crossed nodes, what the plan says about it).
#include <gtest/gtest.h>

#include <filesystem>

#include "planner/costs/cost_setup.hpp"
#include "planner/topology/local_cluster.hpp"

namespace moeplan::planner {
namespace test_local_cluster {
namespace {

namespace fs = std::filesystem;

TEST(LocalShape, ParsesNAndKxM) {
  const auto n = parse_local_cluster("local:4");
  ASSERT_TRUE(n.has_value() && n->ok());
  EXPECT_EQ((*n)->nodes, 1);
  EXPECT_EQ((*n)->ranks_per_node, 4);
  EXPECT_FALSE((*n)->nodes_given);
  const auto kxm = parse_local_cluster("local:2x8");
  ASSERT_TRUE(kxm.has_value() && kxm->ok());
  EXPECT_EQ((*kxm)->nodes, 2);
  EXPECT_EQ((*kxm)->ranks_per_node, 8);
  EXPECT_TRUE((*kxm)->nodes_given);
  EXPECT_EQ((*kxm)->num_ranks(), 16);
  for (const char* bad : {"local:2x", "local:x8", "local:0x2", "local:2x0", "local:2x2x2",
                          "local:65x65", "local:2X2", "local:a"}) {
    const auto r = parse_local_cluster(bad);
    ASSERT_TRUE(r.has_value()) << bad;
    ASSERT_FALSE(r->ok()) << bad;
    EXPECT_NE(r->error().message.find("local:KxM for K nodes of M ranks"), std::string::npos);
  }
}

DeviceSpec spec() {
  DeviceSpec d;
  d.name = "cpu:test/ranks=4/nodes=2";
  d.peak_bf16_flops = d.peak_fp32_flops = d.peak_fp8_flops = 1e11;
  d.hbm_bandwidth = 1e10;
  d.hbm_bytes = 1e12;
  d.nvlink_bandwidth = 8e9;
  d.nic_bandwidth = 1e9;
  return d;
}

TEST(LocalShape, NodesJoinedByANetwork) {
  auto c = local_cluster(LocalShape{2, 2, true}, spec(), 2e-6, 2e-5);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->name(), "local:2x2");
  EXPECT_EQ(c->num_gpus(), 4);
  EXPECT_EQ(c->info().num_nodes, 2);
  EXPECT_EQ(c->info().gpus_per_node, 2);
  // Within a node: the node's shared memory; between nodes: the network.
  ASSERT_EQ(c->path(0, 1).size(), 2U);
  EXPECT_EQ(c->link_name(c->path(0, 1)[0]), "gpu0 -> shared_memory0");
  EXPECT_DOUBLE_EQ(c->link(c->path(0, 1)[0]).bandwidth, 8e9);
  EXPECT_NEAR(c->path_latency(0, 1), 2e-6, 1e-15);
  EXPECT_EQ(c->link_name(c->path(2, 3)[0]), "gpu2 -> shared_memory1");
  ASSERT_EQ(c->path(1, 2).size(), 2U);
  EXPECT_EQ(c->link_name(c->path(1, 2)[0]), "gpu1 -> network");
  EXPECT_DOUBLE_EQ(c->link(c->path(1, 2)[0]).bandwidth, 1e9);
  EXPECT_NEAR(c->path_latency(1, 2), 2e-5, 1e-15);
  // One node is the plain local cluster (named as asked).
  auto one = local_cluster(LocalShape{1, 3, true}, spec(), 2e-6, 0.0);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->name(), "local:1x3");
  EXPECT_EQ(one->info().num_nodes, 1);
  // Several nodes need a bandwidth between them.
  DeviceSpec no_nic = spec();
  no_nic.nic_bandwidth = 0.0;
  auto bad = local_cluster(LocalShape{2, 1, true}, no_nic, 2e-6, 2e-5);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("between nodes"), std::string::npos);
}

class LocalCostSetup : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() /
             ("moeplan_local_" +
              std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".db"))
                .string();
    remove_all();
  }
  void TearDown() override { remove_all(); }
  void remove_all() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }
  /// A run of `device` with `ranks` and a GEMM, and an all-reduce per group size in `busbw`.
  void add_profile(const std::string& device, const std::vector<RunRank>& ranks,
                   const std::vector<std::pair<int, double>>& busbw) {
    auto db = CostDb::open(path_, true);
    ASSERT_TRUE(db.ok()) << db.error().message;
    RunInfo run;
    run.started_at = "2026-12-03T00:00:00Z";
    run.device = device;
    run.backend = "cpu";
    run.world_size = static_cast<int>(ranks.size());
    run.nodes = ranks.empty() ? 0 : count_domains(ranks);
    run.ranks = ranks;
    if (ranks.empty()) run.world_size = 2;
    auto id = (*db)->add_run(run);
    ASSERT_TRUE(id.ok());
    CostPoint g;
    g.run_id = *id;
    g.device = device;
    g.backend = "cpu";
    g.op = "gemm";
    g.dtype = "bf16";
    g.shape = "m=64,n=64,k=64";
    g.m = g.n = g.k = 64;
    g.flops = 2.0 * 64 * 64 * 64;
    g.median_s = g.p10_s = g.p90_s = 1e-5;
    g.repetitions = 5;
    g.measured_at = run.started_at;
    ASSERT_TRUE((*db)->add_point(g).ok());
    for (const auto& [group, bw] : busbw) {
      CostPoint c = g;
      c.op = "all_reduce";
      c.shape = "S=65536,groups=" + std::to_string(run.world_size / group);
      c.group_size = group;
      c.m = c.bytes = 65536;
      c.n = run.world_size / group;
      c.k = 0;
      c.flops = 0;
      c.median_s = c.p10_s = c.p90_s = 65536 / bw;
      c.bus_bandwidth = bw;
      ASSERT_TRUE((*db)->add_point(c).ok());
    }
  }
  std::string path_;
};

TEST_F(LocalCostSetup, ATwoNodeProfileSaysItsCollectivesCrossedNodes) {
  add_profile("cpu:test/ranks=2/nodes=2", {{0, "vm", "nodeA", 0}, {1, "vm", "nodeB", 1}},
              {{2, 1e9}});
  // local:2 (one node asked) takes it, as the only profile of 2 ranks, and says what it is.
  auto s = make_cost_setup("local:2", path_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->cluster->name(), "local:2");
  EXPECT_EQ(s->profile_note,
            "profile cpu:test/ranks=2/nodes=2: 2 ranks on 2 nodes (nodeA: 0; nodeB: 1); "
            "collectives of 2 ranks across nodes; local:2x1 plans that shape");
  // local:2x1: two nodes joined by the network, at the measured bandwidth.
  auto k = make_cost_setup("local:2x1", path_);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->cluster->name(), "local:2x1");
  EXPECT_EQ(k->cluster->info().num_nodes, 2);
  EXPECT_EQ(k->cluster->link_name(k->cluster->path(0, 1)[0]), "gpu0 -> network");
  EXPECT_DOUBLE_EQ(k->cluster->device().nic_bandwidth, 1e9);
  EXPECT_EQ(k->profile_note,
            "profile cpu:test/ranks=2/nodes=2: 2 ranks on 2 nodes (nodeA: 0; nodeB: 1); "
            "collectives of 2 ranks across nodes");
}

TEST_F(LocalCostSetup, TwoNodesOfTwoRanksTellIntraFromInterNodeCollectives) {
  add_profile(
      "cpu:test/ranks=4/nodes=2",
      {{0, "vm", "nodeA", 0}, {1, "vm", "nodeA", 0}, {2, "vm", "nodeB", 2}, {3, "vm", "nodeB", 2}},
      {{2, 6e9}, {4, 5e8}});
  auto s = make_cost_setup("local:2x2", path_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->profile_note,
            "profile cpu:test/ranks=4/nodes=2: 4 ranks on 2 nodes (nodeA: 0-1; nodeB: 2-3); "
            "collectives of 2 ranks within a node, collectives of 4 ranks across nodes");
  const Cluster& c = *s->cluster;
  EXPECT_DOUBLE_EQ(c.device().nvlink_bandwidth, 6e9);  // from the groups within a node
  EXPECT_DOUBLE_EQ(c.device().nic_bandwidth, 5e8);     // from the groups across nodes
  EXPECT_DOUBLE_EQ(c.link(c.path(0, 1)[0]).bandwidth, 6e9);
  EXPECT_DOUBLE_EQ(c.link(c.path(0, 2)[0]).bandwidth, 5e8);
  // A shape the database has no profile of names what it has.
  add_profile("cpu:test/ranks=1", {{0, "vm", "vm", 0}}, {});
  auto missing = make_cost_setup("local:4x1", path_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no profile of 4 ranks on 4 nodes"), std::string::npos)
      << missing.error().message;
  EXPECT_NE(missing.error().message.find("'/ranks=4/nodes=4'"), std::string::npos);
}

TEST_F(LocalCostSetup, AOneNodeProfileIsPreferredForLocalN) {
  add_profile("cpu:test/ranks=2/nodes=2", {{0, "vm", "nodeA", 0}, {1, "vm", "nodeB", 1}},
              {{2, 1e9}});
  add_profile("cpu:test/ranks=2", {{0, "vm", "vm", 0}, {1, "vm", "vm", 0}}, {{2, 4e9}});
  auto s = make_cost_setup("local:2", path_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->cluster->device().name, "cpu:test/ranks=2");
  EXPECT_EQ(s->profile_note,
            "profile cpu:test/ranks=2: 2 ranks on one node (vm: 0-1); every collective within "
            "the node (shared memory)");
  auto k = make_cost_setup("local:2x1", path_);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->cluster->device().name, "cpu:test/ranks=2/nodes=2");
}

TEST_F(LocalCostSetup, AProfileThatDidNotRecordItsRanksIsTakenAsOneNode) {
  add_profile("cpu:test/ranks=2", {}, {{2, 4e9}});
  auto s = make_cost_setup("local:2", path_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->profile_note,
            "profile cpu:test/ranks=2: where its ranks ran was not recorded (made before "
            "cost-database schema 3); taken as one node");
  // No collective crossed nodes: two nodes cannot be planned from it.
  auto k = make_cost_setup("local:2x1", path_);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.error().message.find("between nodes"), std::string::npos) << k.error().message;
}

}  // namespace
}  // namespace test_local_cluster
}  // namespace moeplan::planner
