// MeasuredCosts: curves of measured points, exact hits, log-space interpolation, efficiency-held
// extrapolation, and roofline fallback on a miss.
#include "planner/costs/measured_costs.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

namespace moeplan::planner {

namespace {

constexpr double kRelTolerance = 1e-9;

bool same_x(double a, double b) { return std::abs(a - b) <= kRelTolerance * std::max(a, b); }

/// Adds (x, t) to a curve under construction; duplicates at one x are averaged later.
void add_sample(std::map<double, std::vector<double>>& samples, double x, double t) {
  if (x > 0.0 && t > 0.0) samples[x].push_back(t);
}

CostCurve make_curve(const std::map<double, std::vector<double>>& samples) {
  CostCurve c;
  for (const auto& [x, ts] : samples) {
    c.x.push_back(x);
    c.seconds.push_back(std::accumulate(ts.begin(), ts.end(), 0.0) /
                        static_cast<double>(ts.size()));
  }
  return c;
}

/// The worst of two sources (exact < interp < extrap < miss).
std::string worse(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& s) {
    if (s == kSourceMiss) return 4;
    if (s == kSourceExtrap) return 3;
    if (s == kSourceInterp) return 2;
    if (s == kSourceExact) return 1;
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

bool is_collective_op(const std::string& op) {
  return op == "all_to_all" || op == "all_to_all_v" || op == "all_gather" || op == "all_gather_v" ||
         op == "all_reduce" || op == "reduce_scatter";
}

bool is_elementwise_op(const std::string& op) {
  return op == "router_topk" || op == "permute" || op == "combine_sum" || op == "silu_mul" ||
         op == "sigmoid_gate" || op == "stage" || op == "quantize_fp8" || op == "dequantize_fp8" ||
         op == "combine_reduce" || op == "norm" || op == "rope";
}

constexpr const char* kMoeFusedOp = "moe_fused";

/// Which measured fused-MoE kernel answers a shape when a table has several (lower wins):
/// TensorRT-LLM's CUTLASS path, its default torch flow, DeepGEMM (B200 fp8_block), then any
/// other gated kernel. ReLU² (non-gated) kernels compute another FFN: never used.
int kernel_preference(const std::string& kernel) {
  if (kernel == "moe_torch_flow_cutlass") return 0;
  if (kernel == "moe_torch_flow") return 1;
  if (kernel == "deepgemm") return 2;
  if (kernel == "moe_torch_flow_nongated") return -1;
  return 3;
}

std::string fused_key_text(const MoeFusedQuery& q) {
  return std::string(kMoeFusedOp) + " hidden=" + fmt(q.hidden) + " inter=" + fmt(q.inter) +
         " experts=" + std::to_string(q.num_experts) + " topk=" + std::to_string(q.top_k) +
         " tp=" + std::to_string(q.tp_size) + " ep=" + std::to_string(q.ep_size) +
         " dtype=" + q.table_dtype();
}

bool is_balanced(const MoeFusedQuery& q) {
  if (q.ep_size < 1 || q.num_experts % q.ep_size != 0 ||
      q.rows.size() != static_cast<std::size_t>(q.num_experts / q.ep_size)) {
    return false;
  }
  const double b = q.balanced_rows();
  return std::all_of(q.rows.begin(), q.rows.end(),
                     [b](double m) { return std::abs(m - b) <= 1e-9 * std::max(1.0, b); });
}

}  // namespace

const std::vector<std::string>& planner_ops() {
  static const std::vector<std::string> ops = {
      "gemm",           "router_topk",  "permute",      "combine_sum",    "silu_mul",
      "sigmoid_gate",   "stage",        "quantize_fp8", "dequantize_fp8", "combine_reduce",
      "all_to_all",     "all_to_all_v", "all_gather",   "all_gather_v",   "all_reduce",
      "reduce_scatter", kMoeFusedOp,    "moe_dispatch", "moe_combine",    "attention",
      "norm",           "rope"};
  return ops;
}

double curve_lookup(const CostCurve& c, double x, double (*roofline)(const void*, double),
                    const void* ctx, std::string* source) {
  const std::size_t n = c.x.size();
  const auto it = std::lower_bound(c.x.begin(), c.x.end(), x);
  const auto i = static_cast<std::size_t>(it - c.x.begin());
  if (i < n && same_x(c.x[i], x)) {
    *source = kSourceExact;
    return c.seconds[i];
  }
  if (i > 0 && i < n) {
    // NOTE: time is close to a power law of size between neighbouring points (linear once the
    // op is throughput-bound, flat while it is latency-bound), so interpolate log t in log x.
    const double x0 = c.x[i - 1], x1 = c.x[i];
    const double f = std::log(x / x0) / std::log(x1 / x0);
    *source = kSourceInterp;
    return std::exp(std::log(c.seconds[i - 1]) +
                    f * (std::log(c.seconds[i]) - std::log(c.seconds[i - 1])));
  }
  const std::size_t e = i == 0 ? 0 : n - 1;
  *source = kSourceExtrap;
  const double r_end = roofline(ctx, c.x[e]);
  const double r_x = roofline(ctx, x);
  if (r_end > 0.0 && r_x > 0.0) return c.seconds[e] * r_x / r_end;  // efficiency held
  return c.seconds[e] * x / c.x[e];
}

std::vector<std::string> point_devices(const std::vector<CostPoint>& points) {
  std::set<std::string> s;
  for (const auto& p : points) s.insert(p.device);
  return {s.begin(), s.end()};
}

std::string statistic_name(CostStatistic s) { return s == CostStatistic::kP10 ? "p10" : "median"; }

std::optional<CostStatistic> parse_statistic(const std::string& name) {
  if (name == "median") return CostStatistic::kMedian;
  if (name == "p10") return CostStatistic::kP10;
  return std::nullopt;
}

std::string profiled_gpu_device(const std::string& device, const std::vector<std::string>& known) {
  const std::string prefix = "cuda:";
  if (device.compare(0, prefix.size(), prefix) != 0) return {};
  std::string gpu = device.substr(prefix.size(), device.rfind("/ranks=") - prefix.size());
  // The GPU's name in words of letters and digits, lower case: "nvidia", "h200", "80gb", ...
  std::vector<std::string> words(1);
  for (const char ch : gpu) {
    if (std::isalnum(static_cast<unsigned char>(ch)) != 0) {
      words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  // A bundled device whose name (or its part before '_': b200_sxm → b200) is one of the words;
  // the plain name first.
  std::string found;
  for (const auto& k : known) {
    const std::string base = k.substr(0, k.find('_'));
    if (std::find(words.begin(), words.end(), base) == words.end()) continue;
    if (found.empty() || k == base) found = k;
  }
  return found;
}

Result<std::unique_ptr<MeasuredCosts>> MeasuredCosts::load(
    const CostDb& db, const Cluster& cluster, const std::string& device, CostStatistic statistic,
    std::shared_ptr<const Calibration> calibration) {
  auto listed = db.devices();
  if (!listed) return listed.error();
  const std::vector<std::string>& devices = *listed;
  if (devices.empty()) {
    return Error{db.path() +
                 ": the cost database holds no measured point; expected a profile "
                 "(moeplan profile --out " +
                 db.path() + ")"};
  }
  const auto known = bundled_device_names();
  std::string chosen = device;
  if (chosen.empty()) {
    if (devices.size() == 1) {
      chosen = devices.front();
    } else if (std::find(devices.begin(), devices.end(), cluster.device().name) != devices.end()) {
      chosen = cluster.device().name;
    } else {
      // A CUDA profile of the cluster's GPU ("cuda:NVIDIA H200/ranks=1" for an h200 cluster).
      for (const auto& d : devices) {
        if (profiled_gpu_device(d, known) == cluster.device().name) chosen = d;
      }
    }
  }
  std::string list;
  for (const auto& d : devices) list += (list.empty() ? "" : ", ") + d;
  if (std::find(devices.begin(), devices.end(), chosen) == devices.end()) {
    return Error{db.path() + ": no points for device '" +
                 (chosen.empty() ? cluster.device().name : chosen) + "'; expected one of " + list};
  }
  // NOTE: a database of a GPU moeplan knows (imported tables are named after the device file)
  // answers for that GPU only. A CPU profile (device "cpu:…") may still stand in for a cluster's
  // device, as moeplan-gui allows.
  const std::string gpu = profiled_gpu_device(chosen, known);
  if (!gpu.empty() && gpu != cluster.device().name) {
    return Error{db.path() + ": a CUDA profile of device '" + gpu + "' (" + chosen +
                 "), but cluster '" + cluster.name() + "' is of device '" + cluster.device().name +
                 "'; expected a database of '" + cluster.device().name + "'"};
  }
  if (chosen != cluster.device().name &&
      std::find(known.begin(), known.end(), chosen) != known.end()) {
    return Error{db.path() + ": a cost database of device '" + chosen + "', but cluster '" +
                 cluster.name() + "' is of device '" + cluster.device().name +
                 "'; expected a database of '" + cluster.device().name + "'"};
  }
  auto points = db.points_of(chosen, planner_ops());
  if (!points) return points.error();
  auto out = std::make_unique<MeasuredCosts>(
      *points, cluster,
      kSourceMeasuredPrefix + db.path() +
          (statistic == CostStatistic::kMedian ? "" : " (" + statistic_name(statistic) + ")"),
      statistic, std::move(calibration));
  if (out->device_.empty()) out->device_ = chosen;
  return out;
}

MeasuredCosts::MeasuredCosts(const std::vector<CostPoint>& points, const Cluster& cluster,
                             std::string name, CostStatistic statistic,
                             std::shared_ptr<const Calibration> calibration)
    : name_(std::move(name)), cluster_(cluster), roofline_(cluster, std::move(calibration)) {
  std::map<GemmKey, std::map<double, std::vector<double>>> g;
  std::map<OpKey, std::map<double, std::vector<double>>> e;
  std::map<CollKey, std::map<double, std::vector<double>>> c;
  std::map<CollKey, bool> c_imported;
  std::map<EpKey, std::map<double, std::vector<double>>> ep_samples;
  std::map<AttnKey, std::map<double, std::map<double, std::vector<double>>>> attn;
  std::map<AttnKey, std::map<double, std::vector<double>>> attn_decode;
  // The preferred kernel's samples per fused-MoE key.
  std::map<MoeKey, std::pair<int, std::map<double, std::vector<double>>>> f;
  for (const auto& p : points) {
    if (device_.empty()) device_ = p.device;
    if (p.disposition != Disposition::kPassed) continue;
    const double t = statistic == CostStatistic::kP10 && p.p10_s > 0.0 ? p.p10_s : p.median_s;
    if (p.op == "gemm") {
      add_sample(g[{p.dtype, std::lround(p.n), std::lround(p.k)}], p.m, t);
    } else if (is_elementwise_op(p.op)) {
      add_sample(e[{p.op, p.dtype}], p.m, t);
    } else if (is_collective_op(p.op)) {
      const CollKey key{p.op, p.dtype, p.group_size, static_cast<int>(std::lround(p.n))};
      add_sample(c[key], p.m, t);
      if (is_imported(p.provenance)) c_imported[key] = true;
    } else if (p.op == "moe_dispatch" || p.op == "moe_combine") {
      const std::string impl = shape_field(p.shape, "impl");
      const long sms = shape_int(p.shape, "sms");
      const long hidden = shape_int(p.shape, "hidden"), topk = shape_int(p.shape, "topk");
      const long experts = shape_int(p.shape, "experts"), nodes = shape_int(p.shape, "nodes");
      const std::string phase = p.op == "moe_dispatch" ? "_dispatch" : "_combine";
      std::string kernel;
      if (impl == "deepep_normal" && sms == kDeepEpDefaultSms) kernel = "normal" + phase;
      if (impl == "deepep_ll") kernel = "ll" + phase;
      if (kernel.empty() || hidden <= 0 || topk <= 0 || topk > 1 << 10 || experts <= 0 ||
          experts > 1 << 20 || nodes <= 0 || nodes > 1 << 16 || !(p.m > 0.0)) {
        continue;
      }
      add_sample(ep_samples[{kernel, hidden, static_cast<int>(topk), static_cast<int>(experts),
                             static_cast<int>(nodes)}],
                 p.m, t);
    } else if (p.op == "attention") {
      const long decode = shape_int(p.shape, "decode"), tokens = shape_int(p.shape, "tokens");
      const long context = shape_int(p.shape, "context"), heads = shape_int(p.shape, "heads");
      const long kv = shape_int(p.shape, "kv_heads"), qk = shape_int(p.shape, "qk");
      const long v = shape_int(p.shape, "v");
      if ((decode != 0 && decode != 1) || tokens <= 0 || context <= 0 || heads <= 0 || kv <= 0 ||
          qk <= 0 || v <= 0 || heads > 1 << 16 || kv > 1 << 16 || qk > 1 << 20 || v > 1 << 20) {
        continue;
      }
      const AttnKey key{p.dtype,
                        decode == 1,
                        static_cast<int>(heads),
                        static_cast<int>(kv),
                        static_cast<int>(qk),
                        static_cast<int>(v)};
      if (decode == 1 && p.backend == "cpu") {
        // The CPU kernel's decode streams the cached K/V: its time follows the (sequence,
        // cached token) pairs, one curve (docs/BENCHMARKS.md, "The attention core against its
        // profile"). A GPU's does not (a few long sequences leave SMs idle that many short ones
        // fill): its decode points, as its prefill ones, are curves in sequences per context.
        add_sample(attn_decode[key], static_cast<double>(tokens) * static_cast<double>(context), t);
      } else {
        add_sample(attn[key][static_cast<double>(context)], static_cast<double>(tokens), t);
      }
    } else if (p.op == kMoeFusedOp) {
      // Balanced routing only: the skew of a plan's load comes from its own slot rows.
      if (shape_field(p.shape, "dist") != "balanced") continue;
      const int pref = kernel_preference(shape_field(p.shape, "kernel"));
      const long hidden = shape_int(p.shape, "hidden"), inter = shape_int(p.shape, "inter");
      const long experts = shape_int(p.shape, "experts"), topk = shape_int(p.shape, "topk");
      const long tp = shape_int(p.shape, "tp"), ep = shape_int(p.shape, "ep");
      if (pref < 0 || hidden <= 0 || inter <= 0 || experts <= 0 || topk <= 0 || tp <= 0 ||
          ep <= 0 || experts > 1 << 20 || topk > 1 << 10 || tp > 1 << 16 || ep > 1 << 16) {
        continue;
      }
      const MoeKey key{p.dtype,
                       hidden,
                       inter,
                       static_cast<int>(experts),
                       static_cast<int>(topk),
                       static_cast<int>(tp),
                       static_cast<int>(ep)};
      auto [it, inserted] = f.try_emplace(key, pref, std::map<double, std::vector<double>>{});
      if (pref < it->second.first) it->second = {pref, {}};
      if (pref == it->second.first) add_sample(it->second.second, p.m, t);
    }
  }
  for (const auto& [k, s] : g) gemm_[k] = make_curve(s);
  for (const auto& [k, s] : e) elementwise_[k] = make_curve(s);
  for (const auto& [k, s] : c) collective_[k] = CollCurve{make_curve(s), c_imported[k]};
  for (const auto& [k, s] : f) moe_[k] = make_curve(s.second);
  for (const auto& [k, s] : ep_samples) ep_[k] = make_curve(s);
  for (const auto& [k, by_context] : attn) {
    for (const auto& [ctx, s] : by_context) attention_[k][ctx] = make_curve(s);
  }
  for (const auto& [k, s] : attn_decode) attention_decode_[k] = make_curve(s);
}

void MeasuredCosts::note_miss(const std::string& what) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  misses_.insert(what);
}

std::vector<std::string> MeasuredCosts::misses() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return {misses_.begin(), misses_.end()};
}

namespace {
struct GemmRoof {
  const RooflineCosts* roof;
  double n, k;
  DType dtype;
};
double gemm_roof(const void* ctx, double m) {
  const auto* r = static_cast<const GemmRoof*>(ctx);
  auto t = r->roof->gemm({m, r->n, r->k, r->dtype});
  return t ? t->seconds : 0.0;
}
struct EwRoof {
  const RooflineCosts* roof;
  std::string op;
  DType dtype;
};
double ew_roof(const void* ctx, double bytes) {
  const auto* r = static_cast<const EwRoof*>(ctx);
  auto t = r->roof->elementwise({r->op, bytes, r->dtype});
  return t ? t->seconds : 0.0;
}
struct CollRoof {
  const RooflineCosts* roof;
  const CollectiveQuery* q;
};
double coll_roof(const void* ctx, double bytes) {
  const auto* r = static_cast<const CollRoof*>(ctx);
  CollectiveQuery q = *r->q;
  if (!q.matrix.empty() && q.bytes > 0.0) {
    for (auto& row : q.matrix) {
      for (double& v : row) v *= bytes / r->q->bytes;
    }
  }
  q.bytes = bytes;
  auto t = r->roof->collective(q);
  return t ? t->seconds : 0.0;
}
}  // namespace

Result<CostEstimate> MeasuredCosts::gemm_one(double m, double n, double k, DType dtype) const {
  if (m < 0.0 || n < 0.0 || k < 0.0) return Error{"gemm: expected non-negative m, n, k"};
  if (m == 0.0 || n == 0.0 || k == 0.0) return CostEstimate{0.0, kSourceTrivial};
  const auto it = gemm_.find({std::string(dtype_name(dtype)), std::lround(n), std::lround(k)});
  if (it == gemm_.end() || it->second.x.empty()) {
    note_miss("gemm n=" + fmt(n) + " k=" + fmt(k) + " dtype=" + std::string(dtype_name(dtype)));
    auto r = roofline_.gemm({m, n, k, dtype});
    if (!r) return r.error();
    return CostEstimate{r->seconds, kSourceMiss};
  }
  const GemmRoof ctx{&roofline_, n, k, dtype};
  CostEstimate out;
  out.seconds = curve_lookup(it->second, m, gemm_roof, &ctx, &out.source);
  return out;
}

Result<CostEstimate> MeasuredCosts::gemm(const GemmQuery& q) const {
  return gemm_one(q.m, q.n, q.k, q.dtype);
}

Result<CostEstimate> MeasuredCosts::grouped_gemm(const GroupedGemmQuery& q) const {
  CostEstimate out{0.0, ""};
  for (const double m : q.m) {
    if (m < 0.0) return Error{"grouped_gemm: expected non-negative rows per group"};
    if (m == 0.0) continue;
    // Expected counts: non-empty with probability p, with m / p rows when it is.
    const double p = group_occupancy(m, q.expected);
    auto r = gemm_one(q.expected ? m / p : m, q.n, q.k, q.dtype);
    if (!r) return r.error();
    out.seconds += q.expected ? p * r->seconds : r->seconds;
    out.source = out.source.empty() ? r->source : worse(out.source, r->source);
  }
  if (out.source.empty()) out.source = kSourceTrivial;
  return out;
}

namespace {
struct AttnRoof {
  const RooflineCosts* roof;
  AttentionQuery q;  ///< tokens replaced by the curve's x
};
double attn_roof(const void* ctx, double tokens) {
  const auto* r = static_cast<const AttnRoof*>(ctx);
  AttentionQuery q = r->q;
  q.tokens = tokens;
  auto t = r->roof->attention(q);
  return t ? t->seconds : 0.0;
}
/// Decode: x = sequences × cached tokens at the query's context.
double attn_decode_roof(const void* ctx, double pairs) {
  const auto* r = static_cast<const AttnRoof*>(ctx);
  AttentionQuery q = r->q;
  q.tokens = pairs / std::max(1.0, q.context);
  auto t = r->roof->attention(q);
  return t ? t->seconds : 0.0;
}
/// The worse of two answers' sources (exact < interp < extrap).
std::string worse_source(const std::string& a, const std::string& b) {
  const auto rank = [](const std::string& s) {
    return s == kSourceExact ? 0 : (s == kSourceInterp ? 1 : 2);
  };
  return rank(a) >= rank(b) ? a : b;
}
}  // namespace

Result<CostEstimate> MeasuredCosts::attention(const AttentionQuery& q) const {
  auto roof = roofline_.attention(q);  // validates the query
  if (!roof) return roof.error();
  if (q.tokens == 0.0 || q.heads == 0.0) return CostEstimate{0.0, kSourceTrivial};
  const auto integral = [](double x) { return x >= 1.0 && x < 1e6 && x == std::floor(x); };
  const std::string what = std::string("attention ") + (q.decode ? "decode" : "prefill") +
                           " dtype=" + std::string(dtype_name(q.dtype));
  const bool shaped =
      integral(q.heads) && integral(q.kv_heads) && integral(q.qk_dim) && integral(q.v_dim);
  const AttnKey key{std::string(dtype_name(q.dtype)), q.decode,
                    static_cast<int>(q.heads),        static_cast<int>(q.kv_heads),
                    static_cast<int>(q.qk_dim),       static_cast<int>(q.v_dim)};
  const auto dit = shaped && q.decode ? attention_decode_.find(key) : attention_decode_.end();
  const auto it = shaped ? attention_.find(key) : attention_.end();
  if (dit != attention_decode_.end()) {
    // Decode reads every cached K/V once per sequence: its time follows the (sequence, cached
    // token) pairs, whichever batch and context make them up.
    AttnRoof ctx{&roofline_, q};
    ctx.q.context = std::max(1.0, q.context);
    CostEstimate out;
    out.seconds =
        curve_lookup(dit->second, q.tokens * ctx.q.context, attn_decode_roof, &ctx, &out.source);
    return out;
  }
  if (it == attention_.end() || it->second.empty()) {
    note_miss(what + " heads=" + std::to_string(std::llround(q.heads)) +
              " kv_heads=" + std::to_string(std::llround(q.kv_heads)) +
              " qk=" + std::to_string(std::llround(q.qk_dim)) +
              " v=" + std::to_string(std::llround(q.v_dim)));
    return CostEstimate{roof->seconds, kSourceMiss};
  }
  // One curve in tokens (decode: sequences) per measured context: the query's context between
  // two measured ones is interpolated in log-log between their answers; outside, the nearest
  // context's answer is scaled by the roofline's ratio (the measured efficiency held).
  const auto& by_context = it->second;
  const double context = std::max(1.0, q.context);
  const auto at_context = [&](double c, std::string* source) {
    AttnRoof ctx{&roofline_, q};
    ctx.q.context = c;
    return curve_lookup(by_context.at(c), q.tokens, attn_roof, &ctx, source);
  };
  const auto hi = by_context.lower_bound(context);
  CostEstimate out;
  if (hi != by_context.end() && hi->first == context) {
    out.seconds = at_context(context, &out.source);
  } else if (hi == by_context.begin() || hi == by_context.end()) {
    const double edge = hi == by_context.end() ? std::prev(hi)->first : hi->first;
    std::string src;
    const double t = at_context(edge, &src);
    AttentionQuery qe = q;
    qe.context = edge;
    auto roof_edge = roofline_.attention(qe);
    if (!roof_edge) return roof_edge.error();
    out.seconds = roof_edge->seconds > 0.0 ? t * roof->seconds / roof_edge->seconds : t;
    out.source = kSourceExtrap;
  } else {
    const double c1 = std::prev(hi)->first, c2 = hi->first;
    std::string s1, s2;
    const double t1 = at_context(c1, &s1), t2 = at_context(c2, &s2);
    const double f = std::log(context / c1) / std::log(c2 / c1);
    out.seconds = std::exp(std::log(t1) + f * (std::log(t2) - std::log(t1)));
    out.source = worse_source(worse_source(s1, s2), kSourceInterp);
  }
  return out;
}

Result<CostEstimate> MeasuredCosts::elementwise(const ElementwiseQuery& q) const {
  if (q.bytes < 0.0) return Error{"elementwise '" + q.op + "': expected non-negative bytes"};
  if (q.bytes == 0.0) return CostEstimate{0.0, kSourceTrivial};
  const auto it = elementwise_.find({q.op, std::string(dtype_name(q.dtype))});
  if (it == elementwise_.end() || it->second.x.empty()) {
    note_miss(q.op + " dtype=" + std::string(dtype_name(q.dtype)));
    auto r = roofline_.elementwise(q);
    if (!r) return r.error();
    return CostEstimate{r->seconds, kSourceMiss};
  }
  const EwRoof ctx{&roofline_, q.op, q.dtype};
  CostEstimate out;
  out.seconds = curve_lookup(it->second, q.bytes, ew_roof, &ctx, &out.source);
  return out;
}

const MeasuredCosts::CollCurve* MeasuredCosts::find_collective(const std::string& op,
                                                               const std::string& dt, int g,
                                                               int num_groups) const {
  // Prefer the curve measured with as many concurrent groups as the query runs; else the one
  // with the nearest count.
  const CollCurve* best = nullptr;
  int best_distance = std::numeric_limits<int>::max();
  for (auto it = collective_.lower_bound({op, dt, g, 0});
       it != collective_.end() && std::get<0>(it->first) == op && std::get<1>(it->first) == dt &&
       std::get<2>(it->first) == g;
       ++it) {
    const int distance = std::abs(std::get<3>(it->first) - num_groups);
    if (!it->second.curve.x.empty() && distance < best_distance) {
      best = &it->second;
      best_distance = distance;
    }
  }
  return best;
}

Result<CostEstimate> MeasuredCosts::collective(const CollectiveQuery& q) const {
  // Validates groups and matrix the same way the roofline does.
  auto roof = roofline_.collective(q);
  if (!roof) return roof.error();
  const int g = q.group_size();
  if (g <= 1 || !(q.bytes > 0.0)) return CostEstimate{0.0, kSourceTrivial};
  const std::string op = collective_name(q.op);
  const std::string dt(dtype_name(q.dtype));
  const int num_groups = static_cast<int>(q.groups.size());
  const CollCurve* best = find_collective(op, dt, g, num_groups);
  const CollectiveOp even = even_collective(q.op);
  bool proxy = false;
  if (best == nullptr && even != q.op) {
    best = find_collective(collective_name(even), dt, g, num_groups);
    proxy = best != nullptr && best->imported;  // profiles measure their -v collectives
    if (!proxy) best = nullptr;
  }
  if (best == nullptr) {
    note_miss(op + " group_size=" + std::to_string(g) + " dtype=" + dt);
    return CostEstimate{roof->seconds, kSourceMiss};
  }
  if (best->imported && !groups_inside_nvlink_domain(cluster_, q)) {
    note_miss(op + " group_size=" + std::to_string(g) + " dtype=" + dt +
              " across NVLink domains (the imported NCCL tables are measured inside one)");
    return CostEstimate{roof->seconds, kSourceMiss};
  }
  CostEstimate out;
  if (!proxy) {
    const CollRoof ctx{&roofline_, &q};
    out.seconds = curve_lookup(best->curve, q.bytes, coll_roof, &ctx, &out.source);
    return out;
  }
  const CollectiveQuery even_q{even, q.groups, even_collective_bytes(q), {}, q.dtype};
  auto roof_even = roofline_.collective(even_q);
  if (!roof_even) return roof_even.error();
  const CollRoof ctx{&roofline_, &even_q};
  out.seconds = curve_lookup(best->curve, even_q.bytes, coll_roof, &ctx, &out.source);
  if (roof_even->seconds > 0.0) out.seconds *= roof->seconds / roof_even->seconds;
  out.source = worse(out.source, kSourceExtrap);
  return out;
}

bool MeasuredCosts::has_fused_moe(const std::string& table_dtype) const {
  (void)table_dtype;  // a GPU database answers every dtype: a missing one is a miss
  return !moe_.empty();
}

const CostCurve* MeasuredCosts::moe_curve(const MoeFusedQuery& q) const {
  const MoeKey key{q.table_dtype(),
                   std::lround(q.hidden),
                   std::lround(q.inter),
                   q.num_experts,
                   q.top_k,
                   q.tp_size,
                   q.ep_size};
  const auto it = moe_.find(key);
  return it == moe_.end() || it->second.x.empty() ? nullptr : &it->second;
}

namespace {
struct FusedRoof {
  const RooflineCosts* roof;
  const MoeFusedQuery* q;
};
/// The roofline's fused time of the query's shape at `tokens` tokens, routed evenly.
double fused_roof(const void* ctx, double tokens) {
  const auto* r = static_cast<const FusedRoof*>(ctx);
  MoeFusedQuery q = *r->q;
  q.tokens = tokens;
  q.rows_in = 0.0;     // as measured: every token through the kernel
  q.expected = false;  // as measured: the even routing's counts
  auto t = r->roof->moe_fused(q.balanced());
  return t ? t->seconds : 0.0;
}
}  // namespace

Result<CostEstimate> MeasuredCosts::moe_fused(const MoeFusedQuery& q) const {
  auto roof = roofline_.moe_fused(q);
  if (!roof) return roof.error();
  const CostCurve* curve = moe_curve(q);
  if (curve == nullptr) {
    note_miss(fused_key_text(q));
    return CostEstimate{roof->seconds, kSourceMiss};
  }
  if (!(q.tokens > 0.0)) return CostEstimate{0.0, kSourceTrivial};
  const FusedRoof ctx{&roofline_, &q};
  CostEstimate out;
  out.seconds = curve_lookup(*curve, q.tokens, fused_roof, &ctx, &out.source);
  const bool other_rows_in =
      q.rows_in > 0.0 && std::abs(q.rows_in - q.tokens) > 1e-9 * std::max(1.0, q.tokens);
  // Expected counts leave some slots empty where the tables' even routing fills every one.
  bool other_occupancy = false;
  if (q.expected) {
    double last_m = -1.0;  // a uniform load repeats one value
    for (const double m : q.rows) {
      if (m == last_m) continue;
      last_m = m;
      if (std::abs(group_occupancy(m, true) - group_occupancy(m, false)) > 1e-6) {
        other_occupancy = true;
        break;
      }
    }
  }
  if (!is_balanced(q) || other_rows_in || other_occupancy) {
    // The tables route `tokens` evenly through the kernel; this rank's rows are not even, or
    // another number of rows passes its kernel, or fewer of its slots are non-empty: hold the
    // measured efficiency and scale by the roofline's ratio of this rank to the measured case.
    const double balanced = fused_roof(&ctx, q.tokens);
    if (balanced > 0.0) out.seconds *= roof->seconds / balanced;
    out.source = worse(out.source, kSourceExtrap);
  }
  return out;
}

namespace {
struct EpRoof {
  const RooflineCosts* roof;
  const EpKernelQuery* q;
};
/// The roofline's time of the query's kernel with its traffic scaled to `tokens` per rank.
double ep_roof(const void* ctx, double tokens) {
  const auto* r = static_cast<const EpRoof*>(ctx);
  EpKernelQuery q = *r->q;
  const double f = r->q->tokens > 0.0 ? tokens / r->q->tokens : 0.0;
  for (auto& hop : q.hops) {
    hop.bytes *= f;
    for (auto& row : hop.matrix) {
      for (double& v : row) v *= f;
    }
  }
  q.tokens = tokens;
  auto t = r->roof->ep_kernel(q);
  return t ? t->seconds : 0.0;
}
}  // namespace

Result<CostEstimate> MeasuredCosts::ep_kernel(const EpKernelQuery& q) const {
  // A database without DeepEP kernel tables, on a device with no calibrated DeepEP form (a CPU
  // profile, whose dispatchers run over its measured collectives), prices the kernel from its
  // hops with its own collectives, each labelled with where it came from. With a calibrated
  // form (fitted on measured DeepEP kernels) a missing table falls back to that form.
  if (ep_.empty() && !roofline_.calibrated_ep_kernel(q)) return CostSource::ep_kernel(q);
  auto roof = roofline_.ep_kernel(q);
  if (!roof) return roof.error();
  const std::string kernel = ep_kernel_name(q.mode, q.phase);
  const auto it = ep_.find({kernel, q.hidden, q.top_k, q.num_experts, q.num_nodes});
  if (it == ep_.end()) {
    note_miss("deepep " + kernel + " hidden=" + std::to_string(q.hidden) +
              " topk=" + std::to_string(q.top_k) + " experts=" + std::to_string(q.num_experts) +
              " nodes=" + std::to_string(q.num_nodes));
    return CostEstimate{roof->seconds, kSourceMiss};
  }
  if (!(q.tokens > 0.0)) return CostEstimate{0.0, kSourceTrivial};
  const EpRoof ctx{&roofline_, &q};
  CostEstimate out;
  out.seconds = curve_lookup(it->second, q.tokens, ep_roof, &ctx, &out.source);
  return out;
}

DeviceSpec derive_device_spec(const std::vector<CostPoint>& points, const std::string& device,
                              double memory_bytes) {
  DeviceSpec d;
  d.name = device;
  d.display_name = device + " (derived from its profile)";
  d.hbm_bytes = memory_bytes;
  for (const auto& p : points) {
    if (p.device != device || p.disposition != Disposition::kPassed || !(p.median_s > 0.0)) {
      continue;
    }
    if (p.op == "gemm") {
      d.peak_fp32_flops = std::max(d.peak_fp32_flops, p.flops / p.median_s);
    } else if (p.op == "attention") {
      // The attention core's two GEMMs bound the peak from below as a GEMM does, and the bytes
      // it streams (the KV cache in decode) the memory bandwidth.
      d.peak_fp32_flops = std::max(d.peak_fp32_flops, p.flops / p.median_s);
      d.hbm_bandwidth = std::max(d.hbm_bandwidth, p.bytes / p.median_s);
    } else if (is_elementwise_op(p.op)) {
      d.hbm_bandwidth = std::max(d.hbm_bandwidth, p.bytes / p.median_s);
    } else if (is_collective_op(p.op)) {
      d.nvlink_bandwidth = std::max(d.nvlink_bandwidth, p.bus_bandwidth);
    }
  }
  d.peak_bf16_flops = d.peak_fp32_flops;
  d.peak_fp8_flops = d.peak_fp32_flops;
  d.nic_bandwidth = d.nvlink_bandwidth;
  return d;
}

double derive_link_latency(const std::vector<CostPoint>& points, const std::string& device) {
  double best = 0.0;
  for (const auto& p : points) {
    if (p.device != device || p.disposition != Disposition::kPassed || !is_collective_op(p.op) ||
        !(p.median_s > 0.0)) {
      continue;
    }
    best = best == 0.0 ? p.median_s : std::min(best, p.median_s);
  }
  return best;
}

}  // namespace moeplan::planner
