// Weight formats: sizes with scales, names, and quantization_config as published.
#include "models/weight_format.hpp"

#include <cmath>

#include "models/json_reader.hpp"

namespace moeplan {

namespace {

double ceil_div(std::int64_t a, std::int64_t b) {
  return b > 0 ? static_cast<double>((a + b - 1) / b) : 1.0;
}

constexpr double kFp32 = 4.0;

}  // namespace

double WeightFormat::scale_bytes(std::int64_t rows, std::int64_t cols) const {
  const double r = static_cast<double>(rows);
  switch (scheme) {
    case WeightScheme::kPlain: return 0.0;
    case WeightScheme::kFp8Block:
      return kFp32 * ceil_div(rows, block_out) * ceil_div(cols, block_in);
    case WeightScheme::kFp8Channel: return kFp32 * r;
    case WeightScheme::kFp8Tensor: return kFp32;
    case WeightScheme::kMxfp4: return r * ceil_div(cols, group_size);  // e8m0, 1 byte
    case WeightScheme::kNvfp4:
      // e4m3 per 16 inputs, plus the fp32 per-tensor weight_scale_2 and input_scale.
      return r * ceil_div(cols, group_size) + 2.0 * kFp32;
    case WeightScheme::kW4A16: {
      const double groups = r * (group_size > 0 ? ceil_div(cols, group_size) : 1.0);
      return groups * 2.0 + (zero_points ? groups * 0.5 : 0.0);
    }
  }
  return 0.0;
}

double WeightFormat::weight_element_bytes() const {
  switch (scheme) {
    case WeightScheme::kPlain: return dtype_bytes(plain);
    case WeightScheme::kFp8Block:
    case WeightScheme::kFp8Channel:
    case WeightScheme::kFp8Tensor: return 1.0;
    case WeightScheme::kMxfp4:
    case WeightScheme::kNvfp4:
    case WeightScheme::kW4A16: return 0.5;
  }
  return dtype_bytes(plain);
}

double WeightFormat::matrix_bytes(std::int64_t rows, std::int64_t cols) const {
  return static_cast<double>(rows) * static_cast<double>(cols) * weight_element_bytes() +
         scale_bytes(rows, cols);
}

DType WeightFormat::compute_dtype() const {
  return activations == ActivationScheme::kPlain ? plain : DType::kFp8;
}

double WeightFormat::activation_element_bytes() const {
  switch (activations) {
    case ActivationScheme::kPlain: return dtype_bytes(plain);
    case ActivationScheme::kFp8Group:
    case ActivationScheme::kFp8Token:
    case ActivationScheme::kFp8Tensor: return 1.0;
    case ActivationScheme::kFp4Group: return 0.5;
  }
  return dtype_bytes(plain);
}

double WeightFormat::dispatch_row_bytes(std::int64_t hidden) const {
  const double h = static_cast<double>(hidden);
  switch (activations) {
    case ActivationScheme::kFp8Group: return h + kFp32 * ceil_div(hidden, activation_group);
    case ActivationScheme::kFp8Token: return h + kFp32;
    case ActivationScheme::kFp8Tensor: return h;
    // NOTE: NVFP4 MoE kernels quantize their input themselves; the dispatchers moeplan models
    // (and DeepEP) send fp8 or the model's dtype, so NVFP4 rows travel in torch_dtype.
    case ActivationScheme::kFp4Group:
    case ActivationScheme::kPlain: return h * dtype_bytes(plain);
  }
  return h * dtype_bytes(plain);
}

std::string WeightFormat::name() const {
  switch (scheme) {
    case WeightScheme::kPlain: return std::string(dtype_name(plain));
    case WeightScheme::kFp8Block: return "fp8-block";
    case WeightScheme::kFp8Channel: return "fp8-channel";
    case WeightScheme::kFp8Tensor: return "fp8-tensor";
    case WeightScheme::kMxfp4: return "mxfp4";
    case WeightScheme::kNvfp4: return "nvfp4";
    case WeightScheme::kW4A16: return "w4a16";
  }
  return "?";
}

std::string WeightFormat::describe() const {
  std::string s;
  switch (scheme) {
    case WeightScheme::kPlain: return std::string(dtype_name(plain));
    case WeightScheme::kFp8Block:
      s = "fp8 e4m3, " + std::to_string(block_out) + "×" + std::to_string(block_in) +
          " blocks, fp32 scales";
      break;
    case WeightScheme::kFp8Channel: s = "fp8 e4m3, per output channel fp32 scales"; break;
    case WeightScheme::kFp8Tensor: s = "fp8 e4m3, per tensor fp32 scale"; break;
    case WeightScheme::kMxfp4:
      s = "mxfp4 (e2m1, e8m0 scale per " + std::to_string(group_size) + ")";
      break;
    case WeightScheme::kNvfp4:
      s = "nvfp4 (e2m1, e4m3 scale per " + std::to_string(group_size) + ", fp32 per tensor)";
      break;
    case WeightScheme::kW4A16:
      s = "int4, " + (group_size > 0 ? "groups of " + std::to_string(group_size) : "per channel") +
          ", 16-bit scales" + (zero_points ? " and 4-bit zero points" : "");
      break;
  }
  if (!attention_quantized) s += "; attention " + std::string(dtype_name(plain));
  return s;
}

std::string WeightFormat::describe_activations() const {
  switch (activations) {
    case ActivationScheme::kPlain: return std::string(dtype_name(plain));
    case ActivationScheme::kFp8Group:
      return "fp8 e4m3 dynamic, 1×" + std::to_string(activation_group) + " groups, fp32 scales";
    case ActivationScheme::kFp8Token: return "fp8 e4m3 dynamic, per token fp32 scales";
    case ActivationScheme::kFp8Tensor: return "fp8 e4m3, per tensor fp32 scale";
    case ActivationScheme::kFp4Group: return "nvfp4 (e2m1, e4m3 scale per 16)";
  }
  return "?";
}

nlohmann::json WeightFormat::to_json() const {
  nlohmann::json j{{"name", name()},
                   {"weights", describe()},
                   {"activations", describe_activations()},
                   {"torch_dtype", std::string(dtype_name(plain))},
                   {"attention_quantized", quantized() && attention_quantized},
                   {"source", source}};
  if (scheme == WeightScheme::kFp8Block) j["weight_block_size"] = {block_out, block_in};
  if (group_size > 0) j["group_size"] = group_size;
  if (activations == ActivationScheme::kFp8Group) j["activation_group_size"] = activation_group;
  return j;
}

const std::vector<std::string>& weight_format_names() {
  static const std::vector<std::string> names = {"fp8-block", "fp8-channel", "fp8-tensor", "bf16",
                                                 "fp16",      "mxfp4",       "nvfp4",      "w4a16"};
  return names;
}

namespace {

std::string names_text() {
  std::string s;
  for (const auto& n : weight_format_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

WeightFormat fp8_block(DType plain, int out, int in) {
  WeightFormat f;
  f.scheme = WeightScheme::kFp8Block;
  f.activations = ActivationScheme::kFp8Group;
  f.plain = plain;
  f.block_out = out;
  f.block_in = in;
  f.activation_group = in;
  return f;
}

WeightFormat with(WeightScheme s, ActivationScheme a, DType plain, int group = 0) {
  WeightFormat f;
  f.scheme = s;
  f.activations = a;
  f.plain = plain;
  f.group_size = group;
  return f;
}

}  // namespace

Result<WeightFormat> parse_weight_format(std::string_view name, DType plain) {
  Result<WeightFormat> out = Error{""};
  if (name == "fp8-block") {
    out = fp8_block(plain, 128, 128);
  } else if (name == "fp8-channel") {
    out = with(WeightScheme::kFp8Channel, ActivationScheme::kFp8Token, plain);
  } else if (name == "fp8-tensor") {
    out = with(WeightScheme::kFp8Tensor, ActivationScheme::kFp8Tensor, plain);
  } else if (name == "bf16") {
    out = with(WeightScheme::kPlain, ActivationScheme::kPlain, DType::kBf16);
  } else if (name == "fp16") {
    out = with(WeightScheme::kPlain, ActivationScheme::kPlain, DType::kFp16);
  } else if (name == "mxfp4") {
    out = with(WeightScheme::kMxfp4, ActivationScheme::kPlain, plain, 32);
  } else if (name == "nvfp4") {
    out = with(WeightScheme::kNvfp4, ActivationScheme::kFp4Group, plain, 16);
  } else if (name == "w4a16") {
    out = with(WeightScheme::kW4A16, ActivationScheme::kPlain, plain, 128);
  } else {
    return input_error("weights",
                       ": expected one of " + names_text() + ", got '" + std::string(name) + "'");
  }
  out->source = "--weights " + std::string(name);
  return out;
}

namespace {

// Evaluates a Result-returning expression into `var`, returning its error on failure.
#define MOEPLAN_QC_ASSIGN(var, expr)            \
  do {                                          \
    auto moeplan_r_ = (expr);                   \
    if (!moeplan_r_) return moeplan_r_.error(); \
    var = *moeplan_r_;                          \
  } while (false)

/// Whether a not-converted module list (modules_to_not_convert, ignore, exclude_modules) keeps
/// attention unquantized (an entry naming self_attn / attn, as gpt-oss's does).
Result<bool> attention_excluded(const nlohmann::json& qc, const JsonReader& r) {
  for (const char* key : {"modules_to_not_convert", "ignore", "exclude_modules"}) {
    if (!r.has(key)) continue;
    const auto& list = qc.at(key);
    if (!list.is_array()) return r.error(key, "expected an array of module names");
    for (const auto& e : list) {
      if (!e.is_string()) return r.error(key, "expected module names, got " + describe_json(e));
      if (e.get<std::string>().find("attn") != std::string::npos) return true;
    }
  }
  return false;
}

Result<WeightFormat> parse_fp8(const nlohmann::json& qc, const JsonReader& r, DType plain) {
  std::string fmt;
  MOEPLAN_QC_ASSIGN(fmt, r.string_or("fmt", "e4m3"));
  if (fmt != "e4m3") return r.error("fmt", "expected \"e4m3\", got \"" + fmt + "\"");
  std::string act;
  MOEPLAN_QC_ASSIGN(act, r.string_or("activation_scheme", "dynamic"));
  if (act != "dynamic" && act != "static") {
    return r.error("activation_scheme", "expected \"dynamic\" or \"static\", got \"" + act + "\"");
  }
  if (!r.has("weight_block_size")) {
    return with(WeightScheme::kFp8Tensor, ActivationScheme::kFp8Tensor, plain);
  }
  const auto& b = qc.at("weight_block_size");
  const bool ok = b.is_array() && b.size() == 2 && b[0].is_number_integer() &&
                  b[1].is_number_integer() && b[0].get<std::int64_t>() >= 1 &&
                  b[1].get<std::int64_t>() >= 1 && b[0].get<std::int64_t>() <= 65536 &&
                  b[1].get<std::int64_t>() <= 65536;
  if (!ok) {
    return r.error("weight_block_size",
                   "expected two positive block sizes [rows, columns] (e.g. [128, 128]), got " +
                       describe_json(b));
  }
  if (act != "dynamic") {
    return r.error("activation_scheme",
                   "expected \"dynamic\" with weight_block_size (per-token-group activation "
                   "scales), got \"" +
                       act + "\"");
  }
  return fp8_block(plain, static_cast<int>(b[0].get<std::int64_t>()),
                   static_cast<int>(b[1].get<std::int64_t>()));
}

/// One compressed-tensors quantization args object ("weights" / "input_activations").
struct CtArgs {
  std::int64_t num_bits = 0;
  std::string type;
  std::string strategy;
  std::int64_t group_size = 0;
  bool symmetric = true;
  std::vector<std::int64_t> block;
};

Result<CtArgs> read_ct_args(const nlohmann::json& j, const std::string& source,
                            const std::string& prefix) {
  if (!j.is_object()) {
    return Error{source + ": key '" + prefix.substr(0, prefix.size() - 1) +
                 "': expected an object, got " + describe_json(j)};
  }
  const JsonReader r(j, source, prefix);
  CtArgs a;
  MOEPLAN_QC_ASSIGN(a.num_bits, r.integer("num_bits", 1, 64));
  MOEPLAN_QC_ASSIGN(a.type, r.string_or("type", "int"));
  MOEPLAN_QC_ASSIGN(a.strategy, r.string_or("strategy", "tensor"));
  MOEPLAN_QC_ASSIGN(a.group_size, r.integer_or("group_size", 0, -1, 65536));
  MOEPLAN_QC_ASSIGN(a.symmetric, r.boolean_or("symmetric", true));
  MOEPLAN_QC_ASSIGN(a.block, r.integer_list_or_empty("block_structure", 1, 65536));
  return a;
}

Result<WeightFormat> parse_compressed_tensors(const nlohmann::json& qc, const JsonReader& r,
                                              DType plain, const std::string& source) {
  if (!r.has("config_groups") || !qc.at("config_groups").is_object() ||
      qc.at("config_groups").empty()) {
    return r.error("config_groups", "expected an object of quantization groups");
  }
  std::optional<WeightFormat> found;
  for (const auto& [gname, g] : qc.at("config_groups").items()) {
    const std::string at = "quantization_config.config_groups." + gname + ".";
    if (!g.is_object() || !g.contains("weights")) {
      return Error{source + ": key '" + at + "weights': missing, expected the weights' scheme"};
    }
    auto w = read_ct_args(g.at("weights"), source, at + "weights.");
    if (!w) return w.error();
    const std::string wkey = source + ": key '" + at + "weights': ";
    WeightFormat f;
    f.plain = plain;
    if (w->type == "float" && w->num_bits == 8) {
      if (w->strategy == "tensor") {
        f.scheme = WeightScheme::kFp8Tensor;
      } else if (w->strategy == "channel") {
        f.scheme = WeightScheme::kFp8Channel;
      } else if (w->strategy == "block" && w->block.size() == 2) {
        f = fp8_block(plain, static_cast<int>(w->block[0]), static_cast<int>(w->block[1]));
      } else {
        return Error{wkey +
                     "expected fp8 strategy tensor, channel or block (with "
                     "block_structure [rows, columns]), got \"" +
                     w->strategy + "\""};
      }
    } else if (w->type == "float" && w->num_bits == 4 && w->group_size == 16) {
      f.scheme = WeightScheme::kNvfp4;
      f.group_size = 16;
    } else if (w->type == "int" && w->num_bits == 4 &&
               (w->strategy == "group" || w->strategy == "channel")) {
      f.scheme = WeightScheme::kW4A16;
      f.group_size = w->strategy == "group" ? static_cast<int>(w->group_size) : 0;
      if (w->strategy == "group" && f.group_size <= 0) {
        return Error{wkey + "expected a positive group_size with strategy \"group\""};
      }
      f.zero_points = !w->symmetric;
    } else {
      return Error{wkey + "unsupported scheme: " + std::to_string(w->num_bits) + "-bit " + w->type +
                   " " + w->strategy +
                   " (moeplan knows fp8 tensor/channel/block, int4 group, nvfp4)"};
    }
    f.activations = ActivationScheme::kPlain;
    if (g.contains("input_activations") && !g.at("input_activations").is_null()) {
      auto a = read_ct_args(g.at("input_activations"), source, at + "input_activations.");
      if (!a) return a.error();
      const std::string akey = source + ": key '" + at + "input_activations': ";
      if (a->type == "float" && a->num_bits == 8) {
        if (a->strategy == "token") {
          f.activations = ActivationScheme::kFp8Token;
        } else if (a->strategy == "tensor") {
          f.activations = ActivationScheme::kFp8Tensor;
        } else if (a->strategy == "group" && a->group_size > 0) {
          f.activations = ActivationScheme::kFp8Group;
          f.activation_group = static_cast<int>(a->group_size);
        } else {
          return Error{akey + "expected fp8 strategy token, tensor or group, got \"" + a->strategy +
                       "\""};
        }
      } else if (a->type == "float" && a->num_bits == 4) {
        f.activations = ActivationScheme::kFp4Group;
      } else {
        return Error{akey + "unsupported activation scheme: " + std::to_string(a->num_bits) +
                     "-bit " + a->type};
      }
    }
    if (found && (found->name() != f.name() || found->activations != f.activations)) {
      return Error{source +
                   ": key 'quantization_config.config_groups': groups with different "
                   "schemes, expected one scheme for every quantized layer"};
    }
    found = f;
  }
  return *found;
}

Result<WeightFormat> parse_modelopt(const nlohmann::json& qc, const JsonReader& r, DType plain,
                                    const std::string& source) {
  // ModelOpt writes quant_algo into quantization_config, or under "quantization" as its
  // hf_quant_config.json does.
  const nlohmann::json* holder = &qc;
  std::string prefix = "quantization_config.";
  if (!r.has("quant_algo") && r.has("quantization") && qc.at("quantization").is_object()) {
    holder = &qc.at("quantization");
    prefix += "quantization.";
  }
  const JsonReader h(*holder, source, prefix);
  std::string algo;
  MOEPLAN_QC_ASSIGN(algo, h.string("quant_algo"));
  if (algo == "FP8") return with(WeightScheme::kFp8Tensor, ActivationScheme::kFp8Tensor, plain);
  if (algo == "FP8_PER_CHANNEL_PER_TOKEN") {
    return with(WeightScheme::kFp8Channel, ActivationScheme::kFp8Token, plain);
  }
  if (algo == "FP8_PB_WO" || algo == "fp8_pb_wo") {
    WeightFormat f = fp8_block(plain, 128, 128);
    f.activations = ActivationScheme::kPlain;
    return f;
  }
  if (algo == "NVFP4") {
    std::int64_t g = 16;
    MOEPLAN_QC_ASSIGN(g, h.integer_or("group_size", 16, 1, 65536));
    return with(WeightScheme::kNvfp4, ActivationScheme::kFp4Group, plain, static_cast<int>(g));
  }
  return h.error("quant_algo",
                 "unknown ModelOpt algorithm \"" + algo +
                     "\", expected FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO or NVFP4");
}

Result<WeightFormat> parse_int4(const JsonReader& r, DType plain, bool awq) {
  std::int64_t bits = 0;
  MOEPLAN_QC_ASSIGN(bits, r.integer("bits", 1, 64));
  if (bits != 4) {
    return r.error("bits", "expected 4 (moeplan models 4-bit weight-only formats), got " +
                               std::to_string(bits));
  }
  std::int64_t group = 128;
  MOEPLAN_QC_ASSIGN(group, r.integer_or("group_size", 128, -1, 65536));
  if (group == 0) return r.error("group_size", "expected a positive size or -1 (per channel)");
  WeightFormat f = with(WeightScheme::kW4A16, ActivationScheme::kPlain, plain,
                        group > 0 ? static_cast<int>(group) : 0);
  // GPTQ checkpoints always store qzeros; AWQ when zero_point is true (its default).
  f.zero_points = true;
  if (awq) MOEPLAN_QC_ASSIGN(f.zero_points, r.boolean_or("zero_point", true));
  return f;
}

}  // namespace

Result<WeightFormat> parse_quantization_config(const nlohmann::json& qc, DType plain,
                                               const std::string& source) {
  if (!qc.is_object()) {
    return Error{source + ": key 'quantization_config': expected an object, got " +
                 describe_json(qc)};
  }
  const JsonReader r(qc, source, "quantization_config.");
  std::string method;
  MOEPLAN_QC_ASSIGN(method, r.string("quant_method"));
  Result<WeightFormat> f = Error{""};
  if (method == "fp8") {
    f = parse_fp8(qc, r, plain);
  } else if (method == "fbgemm_fp8") {
    f = with(WeightScheme::kFp8Channel, ActivationScheme::kFp8Token, plain);
  } else if (method == "compressed-tensors") {
    f = parse_compressed_tensors(qc, r, plain, source);
  } else if (method == "mxfp4") {
    f = with(WeightScheme::kMxfp4, ActivationScheme::kPlain, plain, 32);
  } else if (method == "modelopt") {
    f = parse_modelopt(qc, r, plain, source);
  } else if (method == "gptq" || method == "awq") {
    f = parse_int4(r, plain, method == "awq");
  } else {
    return r.error("quant_method",
                   "unknown quantization method \"" + method +
                       "\", expected fp8, fbgemm_fp8, compressed-tensors, mxfp4, modelopt, gptq "
                       "or awq");
  }
  if (!f) return f.error();
  bool excluded = false;
  MOEPLAN_QC_ASSIGN(excluded, attention_excluded(qc, r));
  f->attention_quantized = !excluded;
  f->source = "quantization_config (" + method + ")";
  return f;
}

}  // namespace moeplan
