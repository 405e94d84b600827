// `verify`: the sharded layer against the dense reference.
#include "kernels/verify.hpp"

#include <algorithm>

#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "kernels/case_lists.hpp"
#include "kernels/fault_inject.hpp"
#include "kernels/reference.hpp"
#include "models/registry.hpp"

namespace moeplan::kernels {

Result<VerifyRequest> make_verify_request(const VerifyOptions& o, int world_size) {
  VerifyRequest req;
  auto m = models::load_model(o.model);
  if (!m) return m.error();
  MOEPLAN_TRY_STATUS(models::apply_weights_choice(*m, o.weights));
  m->weights = kernel_run_format(m->weights);
  req.model = *m;
  req.scale = o.scale;
  req.seed = o.seed;
  if (o.backend != "cpu" && o.backend != "cuda") {
    return input_error("backend", ": expected cpu or cuda, got '" + o.backend + "'");
  }
  req.backend = o.backend;
  auto tokens = parse_token_list(o.tokens, kMaxVerifyTokens, 1);
  if (!tokens) return tokens.error();
  req.token_counts = *tokens;
  auto dtypes = parse_storage_dtype_list(o.dtypes);
  if (!dtypes) return dtypes.error();
  req.dtypes = *dtypes;
  auto spec = verify_spec(req, DType::kFp32);
  if (!spec) return spec.error();
  auto layouts = parse_layout_list(o.layouts, *spec, world_size, true, req.model.name);
  if (!layouts) return layouts.error();
  // fp8 blocks and 4-bit groups must not straddle two TP slices (the frameworks refuse such a
  // split too).
  std::string format_why;
  for (const Layout& l : *layouts) {
    if (auto v = weight_slice_violation(*spec, l.tp_size)) {
      const std::string note = "every dispatcher on " + l.short_name() + ": " + *v;
      if (std::find(req.skipped.begin(), req.skipped.end(), note) == req.skipped.end()) {
        req.skipped.push_back(note);
      }
      format_why = *v;
    } else {
      req.layouts.push_back(l);
    }
  }
  if (req.layouts.empty()) return input_error("layouts", ": " + format_why);
  auto dispatchers = parse_dispatcher_list(o.dispatchers);
  if (!dispatchers) return dispatchers.error();
  req.dispatchers = *dispatchers;
  if (o.ranks_per_node < 0 || (o.ranks_per_node > 0 && world_size % o.ranks_per_node != 0)) {
    return input_error("ranks-per-node", ": expected a divisor of the " +
                                             std::to_string(world_size) + " ranks, got " +
                                             std::to_string(o.ranks_per_node));
  }
  if (o.ll_max_tokens < 0) {
    return input_error("ll-max-tokens",
                       ": expected 0 (sized to the largest rank) or a positive "
                       "token count, got " +
                           std::to_string(o.ll_max_tokens));
  }
  req.dispatch.ranks_per_node = o.ranks_per_node;
  req.dispatch.ll_max_tokens = o.ll_max_tokens;
  // A dispatcher named on the command line must run somewhere; "all" leaves out what cannot run
  // and says so.
  const bool all = o.dispatchers == "all";
  for (const Dispatcher d : req.dispatchers) {
    int ran = 0;
    std::string why;
    for (const Layout& l : req.layouts) {
      for (const int t : req.token_counts) {
        Layout ld = l;
        ld.dispatcher = d;
        if (auto v = kernel_dispatch_violation(ld, t, req.dispatch)) {
          // Whether the reason is the token count (deepep_ll's buffer) or the layout.
          DispatchOptions any_tokens = req.dispatch;
          any_tokens.ll_max_tokens = 0;
          const bool by_tokens = !kernel_dispatch_violation(ld, t, any_tokens);
          const std::string note = dispatcher_name(d) + " on " + l.short_name() +
                                   (by_tokens ? " at " + std::to_string(t) + " tokens" : "") +
                                   ": " + *v;
          if (std::find(req.skipped.begin(), req.skipped.end(), note) == req.skipped.end()) {
            req.skipped.push_back(note);
          }
          if (why.empty()) why = *v;
        } else {
          ++ran;
        }
      }
    }
    if (ran == 0 && !all) return input_error("dispatcher", ": " + why);
  }
  MOEPLAN_TRY_STATUS(check_request(req, world_size));
  if (case_count(req) == 0) {
    return input_error("dispatcher", ": no layout of the request runs any of its dispatchers");
  }
  return req;
}

bool runs(const VerifyRequest& r, const Layout& layout, Dispatcher d, int tokens) {
  Layout l = layout;
  l.dispatcher = d;
  return !kernel_dispatch_violation(l, tokens, r.dispatch);
}

int case_count(const VerifyRequest& r) {
  int n = 0;
  for (const Layout& l : r.layouts) {
    for (const Dispatcher d : r.dispatchers) {
      for (const int t : r.token_counts) n += runs(r, l, d, t) ? 1 : 0;
    }
  }
  return n * static_cast<int>(r.dtypes.size());
}

Status check_request(const VerifyRequest& r, int world_size) {
  if (r.token_counts.empty() || r.dtypes.empty() || r.layouts.empty() || r.dispatchers.empty()) {
    return Error{"verify: nothing to run (no token counts, dtypes, layouts or dispatchers)"};
  }
  for (const int t : r.token_counts) {
    if (t < 1)
      return input_error("tokens", ": expected positive token counts, got " + std::to_string(t));
  }
  auto spec = verify_spec(r, DType::kFp32);
  if (!spec) return spec.error();
  for (const Layout& l : r.layouts) {
    MOEPLAN_TRY_STATUS(check_layout(*spec, l, world_size));
    if (auto v = weight_slice_violation(*spec, l.tp_size)) {
      return input_error("layouts", ": " + l.short_name() + ": " + *v);
    }
  }
  auto be = make_backend(r.backend, r.device);
  if (!be) return be.error();
  return Status::Ok();
}

Result<LayerSpec> verify_spec(const VerifyRequest& r, DType dtype) {
  auto spec = LayerSpec::from_model(r.model, r.scale, dtype, r.seed);
  if (!spec) return spec.error();
  MOEPLAN_TRY_STATUS(apply_weight_format(*spec, r.model.weights));
  return spec;
}

std::vector<VerifyRow> run_verify(Communicator& world, const VerifyRequest& req,
                                  const std::function<void(int, int, const VerifyRow&)>& progress) {
  auto made = make_backend(req.backend, req.device);
  if (!made) throw std::runtime_error(made.error().message);
  std::unique_ptr<Backend> be = std::move(*made);
  const int me = world.rank();
  const int world_size = world.size();
  std::vector<VerifyRow> rows;
  const int total = case_count(req);
  ReferenceBounds extra;
  const LayerSpec fp32_spec = *verify_spec(req, DType::kFp32);
  // The backend's fp8 GEMM accumulation (fp8 tensor cores keep fewer bits than fp32).
  extra.fp8_accumulation = fp8_accumulation_of(*be, fp32_spec);
  for (const Dispatcher d : req.dispatchers) {
    extra.fp8_inputs = extra.fp8_inputs || sends_fp8(fp32_spec, d);
  }
  int done = 0;
  for (const DType dtype : req.dtypes) {
    const LayerSpec spec = *verify_spec(req, dtype);
    const int h = spec.hidden;
    for (const int tokens : req.token_counts) {
      // One reference per tp_slices (one in all unless the activations are per token).
      std::map<int, ReferenceOutput> refs;
      double max_ref = 0.0;
      const std::vector<float> x_all = me == 0 ? make_input(spec, 0, tokens) : std::vector<float>{};
      const auto reference = [&](int tp) -> const ReferenceOutput& {
        const int slices = ref_tp_slices(spec, tp);
        auto it = refs.find(slices);
        if (it == refs.end()) {
          ReferenceBounds b = extra;
          b.tp_slices = slices;
          it = refs.emplace(slices, reference_forward(spec, x_all, tokens, b)).first;
        }
        return it->second;
      };
      if (me == 0) {
        for (const float v : reference(1).output)
          max_ref = std::max(max_ref, static_cast<double>(std::fabs(v)));
      }
      for (const Layout& layout : req.layouts) {
        const RankGroups groups = make_groups(world, layout, req.dispatch.ranks_per_node);
        const RankWeights weights = make_rank_weights(spec, layout, me);
        const TokenRange tr = token_range(tokens, layout.ep_size, layout.ep_rank(me));
        const std::vector<float> x = make_input(spec, tr.first, tr.count);
        for (const Dispatcher d : req.dispatchers) {
          if (!runs(req, layout, d, tokens)) continue;  // listed in req.skipped
          Layout with_dispatcher = layout;
          with_dispatcher.dispatcher = d;
          fault_point(me);
          world.barrier();
          PhaseTimes times;
          const std::vector<float> out = moe_forward(*be, groups, spec, with_dispatcher, weights, x,
                                                     tokens, &times, req.dispatch);
          std::vector<std::int64_t> ns{static_cast<std::int64_t>(times.total * 1e9)};
          world.all_reduce_max(ns);

          // Gather every rank's output at rank 0 (an all-to-all-v that sends only to rank 0).
          const auto ws = static_cast<std::size_t>(world_size);
          std::vector<std::size_t> sb(ws, 0), so(ws, 0), rb(ws, 0), ro(ws, 0);
          sb[0] = out.size() * sizeof(float);
          std::vector<TokenRange> ranges(ws);
          std::size_t at = 0;
          for (int r = 0; r < world_size; ++r) {
            ranges[static_cast<std::size_t>(r)] =
                token_range(tokens, layout.ep_size, layout.ep_rank(r));
            if (me == 0) {
              rb[static_cast<std::size_t>(r)] =
                  static_cast<std::size_t>(ranges[static_cast<std::size_t>(r)].count) *
                  static_cast<std::size_t>(h) * sizeof(float);
              ro[static_cast<std::size_t>(r)] = at;
              at += rb[static_cast<std::size_t>(r)];
            }
          }
          std::vector<float> all(at / sizeof(float));
          world.all_to_all_v(out.data(), sb, so, all.data(), rb, ro);

          if (me == 0) {
            VerifyRow row;
            row.layout = with_dispatcher;
            row.dtype = dtype;
            row.num_tokens = tokens;
            row.layer_ms = static_cast<double>(ns[0]) * 1e-6;
            row.max_abs_ref = max_ref;
            bool ok = true;
            const ReferenceOutput& ref = reference(layout.tp_size);
            const std::vector<float>& expected = reference_of(ref, spec, d);
            const std::vector<float>& bounds = bound_of(ref, spec, d);
            for (int r = 0; r < world_size; ++r) {
              const TokenRange rr = ranges[static_cast<std::size_t>(r)];
              const float* got = all.data() + ro[static_cast<std::size_t>(r)] / sizeof(float);
              for (std::size_t i = 0;
                   i < static_cast<std::size_t>(rr.count) * static_cast<std::size_t>(h); ++i) {
                const std::size_t ri =
                    static_cast<std::size_t>(rr.first) * static_cast<std::size_t>(h) + i;
                const double diff = std::fabs(static_cast<double>(got[i]) - expected[ri]);
                const double bound = bounds[ri];
                if (!(diff <= bound)) ok = false;  // NaN fails too
                row.max_abs_diff = std::max(row.max_abs_diff, diff);
                if (bound > 0.0) row.max_bound_use = std::max(row.max_bound_use, diff / bound);
              }
            }
            row.max_rel_diff = max_ref > 0.0 ? row.max_abs_diff / max_ref : row.max_abs_diff;
            row.passed = ok;
            rows.push_back(row);
            ++done;
            if (progress) progress(done, total, rows.back());
          }
        }
      }
    }
  }
  return rows;
}

}  // namespace moeplan::kernels
