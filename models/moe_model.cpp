// Reading a Hugging Face config.json into MoeModel, and the derived sizes and FLOPs.
#include "models/moe_model.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "models/json_reader.hpp"

namespace moeplan::models {

namespace {

constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;  // 16M: far above any real width
constexpr std::int64_t kMaxCount = 1 << 16;

struct ArchEntry {
  const char* architecture;
  const char* model_type;
  Family family;
};
constexpr ArchEntry kArchitectures[] = {
    {"Qwen2MoeForCausalLM", "qwen2_moe", Family::kQwen2Moe},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::kQwen3Moe},
    {"DeepseekV2ForCausalLM", "deepseek_v2", Family::kDeepseekV2},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::kDeepseekV3},
    {"MixtralForCausalLM", "mixtral", Family::kMixtral},
};

std::string supported_architectures() {
  std::string s;
  for (const auto& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.architecture);
  return s;
}

// Evaluates a Result-returning expression into `var`, returning its error on failure.
#define MOEPLAN_ASSIGN(var, expr)               \
  do {                                          \
    auto moeplan_r_ = (expr);                   \
    if (!moeplan_r_) return moeplan_r_.error(); \
    var = *moeplan_r_;                          \
  } while (false)

Result<Family> detect_family(const nlohmann::json& j, const JsonReader& r, std::string& arch) {
  if (r.has("architectures")) {
    const auto& a = j.at("architectures");
    if (!a.is_array()) {
      return r.error("architectures", "expected an array of strings, got " + describe_json(a));
    }
    std::string seen;
    for (const auto& e : a) {
      if (!e.is_string()) {
        return r.error("architectures", "expected an array of strings, got " + describe_json(e));
      }
      for (const auto& known : kArchitectures) {
        if (e.get<std::string>() == known.architecture) {
          arch = known.architecture;
          return known.family;
        }
      }
      seen += (seen.empty() ? "" : ", ") + e.get<std::string>();
    }
    return r.error("architectures", "unsupported architecture '" + seen + "', expected one of " +
                                        supported_architectures());
  }
  if (r.has("model_type")) {
    std::string mt;
    MOEPLAN_ASSIGN(mt, r.string("model_type"));
    for (const auto& known : kArchitectures) {
      if (mt == known.model_type) {
        arch = known.architecture;
        return known.family;
      }
    }
    return r.error("model_type", "unsupported model type '" + mt + "', expected an MoE model (" +
                                     supported_architectures() + ")");
  }
  return r.error("architectures", "missing, expected one of " + supported_architectures());
}

Status read_attention(const JsonReader& r, MoeModel& m) {
  auto& at = m.attention;
  std::int64_t v = 0;
  MOEPLAN_ASSIGN(v, r.integer("num_attention_heads", 1, kMaxCount));
  at.num_heads = static_cast<int>(v);
  MOEPLAN_ASSIGN(v, r.integer_or("num_key_value_heads", at.num_heads, 1, at.num_heads));
  at.num_kv_heads = static_cast<int>(v);
  MOEPLAN_ASSIGN(at.rope_theta, r.number_or("rope_theta", 10000.0, 1.0, 1e12));
  MOEPLAN_ASSIGN(at.rms_norm_eps, r.number_or("rms_norm_eps", 1e-6, 1e-12, 1e-1));
  if (at.num_heads % at.num_kv_heads != 0) {
    return r.error("num_key_value_heads",
                   "expected a divisor of num_attention_heads=" + std::to_string(at.num_heads) +
                       ", got " + std::to_string(at.num_kv_heads));
  }
  if (m.family == Family::kDeepseekV2 || m.family == Family::kDeepseekV3) {
    at.mla = true;
    MOEPLAN_ASSIGN(v, r.integer_or("q_lora_rank", 0, 0, kMaxDim));
    at.q_lora_rank = static_cast<int>(v);
    MOEPLAN_ASSIGN(v, r.integer("kv_lora_rank", 1, kMaxDim));
    at.kv_lora_rank = static_cast<int>(v);
    MOEPLAN_ASSIGN(v, r.integer("qk_nope_head_dim", 0, kMaxDim));
    at.qk_nope_head_dim = static_cast<int>(v);
    MOEPLAN_ASSIGN(v, r.integer("qk_rope_head_dim", 0, kMaxDim));
    at.qk_rope_head_dim = static_cast<int>(v);
    MOEPLAN_ASSIGN(v, r.integer("v_head_dim", 1, kMaxDim));
    at.v_head_dim = static_cast<int>(v);
    at.head_dim = at.qk_nope_head_dim + at.qk_rope_head_dim;
    return Status::Ok();
  }
  if (!r.has("head_dim") && m.hidden_size % at.num_heads != 0) {
    return r.error("num_attention_heads",
                   "expected a divisor of hidden_size=" + std::to_string(m.hidden_size) +
                       " (no head_dim given)");
  }
  MOEPLAN_ASSIGN(v, r.integer_or("head_dim", m.hidden_size / at.num_heads, 1, kMaxDim));
  at.head_dim = static_cast<int>(v);
  at.qkv_bias = m.family == Family::kQwen2Moe;
  at.qk_norm = m.family == Family::kQwen3Moe;
  if (m.family == Family::kQwen3Moe) {
    bool bias = false;
    MOEPLAN_ASSIGN(bias, r.boolean_or("attention_bias", false));
    at.qkv_bias = bias;
  }
  return Status::Ok();
}

Status read_qwen_moe(const JsonReader& r, MoeModel& m) {
  std::int64_t v = 0;
  MOEPLAN_ASSIGN(v, r.integer("num_experts", 1, kMaxCount));
  m.num_experts = static_cast<int>(v);
  MOEPLAN_ASSIGN(m.moe_intermediate_size, r.integer("moe_intermediate_size", 1, kMaxDim));
  if (m.family == Family::kQwen2Moe) {
    MOEPLAN_ASSIGN(m.shared_expert_intermediate_size,
                   r.integer_or("shared_expert_intermediate_size", 0, 0, kMaxDim));
    m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
    m.shared_expert_gated = m.num_shared_experts > 0;
  }
  MOEPLAN_ASSIGN(m.router.norm_topk_prob, r.boolean_or("norm_topk_prob", false));
  std::int64_t step = 1;
  MOEPLAN_ASSIGN(step, r.integer_or("decoder_sparse_step", 1, 1, kMaxCount));
  std::vector<std::int64_t> mlp_only;
  MOEPLAN_ASSIGN(mlp_only, r.integer_list_or_empty("mlp_only_layers", 0, m.num_hidden_layers - 1));
  m.moe_layers.assign(static_cast<std::size_t>(m.num_hidden_layers), false);
  for (int i = 0; i < m.num_hidden_layers; ++i) {
    const bool dense = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    m.moe_layers[static_cast<std::size_t>(i)] = !dense && (i + 1) % step == 0;
  }
  return Status::Ok();
}

Status read_deepseek(const JsonReader& r, MoeModel& m) {
  std::int64_t v = 0;
  MOEPLAN_ASSIGN(v, r.integer("n_routed_experts", 1, kMaxCount));
  m.num_experts = static_cast<int>(v);
  MOEPLAN_ASSIGN(m.moe_intermediate_size, r.integer("moe_intermediate_size", 1, kMaxDim));
  MOEPLAN_ASSIGN(v, r.integer_or("n_shared_experts", 0, 0, kMaxCount));
  m.num_shared_experts = static_cast<int>(v);
  m.shared_expert_intermediate_size = m.num_shared_experts > 0 ? m.moe_intermediate_size : 0;
  const bool v3 = m.family == Family::kDeepseekV3;

  std::string scoring;
  MOEPLAN_ASSIGN(scoring, r.string_or("scoring_func", v3 ? "sigmoid" : "softmax"));
  if (scoring == "softmax") {
    m.router.scoring = ScoringFunc::kSoftmax;
  } else if (scoring == "sigmoid") {
    m.router.scoring = ScoringFunc::kSigmoid;
  } else {
    return r.error("scoring_func", "expected \"softmax\" or \"sigmoid\", got \"" + scoring + "\"");
  }
  std::string method;
  MOEPLAN_ASSIGN(method, r.string_or("topk_method", v3 ? "noaux_tc" : "greedy"));
  if (method == "greedy") {
    m.router.topk_method = TopkMethod::kGreedy;
  } else if (method == "group_limited_greedy") {
    m.router.topk_method = TopkMethod::kGroupLimitedGreedy;
  } else if (method == "noaux_tc") {
    m.router.topk_method = TopkMethod::kNoauxTc;
    m.router.has_score_correction_bias = true;
  } else {
    return r.error(
        "topk_method",
        "expected \"greedy\", \"group_limited_greedy\" or \"noaux_tc\", got \"" + method + "\"");
  }
  MOEPLAN_ASSIGN(v, r.integer_or("n_group", 1, 1, m.num_experts));
  m.router.num_groups = static_cast<int>(v);
  MOEPLAN_ASSIGN(v, r.integer_or("topk_group", m.router.num_groups, 1, m.router.num_groups));
  m.router.topk_groups = static_cast<int>(v);
  MOEPLAN_ASSIGN(m.router.norm_topk_prob, r.boolean_or("norm_topk_prob", v3));
  MOEPLAN_ASSIGN(m.router.routed_scaling_factor,
                 r.number_or("routed_scaling_factor", 1.0, 1e-6, 1e6));
  m.router.scale_after_norm = v3;
  if (m.router.topk_method != TopkMethod::kGreedy) {
    if (m.num_experts % m.router.num_groups != 0) {
      return r.error("n_group",
                     "expected a divisor of n_routed_experts=" + std::to_string(m.num_experts) +
                         ", got " + std::to_string(m.router.num_groups));
    }
  }
  std::int64_t first_dense = 0;
  std::int64_t freq = 1;
  MOEPLAN_ASSIGN(first_dense, r.integer_or("first_k_dense_replace", 0, 0, m.num_hidden_layers));
  MOEPLAN_ASSIGN(freq, r.integer_or("moe_layer_freq", 1, 1, kMaxCount));
  m.moe_layers.assign(static_cast<std::size_t>(m.num_hidden_layers), false);
  for (int i = 0; i < m.num_hidden_layers; ++i) {
    m.moe_layers[static_cast<std::size_t>(i)] = i >= first_dense && i % freq == 0;
  }
  MOEPLAN_ASSIGN(v, r.integer_or("num_nextn_predict_layers", 0, 0, kMaxCount));
  m.num_nextn_predict_layers = static_cast<int>(v);
  return Status::Ok();
}

Status read_mixtral(const JsonReader& r, MoeModel& m) {
  std::int64_t v = 0;
  MOEPLAN_ASSIGN(v, r.integer("num_local_experts", 1, kMaxCount));
  m.num_experts = static_cast<int>(v);
  m.moe_intermediate_size = m.dense_intermediate_size;  // Mixtral's experts are full MLPs
  m.router.norm_topk_prob = true;                       // always renormalised over the top-k
  m.moe_layers.assign(static_cast<std::size_t>(m.num_hidden_layers), true);
  return Status::Ok();
}

}  // namespace

std::string family_name(Family f) {
  switch (f) {
    case Family::kQwen2Moe: return "qwen2_moe";
    case Family::kQwen3Moe: return "qwen3_moe";
    case Family::kDeepseekV2: return "deepseek_v2";
    case Family::kDeepseekV3: return "deepseek_v3";
    case Family::kMixtral: return "mixtral";
  }
  return "?";
}

std::string scoring_name(ScoringFunc s) {
  return s == ScoringFunc::kSoftmax ? "softmax" : "sigmoid";
}

std::string topk_method_name(TopkMethod m) {
  switch (m) {
    case TopkMethod::kGreedy: return "greedy";
    case TopkMethod::kGroupLimitedGreedy: return "group_limited_greedy";
    case TopkMethod::kNoauxTc: return "noaux_tc";
  }
  return "?";
}

Result<MoeModel> parse_model_config(const std::string& json_text, const std::string& source,
                                    const std::string& name) {
  auto parsed = parse_json(json_text, source);
  if (!parsed) return parsed.error();
  const nlohmann::json& j = *parsed;
  if (!j.is_object())
    return Error{source + ": expected a JSON object (a config.json), got " + describe_json(j)};
  const JsonReader r(j, source);

  MoeModel m;
  m.name = name;
  m.source_path = source;
  MOEPLAN_ASSIGN(m.family, detect_family(j, r, m.architecture));
  MOEPLAN_ASSIGN(m.hidden_size, r.integer("hidden_size", 1, kMaxDim));
  MOEPLAN_ASSIGN(m.dense_intermediate_size, r.integer("intermediate_size", 1, kMaxDim));
  std::int64_t v = 0;
  MOEPLAN_ASSIGN(v, r.integer("num_hidden_layers", 1, kMaxCount));
  m.num_hidden_layers = static_cast<int>(v);
  MOEPLAN_ASSIGN(m.vocab_size, r.integer("vocab_size", 1, kMaxDim));
  MOEPLAN_ASSIGN(m.tie_word_embeddings, r.boolean_or("tie_word_embeddings", false));
  MOEPLAN_ASSIGN(m.max_context, r.integer_or("max_position_embeddings", 0, 1, kMaxDim));
  std::string dtype;
  MOEPLAN_ASSIGN(dtype, r.string_or("torch_dtype", "bfloat16"));
  if (auto d = parse_dtype(dtype)) {
    m.dtype = *d;
  } else {
    return r.error("torch_dtype",
                   "expected \"bfloat16\", \"float16\" or \"float32\", got \"" + dtype + "\"");
  }
  m.weights.plain = m.dtype;
  if (r.has("quantization_config")) {
    MOEPLAN_ASSIGN(m.weights,
                   parse_quantization_config(j.at("quantization_config"), m.dtype, source));
  }
  m.checkpoint_weights = m.weights;

  Status family_status;
  switch (m.family) {
    case Family::kQwen2Moe:
    case Family::kQwen3Moe: family_status = read_qwen_moe(r, m); break;
    case Family::kDeepseekV2:
    case Family::kDeepseekV3: family_status = read_deepseek(r, m); break;
    case Family::kMixtral: family_status = read_mixtral(r, m); break;
  }
  if (!family_status) return family_status.error();
  MOEPLAN_TRY_STATUS(read_attention(r, m));

  MOEPLAN_ASSIGN(v, r.integer("num_experts_per_tok", 1, m.num_experts));
  m.num_experts_per_tok = static_cast<int>(v);
  if (m.router.topk_method != TopkMethod::kGreedy) {
    const int per_group = m.num_experts / m.router.num_groups;
    if (m.num_experts_per_tok > m.router.topk_groups * per_group) {
      return r.error("num_experts_per_tok", "expected at most topk_group × experts per group = " +
                                                std::to_string(m.router.topk_groups * per_group) +
                                                ", got " + std::to_string(m.num_experts_per_tok));
    }
  }
  if (m.num_moe_layers() == 0) {
    return Error{source + ": no MoE layer: every one of the " +
                 std::to_string(m.num_hidden_layers) +
                 " layers is dense (check decoder_sparse_step, mlp_only_layers, "
                 "first_k_dense_replace, moe_layer_freq)"};
  }
  MOEPLAN_TRY_STATUS(check_model_size(m, source));
  if (m.name.empty()) m.name = std::filesystem::path(source).stem().string();
  return m;
}

Result<MoeModel> load_model_config(const std::filesystem::path& path, const std::string& name) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  std::string display = name;
  if (display.empty()) {
    // "…/Qwen2-57B-A14B/config.json" reads better as the folder's name.
    display = path.stem() == "config" && path.has_parent_path()
                  ? path.parent_path().filename().string()
                  : path.stem().string();
  }
  return parse_model_config(*text, path.string(), display);
}

// ---- derived figures ---------------------------------------------------------------------

namespace {

// The parameter counts in any arithmetic type: std::int64_t for the figures, double for the
// check at parse time that they fit (check_model_size).
template <typename T>
T attention_parameters(const AttentionSpec& a, T hidden) {
  const T heads = static_cast<T>(a.num_heads);
  if (a.mla) {
    const T qk = static_cast<T>(a.qk_nope_head_dim) + static_cast<T>(a.qk_rope_head_dim);
    const T q_lora = static_cast<T>(a.q_lora_rank);
    const T kv_lora = static_cast<T>(a.kv_lora_rank);
    T p = 0;
    if (a.q_lora_rank > 0) {
      p += hidden * q_lora + q_lora + q_lora * heads * qk;
    } else {
      p += hidden * heads * qk;
    }
    p += hidden * (kv_lora + static_cast<T>(a.qk_rope_head_dim)) + kv_lora;
    p += kv_lora * heads * (static_cast<T>(a.qk_nope_head_dim) + static_cast<T>(a.v_head_dim));
    p += heads * static_cast<T>(a.v_head_dim) * hidden;
    return p;
  }
  const T head_dim = static_cast<T>(a.head_dim);
  const T q = heads * head_dim;
  const T kv = static_cast<T>(a.num_kv_heads) * head_dim;
  T p = hidden * q + 2 * hidden * kv + q * hidden;
  if (a.qkv_bias) p += q + 2 * kv;
  if (a.qk_norm) p += 2 * head_dim;
  return p;
}

}  // namespace

std::int64_t AttentionSpec::parameters(std::int64_t hidden) const {
  return attention_parameters<std::int64_t>(*this, hidden);
}

int MoeModel::num_moe_layers() const {
  return static_cast<int>(std::count(moe_layers.begin(), moe_layers.end(), true));
}

namespace {

template <typename T>
T router_parameters(const MoeModel& m) {
  return static_cast<T>(m.hidden_size) * static_cast<T>(m.num_experts) +
         (m.router.has_score_correction_bias ? static_cast<T>(m.num_experts) : T{0});
}
template <typename T>
T shared_parameters(const MoeModel& m) {
  return 3 * static_cast<T>(m.hidden_size) * static_cast<T>(m.num_shared_experts) *
             static_cast<T>(m.shared_expert_intermediate_size) +
         (m.shared_expert_gated ? static_cast<T>(m.hidden_size) : T{0});
}
template <typename T>
T expert_parameters(const MoeModel& m) {
  return 3 * static_cast<T>(m.hidden_size) * static_cast<T>(m.moe_intermediate_size);
}
template <typename T>
T moe_block_parameters(const MoeModel& m, T experts) {
  return router_parameters<T>(m) + experts * expert_parameters<T>(m) + shared_parameters<T>(m);
}
template <typename T>
T model_parameters(const MoeModel& m, T experts_per_token) {
  const T hidden = static_cast<T>(m.hidden_size);
  const T embed = static_cast<T>(m.vocab_size) * hidden * (m.tie_word_embeddings ? 1 : 2);
  const T per_layer_common = attention_parameters<T>(m.attention, hidden) + 2 * hidden;
  return embed + hidden + static_cast<T>(m.num_hidden_layers) * per_layer_common +
         static_cast<T>(m.num_moe_layers()) * moe_block_parameters<T>(m, experts_per_token) +
         static_cast<T>(m.num_dense_layers()) * 3 * hidden *
             static_cast<T>(m.dense_intermediate_size);
}

}  // namespace

std::int64_t MoeModel::moe_block_parameters() const {
  return models::moe_block_parameters<std::int64_t>(*this, num_experts);
}

std::int64_t MoeModel::moe_block_active_parameters() const {
  return models::moe_block_parameters<std::int64_t>(*this, num_experts_per_tok);
}

std::int64_t MoeModel::moe_flops_per_token() const {
  // Two FLOPs per multiply-add over every weight a token is multiplied by (the score bias is an
  // add, not a GEMM weight).
  return 2 * (hidden_size * num_experts + std::int64_t{num_experts_per_tok} * expert_parameters() +
              shared_parameters<std::int64_t>(*this));
}

std::int64_t MoeModel::total_parameters() const {
  return model_parameters<std::int64_t>(*this, num_experts);
}

std::int64_t MoeModel::active_parameters() const {
  return model_parameters<std::int64_t>(*this, num_experts_per_tok);
}

double MoeModel::linear_bytes(std::int64_t rows, std::int64_t cols, bool quantized) const {
  if (quantized) return weights.matrix_bytes(rows, cols);
  return static_cast<double>(rows) * static_cast<double>(cols) * dtype_bytes(dtype);
}

double MoeModel::expert_weight_bytes(int tp_size) const {
  const std::int64_t width = moe_intermediate_size / std::max(1, tp_size);
  return 2.0 * linear_bytes(width, hidden_size) + linear_bytes(hidden_size, width);
}

int MoeModel::kv_heads_per_rank(int tp_size) const {
  if (attention.mla) return 0;
  const int tp = std::max(1, tp_size);
  return std::max(1, (attention.num_kv_heads + tp - 1) / tp);
}

double MoeModel::kv_cache_bytes_per_token(int tp_size) const {
  const auto& a = attention;
  const double b = dtype_bytes(dtype);
  if (a.mla) return static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim) * b;
  return 2.0 * kv_heads_per_rank(tp_size) * a.head_dim * b;
}

double MoeModel::attention_weight_bytes() const {
  const auto& a = attention;
  const bool q = weights.attention_quantized;
  const double b = dtype_bytes(dtype);
  const std::int64_t h = hidden_size;
  const std::int64_t heads = a.num_heads;
  if (a.mla) {
    const std::int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    double bytes = 0.0;
    if (a.q_lora_rank > 0) {
      bytes += linear_bytes(a.q_lora_rank, h, q) + a.q_lora_rank * b +
               linear_bytes(heads * qk, a.q_lora_rank, q);
    } else {
      bytes += linear_bytes(heads * qk, h, q);
    }
    bytes += linear_bytes(a.kv_lora_rank + a.qk_rope_head_dim, h, q) + a.kv_lora_rank * b;
    bytes += linear_bytes(heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, q);
    bytes += linear_bytes(h, heads * a.v_head_dim, q);
    return bytes;
  }
  const std::int64_t qd = heads * a.head_dim;
  const std::int64_t kv = std::int64_t{a.num_kv_heads} * a.head_dim;
  double bytes = linear_bytes(qd, h, q) + 2.0 * linear_bytes(kv, h, q) + linear_bytes(h, qd, q);
  if (a.qkv_bias) bytes += static_cast<double>(qd + 2 * kv) * b;
  if (a.qk_norm) bytes += 2.0 * a.head_dim * b;
  return bytes;
}

double MoeModel::moe_block_other_bytes(int tp_size) const {
  const double b = dtype_bytes(dtype);
  const double h = static_cast<double>(hidden_size);
  const std::int64_t width = shared_intermediate_total() / std::max(1, tp_size);
  double bytes = 0.0;
  if (width > 0) bytes += 2.0 * linear_bytes(width, hidden_size) + linear_bytes(hidden_size, width);
  if (shared_expert_gated) bytes += h * b;
  // NOTE: the router stays in torch_dtype in every quantized checkpoint (DeepSeek-V3's
  // mlp.gate.weight is bf16, its e_score_correction_bias fp32; gpt-oss and ModelOpt exclude it).
  bytes += h * num_experts * b;
  if (router.has_score_correction_bias) bytes += 4.0 * num_experts;
  return bytes;
}

double MoeModel::dense_mlp_weight_bytes() const {
  return 2.0 * linear_bytes(dense_intermediate_size, hidden_size) +
         linear_bytes(hidden_size, dense_intermediate_size);
}

double MoeModel::embedding_bytes() const {
  return static_cast<double>(vocab_size) * static_cast<double>(hidden_size) *
         (tie_word_embeddings ? 1.0 : 2.0) * dtype_bytes(dtype);
}

double MoeModel::total_weight_bytes() const {
  const double b = dtype_bytes(dtype);
  const double h = static_cast<double>(hidden_size);
  return embedding_bytes() + h * b + num_hidden_layers * (attention_weight_bytes() + 2.0 * h * b) +
         num_moe_layers() * moe_layer_weight_bytes() +
         num_dense_layers() * dense_mlp_weight_bytes();
}

MoeModel with_weight_format(MoeModel m, WeightFormat format) {
  if (format.quantized()) {
    format.plain = m.dtype;
  } else {
    m.dtype = format.plain;
  }
  m.weights = std::move(format);
  return m;
}

Status apply_weights_choice(MoeModel& m, const std::string& name) {
  if (name.empty()) return Status::Ok();
  auto f = parse_weight_format(name, m.dtype);
  if (!f) return f.error();
  m = with_weight_format(std::move(m), std::move(*f));
  return Status::Ok();
}

Status check_model_size(const MoeModel& m, const std::string& source) {
  // Every derived count (parameters, FLOPs = 2 × parameters, bytes in double) is a sum of
  // non-negative products bounded by the total, so a total within the limit keeps them all
  // far inside std::int64_t.
  const double total = model_parameters<double>(m, static_cast<double>(m.num_experts));
  if (!(total <= kMaxModelParameters)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", total);
    return Error{source + ": the sizes give " + buf +
                 " parameters, expected at most 1e15 (moeplan's model limit; check hidden_size, "
                 "num_hidden_layers, num_experts and the attention sizes)"};
  }
  return Status::Ok();
}

}  // namespace moeplan::models
