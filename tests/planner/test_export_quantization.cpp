// The weight format in exports: nothing asked of a framework that reads the checkpoint's own
// format, online quantization flags for what-ifs on a plain checkpoint where the framework has
// them, one error (serving) or a warning (training) where it has none.
#include <gtest/gtest.h>

#include <string>

#include "planner/export/quantization.hpp"
#include "planner/export/spec.hpp"
#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_quantization {
namespace {

using export_test::Fixture;

std::string text_of(const ExportResult& r) {
  std::string s;
  for (const auto& f : r.files) s += f.content;
  for (const auto& w : r.warnings) s += "\nwarning: " + w;
  return s;
}

Result<ExportResult> export_as(const Fixture& f, ExportFormat format) {
  return export_layout(export_test::spec_for(f, ""), format, ExportOptions{});
}

Fixture qwen_with_weights(const std::string& weights) {
  Fixture f = export_test::make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  f.plan.weights = weights;  // a plan costed with --weights on the bf16 checkpoint
  return f;
}

TEST(ExportWeights, Fp8BlockWhatIfOnAPlainCheckpoint) {
  const Fixture f = qwen_with_weights("fp8-block");
  const ExportSpec spec = export_test::spec_for(f, "");
  EXPECT_FALSE(exports::weights_from_checkpoint(spec));
  EXPECT_EQ(exports::checkpoint_method(spec), "");
  auto vllm = export_as(f, ExportFormat::kVllm);
  ASSERT_TRUE(vllm.ok()) << vllm.error().message;
  const std::string v = text_of(*vllm);
  EXPECT_NE(v.find("--quantization fp8_per_block"), std::string::npos) << v;
  EXPECT_NE(v.find("# weights: fp8-block (fp8 e4m3, 128×128 blocks, fp32 scales), a what-if on "
                   "the checkpoint's bf16 (torch_dtype)"),
            std::string::npos)
      << v;
  auto meg = export_as(f, ExportFormat::kMegatron);
  ASSERT_TRUE(meg.ok());
  EXPECT_NE(text_of(*meg).find("  --fp8-format e4m3\n  --fp8-recipe blockwise\n"),
            std::string::npos);
  // SGLang's and TensorRT-LLM's online quantization cannot produce 128×128 blocks: one error.
  auto sg = export_as(f, ExportFormat::kSglang);
  ASSERT_FALSE(sg.ok());
  EXPECT_NE(sg.error().message.find("sglang 0.5.23: weights fp8-block: SGLang quantizes a plain "
                                    "checkpoint online only to fp8 with one scale per tensor"),
            std::string::npos)
      << sg.error().message;
  EXPECT_NE(sg.error().message.find("no layout of the plan can be expressed in sglang 0.5.23"),
            std::string::npos);
  auto trt = export_as(f, ExportFormat::kTrtllm);
  ASSERT_FALSE(trt.ok());
  EXPECT_NE(trt.error().message.find("quantize offline with NVIDIA ModelOpt"), std::string::npos);
  // PaddleNLP trains at bf16: exported, with a warning.
  auto pd = export_as(f, ExportFormat::kPaddle);
  ASSERT_TRUE(pd.ok());
  EXPECT_NE(text_of(*pd).find("have no fp8 or 4-bit option"), std::string::npos);
}

TEST(ExportWeights, Fp8TensorAndChannelWhatIfs) {
  const Fixture t = qwen_with_weights("fp8-tensor");
  auto sg = export_as(t, ExportFormat::kSglang);
  ASSERT_TRUE(sg.ok()) << sg.error().message;
  EXPECT_NE(text_of(*sg).find("--quantization fp8 \\"), std::string::npos) << text_of(*sg);
  auto vl = export_as(t, ExportFormat::kVllm);
  ASSERT_TRUE(vl.ok());
  EXPECT_NE(text_of(*vl).find("--quantization fp8_per_tensor"), std::string::npos);
  auto meg = export_as(t, ExportFormat::kMegatron);
  ASSERT_TRUE(meg.ok());
  EXPECT_NE(text_of(*meg).find("--fp8-recipe tensorwise"), std::string::npos);

  const Fixture c = qwen_with_weights("fp8-channel");
  auto vc = export_as(c, ExportFormat::kVllm);
  ASSERT_TRUE(vc.ok());
  EXPECT_NE(text_of(*vc).find("--quantization fp8_per_channel"), std::string::npos);
  EXPECT_FALSE(export_as(c, ExportFormat::kSglang).ok());
  auto mc = export_as(c, ExportFormat::kMegatron);
  ASSERT_TRUE(mc.ok());
  EXPECT_EQ(text_of(*mc).find("  --fp8-format"), std::string::npos);
  EXPECT_NE(text_of(*mc).find("has no training recipe for fp8-channel"), std::string::npos);
}

TEST(ExportWeights, FourBitWhatIfsAreRefusedOrWarned) {
  for (const char* w : {"mxfp4", "w4a16", "nvfp4"}) {
    const Fixture f = qwen_with_weights(w);
    auto vl = export_as(f, ExportFormat::kVllm);
    ASSERT_FALSE(vl.ok()) << w;
    EXPECT_NE(vl.error().message.find("but not to " + std::string(w)), std::string::npos)
        << vl.error().message;
    EXPECT_FALSE(export_as(f, ExportFormat::kSglang).ok()) << w;
  }
  // NVFP4 training is a Blackwell recipe: on H200 the export says so and leaves it out.
  auto meg = export_as(qwen_with_weights("nvfp4"), ExportFormat::kMegatron);
  ASSERT_TRUE(meg.ok());
  EXPECT_EQ(text_of(*meg).find("--fp4-format"), std::string::npos);
  EXPECT_NE(text_of(*meg).find("runs on Blackwell GPUs, not h200"), std::string::npos)
      << text_of(*meg);
}

TEST(ExportWeights, TheCheckpointsOwnFormatNeedsNoFlag) {
  const Fixture f = export_test::make("deepseek-v3", "16x-hgx-h200", 128);
  const ExportSpec spec = export_test::spec_for(f, "");
  EXPECT_TRUE(exports::weights_from_checkpoint(spec));
  EXPECT_EQ(exports::checkpoint_method(spec), "fp8");
  for (const ExportFormat fmt :
       {ExportFormat::kSglang, ExportFormat::kVllm, ExportFormat::kTrtllm}) {
    auto r = export_as(f, fmt);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const std::string s = text_of(*r);
    EXPECT_EQ(s.find("--quantization"), std::string::npos) << s;
    EXPECT_EQ(s.find("quant_config"), std::string::npos) << s;
    EXPECT_NE(s.find("# weights: fp8-block (fp8 e4m3, 128×128 blocks, fp32 scales), the "
                     "checkpoint's fp8-block (quantization_config (fp8))"),
              std::string::npos)
        << s;
  }
  // A bf16 plan of the fp8 checkpoint: the serving frameworks would load fp8.
  Fixture bf = f;
  bf.plan.weights = "bf16";
  for (const ExportFormat fmt :
       {ExportFormat::kSglang, ExportFormat::kVllm, ExportFormat::kTrtllm}) {
    auto r = export_as(bf, fmt);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("the checkpoint's fp8-block (quantization_config (fp8))"),
              std::string::npos)
        << r.error().message;
  }
  auto meg = export_as(bf, ExportFormat::kMegatron);  // trains from bf16 masters either way
  ASSERT_TRUE(meg.ok());
  EXPECT_EQ(text_of(*meg).find("  --fp8-format"), std::string::npos);
}

TEST(ExportWeights, FbgemmFp8Checkpoints) {
  Fixture f = export_test::make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  auto fmt = parse_weight_format("fp8-channel", DType::kBf16);
  ASSERT_TRUE(fmt.ok());
  fmt->source = "quantization_config (fbgemm_fp8)";
  f.model = models::with_weight_format(f.model, *fmt);
  f.model.checkpoint_weights = *fmt;
  f.plan.weights = "";
  // vLLM deprecates fbgemm_fp8 and refuses it without the flag; SGLang has no such method.
  auto vl = export_as(f, ExportFormat::kVllm);
  ASSERT_TRUE(vl.ok()) << vl.error().message;
  EXPECT_NE(text_of(*vl).find("--allow-deprecated-quantization"), std::string::npos);
  auto sg = export_as(f, ExportFormat::kSglang);
  ASSERT_FALSE(sg.ok());
  EXPECT_NE(sg.error().message.find("has no fbgemm_fp8 quantization method"), std::string::npos);
}

TEST(ExportWeights, AnUnknownFormatInThePlanIsNamed) {
  Fixture f = qwen_with_weights("fp7");
  auto chosen = select_layout(f.plan, "");
  ASSERT_TRUE(chosen.ok());
  auto spec = make_export_spec(f.plan, *chosen, f.model, f.cluster, nullptr, "");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("key 'model.weights.name'"), std::string::npos)
      << spec.error().message;
}

}  // namespace
}  // namespace test_export_quantization
}  // namespace moeplan::planner
