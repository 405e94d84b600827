// The case lists verify and validate (and the GUI's Profiling view) take, the verify request
// built from them, and the in-process JobWorld every collective command runs on.
#include <gtest/gtest.h>

#include <atomic>

#include "kernels/case_lists.hpp"
#include "kernels/job_world.hpp"
#include "kernels/verify.hpp"
#include "models/registry.hpp"

namespace moeplan::kernels {
namespace test_case_lists {
namespace {

LayerSpec qwen15_spec() {
  const auto m = models::load_model("qwen1.5-moe-a2.7b").value();
  return LayerSpec::from_model(m, 32, DType::kFp32, 1).value();
}

TEST(CaseLists, LayoutsAllAndNamed) {
  const LayerSpec spec = qwen15_spec();  // 60 experts
  auto all = parse_layout_list("all", spec, 4, false, "m");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3U);  // 4x1, 2x2, 1x4 (ep descending)
  EXPECT_EQ(all->front().short_name(), "4x1");
  auto both = parse_layout_list("all", spec, 4, true, "m");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->size(), 4U);  // 2x2 in both mappings
  auto named = parse_layout_list("2x2,4x1", spec, 4, false, "m");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->front().short_name(), "2x2");
  // 60 % 8 != 0, and a shape that is not the rank count.
  auto bad = parse_layout_list("8x1", spec, 8, false, "m");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "layout 8x1: num_experts=60 % ep=8 != 0; expected ep to divide the expert count");
  EXPECT_EQ(parse_layout_list("2x1", spec, 4, false, "m").error().message.find("ep·tp = 2"),
            std::string("layout 2x1: ").size());
  EXPECT_EQ(parse_layout_list("2y1", spec, 2, false, "m").error().input, "layouts");
  EXPECT_EQ(parse_layout_list("all", spec, 7, false, "qwen").error().message,
            "layouts all: no legal layout of qwen on 7 ranks");
}

TEST(CaseLists, DispatchersTokensDtypes) {
  EXPECT_EQ(parse_dispatcher_list("all")->size(), 5U);  // the DeepEP ones too
  EXPECT_EQ(*parse_dispatcher_list("a2av,allgather"),
            (std::vector<Dispatcher>{Dispatcher::kA2av, Dispatcher::kAllGather}));
  EXPECT_EQ(parse_dispatcher_list("ring").error().input, "dispatcher");
  EXPECT_EQ(*parse_dispatcher_list("a2av,deepep_normal"),
            (std::vector<Dispatcher>{Dispatcher::kA2av, Dispatcher::kDeepEpNormal}));
  EXPECT_EQ(*parse_token_list("64,1024", 1L << 20, 2), (std::vector<int>{64, 1024}));
  EXPECT_EQ(parse_token_list("33", 1L << 20, 2).error().message,
            "tokens: expected positive token counts divisible by the 2 ranks (tokens per rank = "
            "count / ranks), got '33'");
  EXPECT_EQ(parse_token_list("4294967297", 1L << 24, 1).error().message,
            "tokens: expected a comma-separated list of positive integers, got '4294967297'");
  EXPECT_FALSE(parse_token_list("", 100, 1).ok());
  EXPECT_EQ(*parse_storage_dtype_list("fp32,bf16"),
            (std::vector<DType>{DType::kFp32, DType::kBf16}));
  EXPECT_EQ(parse_storage_dtype_list("fp8").error().input, "dtype");
}

TEST(VerifyRequest, BuiltAndCheckedInTheLibrary) {
  VerifyOptions o;
  o.model = "qwen1.5-moe-a2.7b";
  o.scale = 32;
  o.tokens = "64";
  o.dtypes = "fp32";
  auto r = make_verify_request(o, 4);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layouts.size(), 4U);
  // 4 layouts × the 3 dispatchers of any layout, and deepep_ll on 4x1 (tp 1); deepep_normal
  // needs the ranks grouped into nodes, and both DeepEP dispatchers tp 1: listed as not run.
  EXPECT_EQ(case_count(*r), 4 * 3 + 1);
  EXPECT_EQ(r->skipped.size(), 1U + 2U * 2U) << ::testing::PrintToString(r->skipped);
  o.ranks_per_node = 2;
  EXPECT_EQ(case_count(*make_verify_request(o, 4)), 4 * 3 + 2);
  o.backend = "gpu";
  EXPECT_EQ(make_verify_request(o, 4).error().message, "backend: expected cpu or cuda, got 'gpu'");
}

TEST(JobWorld, ThreadsRunTheJobAndAgree) {
  // Outside a launcher: in-process ranks, the job runs once per rank, rank 0's value returned.
  auto world = JobWorld::open({3, 1, 8}, {}, {});
  ASSERT_TRUE(world.ok());
  EXPECT_FALSE(world->launched());
  EXPECT_EQ(world->size(), 3);
  EXPECT_EQ(world->mode(), "in-process threads");
  std::atomic<int> calls{0};
  const int rank0 = world->run<int>([&](Communicator& c) {
    ++calls;
    return 100 + c.rank();
  });
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(rank0, 100);
  std::string reported;
  EXPECT_TRUE(world->agree(Status::Ok(), [&](const Error& e) { reported = e.message; }).ok());
  EXPECT_FALSE(world->agree(Error{"bad"}, [&](const Error& e) { reported = e.message; }).ok());
  EXPECT_EQ(reported, "bad");
  EXPECT_EQ(world->agree_exit_code(2), 2);
  auto too_many = JobWorld::open({9, 1, 8}, {}, {});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().message, "ranks: expected 1 to 8 in-process ranks, got 9");
  auto defaults = JobWorld::open({-1, 4, 8}, {}, {});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->size(), 4);
}

}  // namespace
}  // namespace test_case_lists
}  // namespace moeplan::kernels
