// The sharded MoE layer: router, dispatch, grouped expert FFN, TP reduction, combine and the
// shared expert, for the three dispatchers.
#include "kernels/moe_layer.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "kernels/dtype_convert.hpp"
#include "kernels/layer_ops.hpp"

namespace moeplan::kernels {

Status check_kernel_dispatcher(Dispatcher d) {
  if (std::find(std::begin(kKernelDispatchers), std::end(kKernelDispatchers), d) !=
      std::end(kKernelDispatchers)) {
    return Status::Ok();
  }
  return input_error("dispatcher", ": " + dispatcher_name(d) +
                                       " is costed by the planner but not implemented in the "
                                       "kernels yet; expected padded_a2a, allgather or a2av");
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

// Rounds partial sums to the storage dtype, sums them over the TP group, rounds the sum: what a
// GEMM writing `dtype` followed by a TP all-reduce produces.
void tp_reduce(Communicator& tp, DType dtype, std::span<float> data) {
  round_to(dtype, data);
  if (tp.size() > 1) {
    tp.all_reduce_sum(data);
    round_to(dtype, data);
  }
}

UninitVector<float> unpack_all(DType dtype, std::span<const std::uint8_t> bytes, std::size_t n) {
  UninitVector<float> out(n);
  unpack(dtype, bytes.data(), n, out.data());
  return out;
}

struct Routing {
  std::vector<int> ids;        // [T][k]
  std::vector<float> weights;  // [T][k]
};

Routing route(Backend& be, const LayerSpec& s, const RankWeights& w, std::span<const float> x,
              int num_tokens) {
  const OpContext ctx;
  std::vector<float> logits(sz(num_tokens) * sz(s.num_experts));
  be.router_logits(ctx, x, num_tokens, s.hidden, w.router, s.num_experts, logits);
  Routing r;
  r.ids.resize(sz(num_tokens) * sz(s.top_k));
  r.weights.resize(r.ids.size());
  be.route(ctx, s.router, logits, w.score_bias, num_tokens, s.num_experts, s.top_k, r.ids,
           r.weights);
  return r;
}

// Runs the grouped FFN over `rows` grouped by `offsets`, then the TP reduction.
UninitVector<float> run_experts(Backend& be, const RankGroups& g, const LayerSpec& s,
                                const RankWeights& w, std::span<const float> rows,
                                std::span<const int> offsets, PhaseTimes& t) {
  auto t0 = Clock::now();
  UninitVector<float> y(sz(offsets.back()) * sz(s.hidden));  // expert_ffn writes every row
  be.expert_ffn(OpContext{}, rows, offsets, w.experts, s.hidden, s.dtype, y);
  t.experts += since(t0);
  t0 = Clock::now();
  tp_reduce(*g.tp, s.dtype, y);
  t.tp += since(t0);
  return y;
}

// What a dispatcher hands to the combine: expert output rows and, for every local pair
// (token·k + j), the row that holds its expert's output.
struct Dispatched {
  UninitVector<float> rows;
  std::vector<int> pair_row;
};

Dispatched padded_a2a(Backend& be, const RankGroups& g, const LayerSpec& s, const RankWeights& w,
                      std::span<const float> x, const Routing& r, PhaseTimes& t) {
  const int ep = g.ep->size();
  const int e_total = s.num_experts;
  const int n_local = e_total / ep;
  const int h = s.hidden;
  const std::size_t row_bytes = storage_bytes(s.dtype, sz(h));
  auto t0 = Clock::now();

  // Capacity C: the largest per-expert count, all-reduced (MAX) over the EP group.
  std::vector<std::int64_t> count(sz(e_total), 0);
  std::vector<int> pos(r.ids.size());
  for (std::size_t p = 0; p < r.ids.size(); ++p) {
    pos[p] = static_cast<int>(count[sz(r.ids[p])]++);
  }
  std::vector<std::int64_t> cap{*std::max_element(count.begin(), count.end())};
  g.ep->all_reduce_max(cap);
  const int c = static_cast<int>(cap[0]);

  // dispatched[E][C][H], zero padded, in the storage dtype; an equal-split all-to-all.
  std::vector<std::uint8_t> send(sz(e_total) * sz(c) * row_bytes, 0);
  for (std::size_t p = 0; p < r.ids.size(); ++p) {
    const std::size_t slot = sz(r.ids[p]) * sz(c) + sz(pos[p]);
    pack(s.dtype, x.data() + (p / sz(s.top_k)) * sz(h), sz(h), send.data() + slot * row_bytes);
  }
  UninitVector<std::uint8_t> recv(send.size());
  const std::size_t block = sz(n_local) * sz(c) * row_bytes;
  g.ep->all_to_all(send.data(), block, recv.data());

  // recv is [source][local expert][C]; the grouped GEMM wants [local expert][source][C].
  UninitVector<float> rows(sz(n_local) * sz(ep) * sz(c) * sz(h));
  for (int src = 0; src < ep; ++src) {
    for (int j = 0; j < n_local; ++j) {
      const std::size_t from = (sz(src) * sz(n_local) + sz(j)) * sz(c) * row_bytes;
      const std::size_t to = (sz(j) * sz(ep) + sz(src)) * sz(c) * sz(h);
      unpack(s.dtype, recv.data() + from, sz(c) * sz(h), rows.data() + to);
    }
  }
  std::vector<int> offsets(sz(n_local) + 1);
  for (int j = 0; j <= n_local; ++j) offsets[sz(j)] = j * ep * c;
  t.dispatch += since(t0);

  // Every local expert computes ep·C rows, padding included, whatever the real load.
  const UninitVector<float> y = run_experts(be, g, s, w, rows, offsets, t);

  t0 = Clock::now();
  for (int src = 0; src < ep; ++src) {
    for (int j = 0; j < n_local; ++j) {
      const std::size_t from = (sz(j) * sz(ep) + sz(src)) * sz(c) * sz(h);
      const std::size_t to = (sz(src) * sz(n_local) + sz(j)) * sz(c) * row_bytes;
      pack(s.dtype, y.data() + from, sz(c) * sz(h), recv.data() + to);
    }
  }
  g.ep->all_to_all(recv.data(), block, send.data());  // back: send now holds [E][C][H]
  Dispatched d;
  d.rows = unpack_all(s.dtype, send, sz(e_total) * sz(c) * sz(h));
  d.pair_row.resize(r.ids.size());
  for (std::size_t p = 0; p < r.ids.size(); ++p) d.pair_row[p] = r.ids[p] * c + pos[p];
  t.dispatch += since(t0);
  return d;
}

Dispatched allgather(Backend& be, const RankGroups& g, const LayerSpec& s, const RankWeights& w,
                     std::span<const float> x, const Routing& r, int num_global_tokens,
                     PhaseTimes& t) {
  const int ep = g.ep->size();
  const int me = g.ep->rank();
  const int k = s.top_k;
  const int h = s.hidden;
  const int n_local = s.num_experts / ep;
  const std::size_t row_bytes = storage_bytes(s.dtype, sz(h));
  auto t0 = Clock::now();

  // All-gather tokens (storage dtype) and their routing over the EP group.
  std::vector<std::size_t> tok_bytes(sz(ep)), tok_off(sz(ep)), id_bytes(sz(ep)), id_off(sz(ep));
  for (int i = 0; i < ep; ++i) {
    const TokenRange tr = token_range(num_global_tokens, ep, i);
    const auto ii = sz(i);
    tok_bytes[ii] = sz(tr.count) * row_bytes;
    tok_off[ii] = sz(tr.first) * row_bytes;
    id_bytes[ii] = sz(tr.count) * sz(k) * sizeof(int);
    id_off[ii] = sz(tr.first) * sz(k) * sizeof(int);
  }
  const TokenRange mine = token_range(num_global_tokens, ep, me);
  UninitVector<std::uint8_t> x_packed(sz(mine.count) * row_bytes);
  pack(s.dtype, x.data(), sz(mine.count) * sz(h), x_packed.data());
  UninitVector<std::uint8_t> x_all_bytes(sz(num_global_tokens) * row_bytes);
  g.ep->all_gather_v(x_packed.data(), x_packed.size(), x_all_bytes.data(), tok_bytes, tok_off);
  std::vector<int> ids_all(sz(num_global_tokens) * sz(k));
  g.ep->all_gather_v(r.ids.data(), r.ids.size() * sizeof(int), ids_all.data(), id_bytes, id_off);
  const UninitVector<float> x_all = unpack_all(s.dtype, x_all_bytes, sz(num_global_tokens) * sz(h));

  // Local filter: the pairs of every token whose expert lives here, grouped by expert.
  const Permutation perm = be.permute(OpContext{}, ids_all, w.first_expert, n_local);
  UninitVector<float> rows(perm.order.size() * sz(h));
  for (std::size_t i = 0; i < perm.order.size(); ++i) {
    const float* src = x_all.data() + (sz(perm.order[i]) / sz(k)) * sz(h);
    std::copy(src, src + h, rows.data() + i * sz(h));
  }
  t.dispatch += since(t0);

  const UninitVector<float> y = run_experts(be, g, s, w, rows, perm.offsets, t);

  // All-gather-v of every rank's expert rows; each rank keeps the rows of its own tokens.
  t0 = Clock::now();
  std::vector<int> pair_row_all(ids_all.size(), -1);
  std::vector<std::size_t> y_bytes(sz(ep)), y_off(sz(ep));
  std::size_t base = 0;
  for (int i = 0; i < ep; ++i) {
    const Permutation pi = be.permute(OpContext{}, ids_all, i * n_local, n_local);
    for (std::size_t j = 0; j < pi.order.size(); ++j) {
      pair_row_all[sz(pi.order[j])] = static_cast<int>(base + j);
    }
    y_bytes[sz(i)] = pi.order.size() * row_bytes;
    y_off[sz(i)] = base * row_bytes;
    base += pi.order.size();
  }
  UninitVector<std::uint8_t> y_packed(y.size() / sz(h) * row_bytes);
  pack(s.dtype, y.data(), y.size(), y_packed.data());
  UninitVector<std::uint8_t> y_all(base * row_bytes);
  g.ep->all_gather_v(y_packed.data(), y_packed.size(), y_all.data(), y_bytes, y_off);
  Dispatched d;
  d.rows = unpack_all(s.dtype, y_all, base * sz(h));
  const auto first_pair = sz(mine.first) * sz(k);
  d.pair_row.assign(pair_row_all.begin() + static_cast<std::ptrdiff_t>(first_pair),
                    pair_row_all.begin() + static_cast<std::ptrdiff_t>(first_pair + r.ids.size()));
  t.dispatch += since(t0);
  return d;
}

Dispatched a2av(Backend& be, const RankGroups& g, const LayerSpec& s, const RankWeights& w,
                std::span<const float> x, const Routing& r, PhaseTimes& t) {
  const int ep = g.ep->size();
  const int e_total = s.num_experts;
  const int n_local = e_total / ep;
  const int k = s.top_k;
  const int h = s.hidden;
  const std::size_t row_bytes = storage_bytes(s.dtype, sz(h));
  auto t0 = Clock::now();

  // Local pairs sorted by expert: contiguous per destination rank.
  const Permutation out_perm = be.permute(OpContext{}, r.ids, 0, e_total);
  // Count exchange: to rank j, this rank's counts for j's experts.
  std::vector<std::int64_t> send_counts(sz(e_total)), recv_counts(sz(e_total));
  for (int e = 0; e < e_total; ++e) {
    send_counts[sz(e)] = out_perm.offsets[sz(e) + 1] - out_perm.offsets[sz(e)];
  }
  g.ep->all_to_all(send_counts.data(), sz(n_local) * sizeof(std::int64_t), recv_counts.data());

  std::vector<std::size_t> sb(sz(ep)), so(sz(ep)), rb(sz(ep)), ro(sz(ep));
  std::size_t recv_rows = 0;
  for (int i = 0; i < ep; ++i) {
    const auto ii = sz(i);
    const int first_row = out_perm.offsets[ii * sz(n_local)];
    const int last_row = out_perm.offsets[(ii + 1) * sz(n_local)];
    so[ii] = sz(first_row) * row_bytes;
    sb[ii] = sz(last_row - first_row) * row_bytes;
    std::int64_t from_i = 0;
    for (int j = 0; j < n_local; ++j) from_i += recv_counts[ii * sz(n_local) + sz(j)];
    ro[ii] = recv_rows * row_bytes;
    rb[ii] = static_cast<std::size_t>(from_i) * row_bytes;
    recv_rows += static_cast<std::size_t>(from_i);
  }
  std::vector<int> token_of(out_perm.order.size());
  for (std::size_t i = 0; i < token_of.size(); ++i) token_of[i] = out_perm.order[i] / k;
  const UninitVector<std::uint8_t> send = pack_rows(s.dtype, x, h, token_of);
  UninitVector<std::uint8_t> recv(recv_rows * row_bytes);
  g.ep->all_to_all_v(send.data(), sb, so, recv.data(), rb, ro);

  // recv is [source][local expert][rows]; regroup as [local expert][source][rows].
  std::vector<int> offsets(sz(n_local) + 1, 0);
  for (int j = 0; j < n_local; ++j) {
    std::int64_t n = 0;
    for (int i = 0; i < ep; ++i) n += recv_counts[sz(i) * sz(n_local) + sz(j)];
    offsets[sz(j) + 1] = offsets[sz(j)] + static_cast<int>(n);
  }
  // src_row[i][j]: first row from source i for expert j, in recv order and grouped order.
  std::vector<std::size_t> recv_at(sz(ep) * sz(n_local)), grouped_at(sz(ep) * sz(n_local));
  {
    std::size_t at = 0;
    for (int i = 0; i < ep; ++i) {
      for (int j = 0; j < n_local; ++j) {
        recv_at[sz(i) * sz(n_local) + sz(j)] = at;
        at += static_cast<std::size_t>(recv_counts[sz(i) * sz(n_local) + sz(j)]);
      }
    }
    std::vector<std::size_t> cursor(offsets.begin(), offsets.end() - 1);
    for (int i = 0; i < ep; ++i) {
      for (int j = 0; j < n_local; ++j) {
        grouped_at[sz(i) * sz(n_local) + sz(j)] = cursor[sz(j)];
        cursor[sz(j)] += static_cast<std::size_t>(recv_counts[sz(i) * sz(n_local) + sz(j)]);
      }
    }
  }
  UninitVector<float> rows(recv_rows * sz(h));
  for (std::size_t b = 0; b < recv_at.size(); ++b) {
    const auto n = static_cast<std::size_t>(recv_counts[b]);
    unpack(s.dtype, recv.data() + recv_at[b] * row_bytes, n * sz(h),
           rows.data() + grouped_at[b] * sz(h));
  }
  t.dispatch += since(t0);

  const UninitVector<float> y = run_experts(be, g, s, w, rows, offsets, t);

  t0 = Clock::now();
  for (std::size_t b = 0; b < recv_at.size(); ++b) {
    const auto n = static_cast<std::size_t>(recv_counts[b]);
    pack(s.dtype, y.data() + grouped_at[b] * sz(h), n * sz(h),
         recv.data() + recv_at[b] * row_bytes);
  }
  UninitVector<std::uint8_t> back(send.size());
  g.ep->all_to_all_v(recv.data(), rb, ro, back.data(), sb, so);
  Dispatched d;
  d.rows = unpack_all(s.dtype, back, out_perm.order.size() * sz(h));
  d.pair_row.resize(r.ids.size());
  for (std::size_t i = 0; i < out_perm.order.size(); ++i) {
    d.pair_row[sz(out_perm.order[i])] = static_cast<int>(i);
  }
  t.dispatch += since(t0);
  return d;
}

}  // namespace

Status check_layout(const LayerSpec& s, const Layout& l, int world_size) {
  const std::string name = "layout " + l.short_name();
  if (l.group_size() != world_size) {
    return Error{name + ": ep·tp = " + std::to_string(l.group_size()) + " but there are " +
                 std::to_string(world_size) + " ranks; expected ep·tp = rank count"};
  }
  const auto v = models::layout_violation({s.num_experts, s.intermediate, s.shared_intermediate},
                                          l.ep_size, l.tp_size);
  if (!v) return Status::Ok();
  const std::string value = std::to_string(v->value);
  switch (v->rule) {
    case models::LayoutViolation::Rule::kExperts:
      return Error{name + ": num_experts=" + value + " % ep=" + std::to_string(l.ep_size) +
                   " != 0; expected ep to divide the expert count"};
    case models::LayoutViolation::Rule::kExpertWidth:
      return Error{name + ": moe_intermediate_size=" + value + " % tp=" +
                   std::to_string(l.tp_size) + " != 0; expected tp to divide the expert width"};
    case models::LayoutViolation::Rule::kSharedWidth:
      return Error{name + ": shared expert width=" + value + " % tp=" + std::to_string(l.tp_size) +
                   " != 0; expected tp to divide the shared width"};
  }
  return Status::Ok();
}

std::vector<Layout> legal_layouts(const LayerSpec& s, int world_size) {
  std::vector<Layout> out;
  for (int ep = world_size; ep >= 1; --ep) {
    if (world_size % ep != 0) continue;
    const Layout l = Layout::of(ep, world_size / ep);
    if (check_layout(s, l, world_size).ok()) out.push_back(l);
  }
  return out;
}

TokenRange token_range(int num_tokens, int ep_size, int ep_rank) {
  const auto first = static_cast<int>(static_cast<std::int64_t>(num_tokens) * ep_rank / ep_size);
  const auto last =
      static_cast<int>(static_cast<std::int64_t>(num_tokens) * (ep_rank + 1) / ep_size);
  return {first, last - first};
}

RankWeights make_rank_weights(const LayerSpec& s, const Layout& l, int world_rank) {
  RankWeights w;
  w.router = make_router_weight(s);
  w.score_bias = make_score_bias(s);
  w.shared_gate = make_shared_gate(s);
  const int n_local = s.num_experts / l.ep_size;
  w.first_expert = l.ep_rank(world_rank) * n_local;
  for (int j = 0; j < n_local; ++j) {
    w.experts.push_back(make_expert(s, w.first_expert + j, l.tp_rank(world_rank), l.tp_size));
  }
  if (s.shared_intermediate > 0) {
    w.shared = make_shared_expert(s, l.tp_rank(world_rank), l.tp_size);
  }
  return w;
}

RankGroups make_groups(Communicator& world, const Layout& l) {
  const int r = world.rank();
  RankGroups g;
  g.ep = world.split(l.tp_rank(r), l.ep_rank(r));
  g.tp = world.split(l.ep_rank(r), l.tp_rank(r));
  return g;
}

std::vector<float> moe_forward(Backend& be, const RankGroups& g, const LayerSpec& s,
                               const Layout& l, const RankWeights& w, std::span<const float> x,
                               int num_tokens, PhaseTimes* times) {
  PhaseTimes t;
  const auto start = Clock::now();
  const TokenRange mine = token_range(num_tokens, l.ep_size, g.ep->rank());
  auto t0 = Clock::now();
  const Routing r = route(be, s, w, x, mine.count);
  t.router = since(t0);

  Dispatched d;
  switch (l.dispatcher) {
    case Dispatcher::kPaddedA2a: d = padded_a2a(be, g, s, w, x, r, t); break;
    case Dispatcher::kAllGather: d = allgather(be, g, s, w, x, r, num_tokens, t); break;
    case Dispatcher::kA2av: d = a2av(be, g, s, w, x, r, t); break;
    case Dispatcher::kDeepEpNormal:
    case Dispatcher::kDeepEpLl:
      // parse_dispatcher_list and check_layout refuse them before a layer is built.
      MOEPLAN_ASSERT(false, "the DeepEP dispatchers are not implemented in the kernels");
      break;
  }

  UninitVector<float> shared;
  if (s.shared_intermediate > 0) {
    t0 = Clock::now();
    shared.resize(sz(mine.count) * sz(s.hidden));  // shared_expert writes every row
    be.shared_expert(OpContext{}, x, mine.count, s.hidden, w.shared, w.shared_gate, s.dtype,
                     shared);
    t.shared = since(t0);
    t0 = Clock::now();
    tp_reduce(*g.tp, s.dtype, shared);
    t.tp += since(t0);
  }
  t0 = Clock::now();
  std::vector<float> out(sz(mine.count) * sz(s.hidden));
  be.combine(OpContext{}, d.rows, d.pair_row, r.weights, shared, mine.count, s.top_k, s.hidden,
             s.dtype, out);
  t.combine = since(t0);
  t.total = since(start);
  if (times != nullptr) *times = t;
  return out;
}

UninitVector<std::uint8_t> pack_rows(DType dtype, std::span<const float> src, int hidden,
                                     std::span<const int> rows) {
  const std::size_t row_bytes = storage_bytes(dtype, sz(hidden));
  UninitVector<std::uint8_t> out(rows.size() * row_bytes);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    pack(dtype, src.data() + sz(rows[i]) * sz(hidden), sz(hidden), out.data() + i * row_bytes);
  }
  return out;
}

}  // namespace moeplan::kernels
