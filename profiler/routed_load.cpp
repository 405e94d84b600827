// Routed synthetic loads through the model's router.
#include "profiler/routed_load.hpp"

#include <Eigen/Core>
#include <cmath>

#include "kernels/backend.hpp"
#include "kernels/layer_spec.hpp"

namespace moeplan::profiler {

namespace {

Result<std::int64_t> key_integer(const planner::SyntheticSpec& s, const std::string& spec,
                                 const std::string& key, std::int64_t fallback, std::int64_t lo,
                                 std::int64_t hi) {
  const auto it = s.keys.find(key);
  if (it == s.keys.end()) return fallback;
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != it->second.size() || v < lo || v > hi) {
    return Error{"synthetic load '" + spec + "': key '" + key + "': expected an integer in [" +
                 std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + it->second + "'"};
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace

bool is_routed_spec(const std::string& spec) {
  return spec == "routed" || spec.rfind("routed:", 0) == 0;
}

Result<planner::LoadData> routed_load(const std::string& spec, const models::MoeModel& model) {
  auto parsed = planner::parse_synthetic_spec(spec);
  if (!parsed) return parsed.error();
  if (parsed->kind != "routed") {
    return Error{"synthetic load '" + spec + "': expected kind 'routed', got '" + parsed->kind +
                 "'"};
  }
  for (const auto& [k, v] : parsed->keys) {
    if (k != "tokens" && k != "seed" && k != "layers") {
      return Error{"synthetic load '" + spec + "': unknown key '" + k +
                   "' for routed, expected one of tokens, seed, layers"};
    }
  }
  auto tokens = key_integer(*parsed, spec, "tokens", 1024, 1, 1 << 20);
  if (!tokens) return tokens.error();
  auto seed = key_integer(*parsed, spec, "seed", 0, 0, std::int64_t{1} << 53);
  if (!seed) return seed.error();
  auto layers = key_integer(*parsed, spec, "layers", model.num_moe_layers(), 1, 4096);
  if (!layers) return layers.error();

  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto t = static_cast<int>(*tokens);
  const int e = model.num_experts;
  const int k = model.num_experts_per_tok;
  const auto h = static_cast<int>(model.hidden_size);
  auto backend = kernels::make_cpu_backend();
  planner::LoadData d;
  d.format = "synthetic";
  d.load.source = spec;
  d.load.num_experts = e;
  std::vector<int> hidden;
  for (int i = 0; i < model.num_hidden_layers; ++i) {
    if (model.moe_layers[static_cast<std::size_t>(i)]) hidden.push_back(i);
  }
  // The same tokens enter every layer; each layer routes them with its own router weights.
  RowMat x(t, h);
  for (int r = 0; r < t; ++r) {
    for (int c = 0; c < h; ++c) {
      x(r, c) = kernels::uniform_value(
          static_cast<std::uint64_t>(*seed), static_cast<std::uint32_t>(kernels::Tensor::kInput),
          static_cast<std::uint64_t>(r) * static_cast<std::uint64_t>(h) +
              static_cast<std::uint64_t>(c));
    }
  }
  for (int l = 0; l < static_cast<int>(*layers); ++l) {
    auto spec_l = kernels::LayerSpec::from_model(model, 1, DType::kFp32,
                                                 static_cast<std::uint64_t>(*seed + l));
    if (!spec_l) return spec_l.error();
    const std::vector<float> w = kernels::make_router_weight(*spec_l);
    const std::vector<float> bias = kernels::make_score_bias(*spec_l);
    // One GEMM for all tokens (the load needs the routing, not per-row reproducibility).
    const RowMat logits = x * Eigen::Map<const RowMat>(w.data(), h, e);
    std::vector<int> ids(static_cast<std::size_t>(t) * static_cast<std::size_t>(k));
    std::vector<float> weights(ids.size());
    backend->route(kernels::OpContext{}, model.router,
                   std::span<const float>(logits.data(), static_cast<std::size_t>(logits.size())),
                   bias, t, e, k, ids, weights);
    std::vector<double> row(static_cast<std::size_t>(e), 0.0);
    for (const int id : ids) row[static_cast<std::size_t>(id)] += 1.0;
    d.load.counts.push_back(std::move(row));
    d.layer_ids.push_back(*layers == model.num_moe_layers() ? hidden[static_cast<std::size_t>(l)]
                                                            : l);
  }
  return d;
}

namespace {

Result<planner::LoadData> routed_with_model(const std::string& input, const std::string& spec,
                                            const models::MoeModel* model) {
  if (model == nullptr) {
    return input_error(input,
                       " " + spec + ": a routed load needs {model} (it runs that model's router)");
  }
  return routed_load(spec, *model);
}

}  // namespace

Result<planner::LoadData> load_any(const std::string& file_or_spec, const models::MoeModel* model) {
  if (is_routed_spec(file_or_spec)) return routed_with_model("load", file_or_spec, model);
  return planner::load_file_or_spec(file_or_spec, model);
}

Result<planner::LoadData> synthetic_any(const std::string& spec, const models::MoeModel* model) {
  if (is_routed_spec(spec)) return routed_with_model("synthetic", spec, model);
  return planner::synthetic_load(spec, model);
}

}  // namespace moeplan::profiler
