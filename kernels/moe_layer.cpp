// The sharded MoE layer: router, dispatch, grouped expert FFN, TP reduction, combine and the
// shared expert, for the five dispatchers (the two of DeepEP with node and rail groups).
#include "kernels/moe_layer.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <optional>

#include "kernels/dtype_convert.hpp"
#include "kernels/fp8.hpp"
#include "kernels/layer_ops.hpp"
#include "models/index.hpp"

namespace moeplan::kernels {

namespace {

using Clock = std::chrono::steady_clock;

/// A phase's start: wall time, and the backend's device clock when it has one.
struct Stamp {
  Clock::time_point wall;
  std::optional<double> device;
};
Stamp stamp(const Backend& be) { return {Clock::now(), be.device_seconds()}; }
/// Seconds since `t0`: the device's kernel time when the backend keeps one (a GPU layer's
/// phases are its kernels, as the profile times its ops), else wall time.
double since(const Backend& be, const Stamp& t0) {
  if (t0.device) return *be.device_seconds() - *t0.device;
  return std::chrono::duration<double>(Clock::now() - t0.wall).count();
}

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
  std::vector<float> logits(uz(num_tokens) * uz(s.num_experts));
  be.router_logits(ctx, x, num_tokens, s.hidden, w.router, s.num_experts, logits);
  Routing r;
  r.ids.resize(uz(num_tokens) * uz(s.top_k));
  r.weights.resize(r.ids.size());
  be.route(ctx, s.router, logits, w.score_bias, num_tokens, s.num_experts, s.top_k, r.ids,
           r.weights);
  return r;
}

// Runs the grouped FFN over `rows` grouped by `offsets`, then the TP reduction.
UninitVector<float> run_experts(Backend& be, const RankGroups& g, const LayerSpec& s,
                                const RankWeights& w, std::span<const float> rows,
                                std::span<const int> offsets, PhaseTimes& t) {
  auto t0 = stamp(be);
  UninitVector<float> y(uz(offsets.back()) * uz(s.hidden));  // expert_ffn writes every row
  be.expert_ffn(OpContext{}, rows, offsets, w.experts, s.hidden, s.dtype, y);
  t.experts += since(be, t0);
  t0 = stamp(be);
  tp_reduce(*g.tp, s.dtype, y);
  t.tp += since(be, t0);
  return y;
}

// The pairs (token·k + j) of `ids` whose expert lives on this rank, grouped by local expert, and
// their tokens' rows gathered from `x` [*][H] in that order: what the grouped FFN takes.
struct LocalRows {
  Permutation perm;
  UninitVector<float> rows;
};
LocalRows gather_local_rows(Backend& be, std::span<const int> ids, std::span<const float> x, int k,
                            int h, int first_expert, int n_local) {
  LocalRows out{be.permute(OpContext{}, ids, first_expert, n_local), {}};
  out.rows = UninitVector<float>(out.perm.order.size() * uz(h));
  for (std::size_t i = 0; i < out.perm.order.size(); ++i) {
    const float* src = x.data() + (uz(out.perm.order[i]) / uz(k)) * uz(h);
    std::copy(src, src + h, out.rows.data() + i * uz(h));
  }
  return out;
}

// Values per fp8 scale of the DeepEP dispatch payload (DeepSeek-V3's activation groups).
constexpr int kFp8Group = 128;

// Tokens quantized once for the DeepEP dispatch: fp8 e4m3 values and one fp32 scale per 128.
struct Fp8Rows {
  int hidden = 0;
  int groups = 0;
  UninitVector<std::uint8_t> q;  // [n][H]
  UninitVector<float> scales;    // [n][groups]
  std::size_t bytes() const { return uz(hidden) + uz(groups) * sizeof(float); }
  // Writes row `i` (values, then scales) to `dst`.
  void write(int i, std::uint8_t* dst) const {
    std::memcpy(dst, q.data() + uz(i) * uz(hidden), uz(hidden));
    std::memcpy(dst + hidden, scales.data() + uz(i) * uz(groups), uz(groups) * sizeof(float));
  }
};

Fp8Rows quantize_rows(std::span<const float> x, int n, int h) {
  Fp8Rows r;
  r.hidden = h;
  r.groups = (h + kFp8Group - 1) / kFp8Group;
  r.q = UninitVector<std::uint8_t>(uz(n) * uz(h));
  r.scales = UninitVector<float>(uz(n) * uz(r.groups));
  for (int i = 0; i < n; ++i) {
    quantize_blocks(x.subspan(uz(i) * uz(h), uz(h)), 1, h, 1, kFp8Group,
                    std::span(r.q.data() + uz(i) * uz(h), uz(h)),
                    std::span(r.scales.data() + uz(i) * uz(r.groups), uz(r.groups)));
  }
  return r;
}

// Dequantizes one wire row (values, then scales) into `out` [H], stored in the activation dtype
// the experts compute in (as DeepEP's receivers dequantize for bf16 experts).
void dequantize_row(const std::uint8_t* src, int h, DType dtype, std::vector<float>& scale,
                    float* out) {
  const int groups = (h + kFp8Group - 1) / kFp8Group;
  scale.resize(uz(groups));
  std::memcpy(scale.data(), src + h, uz(groups) * sizeof(float));
  dequantize_blocks(std::span(src, uz(h)), scale, 1, h, 1, kFp8Group, std::span(out, uz(h)));
  round_to(dtype, std::span(out, uz(h)));
}

// The dispatch payload of a layer's tokens. In the storage dtype; with fp8 weights — whose GEMMs
// quantize their inputs to e4m3 in 1 × 128 groups anyway — each token quantized once to fp8
// e4m3 with one fp32 scale per 128 values (as the DeepEP dispatchers always send, and as the
// planner prices every dispatcher's payload for fp8 activations: dispatch_row_bytes), and
// dequantized on arrival. The return trip (combine) stays in the dtype.
struct Payload {
  DType dtype = DType::kFp32;
  int hidden = 0;
  bool fp8 = false;
  Fp8Rows q;  // fp8: the tokens quantized once

  std::size_t row_bytes() const { return fp8 ? q.bytes() : storage_bytes(dtype, uz(hidden)); }
  // Writes token `t` of `x` to `dst` (row_bytes()).
  void write(std::span<const float> x, int t, std::uint8_t* dst) const {
    if (fp8) {
      q.write(t, dst);
    } else {
      pack(dtype, x.data() + uz(t) * uz(hidden), uz(hidden), dst);
    }
  }
  // Reads `n` consecutive rows at `src` into `out` [n][H].
  void read(const std::uint8_t* src, std::size_t n, float* out) const {
    if (!fp8) {
      unpack(dtype, src, n * uz(hidden), out);
      return;
    }
    std::vector<float> scale;
    for (std::size_t i = 0; i < n; ++i) {
      dequantize_row(src + i * row_bytes(), hidden, dtype, scale, out + i * uz(hidden));
    }
  }
};

Payload make_payload(const LayerSpec& s, std::span<const float> x, int num_tokens) {
  Payload p;
  p.dtype = s.dtype;
  p.hidden = s.hidden;
  p.fp8 = s.fp8();
  if (p.fp8) p.q = quantize_rows(x, num_tokens, s.hidden);
  return p;
}

// What a dispatcher hands to the combine: expert output rows and, for every local pair
// (token·k + j), the row that holds its expert's output. A dispatcher that reduces on the way
// back (deepep_normal) hands `per_token` rows per token with their own `weights` instead.
struct Dispatched {
  UninitVector<float> rows;
  std::vector<int> pair_row;
  int per_token = 0;           // 0: top_k rows per token, weighted by the routing weights
  std::vector<float> weights;  // [tokens][per_token] when per_token > 0
};

// The expert outputs returned in the order the pairs were sent (sorted by expert: `sent`), as
// the combine takes them: row i is pair sent.order[i]'s.
Dispatched returned_by_expert(DType dtype, std::span<const std::uint8_t> back,
                              const Permutation& sent, std::size_t pairs, int h) {
  Dispatched d;
  d.rows = unpack_all(dtype, back, sent.order.size() * uz(h));
  d.pair_row.resize(pairs);
  for (std::size_t i = 0; i < sent.order.size(); ++i) {
    d.pair_row[uz(sent.order[i])] = static_cast<int>(i);
  }
  return d;
}

Dispatched padded_a2a(Backend& be, const RankGroups& g, const LayerSpec& s, const RankWeights& w,
                      std::span<const float> x, const Routing& r, PhaseTimes& t) {
  const int ep = g.ep->size();
  const int e_total = s.num_experts;
  const int n_local = e_total / ep;
  const int h = s.hidden;
  const std::size_t row_bytes = storage_bytes(s.dtype, uz(h));  // the way back
  auto t0 = stamp(be);
  const Payload pl = make_payload(s, x, static_cast<int>(x.size() / uz(h)));
  const std::size_t in_bytes = pl.row_bytes();
  t.dispatch_row_bytes = in_bytes;

  // Capacity C: the largest per-expert count, all-reduced (MAX) over the EP group.
  std::vector<std::int64_t> count(uz(e_total), 0);
  std::vector<int> pos(r.ids.size());
  for (std::size_t p = 0; p < r.ids.size(); ++p) {
    pos[p] = static_cast<int>(count[uz(r.ids[p])]++);
  }
  std::vector<std::int64_t> cap{*std::max_element(count.begin(), count.end())};
  g.ep->all_reduce_max(cap);
  const int c = static_cast<int>(cap[0]);

  // dispatched[E][C][H], zero padded (an all-zero fp8 row decodes to zeros), in the payload's
  // format; an equal-split all-to-all.
  std::vector<std::uint8_t> send(uz(e_total) * uz(c) * in_bytes, 0);
  for (std::size_t p = 0; p < r.ids.size(); ++p) {
    const std::size_t slot = uz(r.ids[p]) * uz(c) + uz(pos[p]);
    pl.write(x, static_cast<int>(p / uz(s.top_k)), send.data() + slot * in_bytes);
  }
  UninitVector<std::uint8_t> recv(send.size());
  g.ep->all_to_all(send.data(), uz(n_local) * uz(c) * in_bytes, recv.data());

  // recv is [source][local expert][C]; the grouped GEMM wants [local expert][source][C].
  UninitVector<float> rows(uz(n_local) * uz(ep) * uz(c) * uz(h));
  for (int src = 0; src < ep; ++src) {
    for (int j = 0; j < n_local; ++j) {
      const std::size_t from = (uz(src) * uz(n_local) + uz(j)) * uz(c) * in_bytes;
      const std::size_t to = (uz(j) * uz(ep) + uz(src)) * uz(c) * uz(h);
      pl.read(recv.data() + from, uz(c), rows.data() + to);
    }
  }
  std::vector<int> offsets(uz(n_local) + 1);
  for (int j = 0; j <= n_local; ++j) offsets[uz(j)] = j * ep * c;
  t.dispatch += since(be, t0);

  // Every local expert computes ep·C rows, padding included, whatever the real load.
  const UninitVector<float> y = run_experts(be, g, s, w, rows, offsets, t);

  t0 = stamp(be);
  UninitVector<std::uint8_t> out(uz(e_total) * uz(c) * row_bytes);
  for (int src = 0; src < ep; ++src) {
    for (int j = 0; j < n_local; ++j) {
      const std::size_t from = (uz(j) * uz(ep) + uz(src)) * uz(c) * uz(h);
      const std::size_t to = (uz(src) * uz(n_local) + uz(j)) * uz(c) * row_bytes;
      pack(s.dtype, y.data() + from, uz(c) * uz(h), out.data() + to);
    }
  }
  UninitVector<std::uint8_t> back(out.size());  // [E][C][H] in the dtype
  g.ep->all_to_all(out.data(), uz(n_local) * uz(c) * row_bytes, back.data());
  Dispatched d;
  d.rows = unpack_all(s.dtype, back, uz(e_total) * uz(c) * uz(h));
  d.pair_row.resize(r.ids.size());
  for (std::size_t p = 0; p < r.ids.size(); ++p) d.pair_row[p] = r.ids[p] * c + pos[p];
  t.dispatch += since(be, t0);
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
  const std::size_t row_bytes = storage_bytes(s.dtype, uz(h));  // the expert rows
  auto t0 = stamp(be);
  const TokenRange mine = token_range(num_global_tokens, ep, me);
  const Payload pl = make_payload(s, x, mine.count);
  const std::size_t in_bytes = pl.row_bytes();
  t.dispatch_row_bytes = in_bytes;

  // All-gather tokens (the payload's format) and their routing over the EP group.
  std::vector<std::size_t> tok_bytes(uz(ep)), tok_off(uz(ep)), id_bytes(uz(ep)), id_off(uz(ep));
  for (int i = 0; i < ep; ++i) {
    const TokenRange tr = token_range(num_global_tokens, ep, i);
    const auto ii = uz(i);
    tok_bytes[ii] = uz(tr.count) * in_bytes;
    tok_off[ii] = uz(tr.first) * in_bytes;
    id_bytes[ii] = uz(tr.count) * uz(k) * sizeof(int);
    id_off[ii] = uz(tr.first) * uz(k) * sizeof(int);
  }
  UninitVector<std::uint8_t> x_packed(uz(mine.count) * in_bytes);
  for (int i = 0; i < mine.count; ++i) pl.write(x, i, x_packed.data() + uz(i) * in_bytes);
  UninitVector<std::uint8_t> x_all_bytes(uz(num_global_tokens) * in_bytes);
  g.ep->all_gather_v(x_packed.data(), x_packed.size(), x_all_bytes.data(), tok_bytes, tok_off);
  std::vector<int> ids_all(uz(num_global_tokens) * uz(k));
  g.ep->all_gather_v(r.ids.data(), r.ids.size() * sizeof(int), ids_all.data(), id_bytes, id_off);
  UninitVector<float> x_all(uz(num_global_tokens) * uz(h));
  pl.read(x_all_bytes.data(), uz(num_global_tokens), x_all.data());

  // Local filter: the pairs of every token whose expert lives here, grouped by expert.
  const LocalRows local = gather_local_rows(be, ids_all, x_all, k, h, w.first_expert, n_local);
  t.dispatch += since(be, t0);

  const UninitVector<float> y = run_experts(be, g, s, w, local.rows, local.perm.offsets, t);

  // All-gather-v of every rank's expert rows; each rank keeps the rows of its own tokens.
  t0 = stamp(be);
  std::vector<int> pair_row_all(ids_all.size(), -1);
  std::vector<std::size_t> y_bytes(uz(ep)), y_off(uz(ep));
  std::size_t base = 0;
  for (int i = 0; i < ep; ++i) {
    const Permutation pi = be.permute(OpContext{}, ids_all, i * n_local, n_local);
    for (std::size_t j = 0; j < pi.order.size(); ++j) {
      pair_row_all[uz(pi.order[j])] = static_cast<int>(base + j);
    }
    y_bytes[uz(i)] = pi.order.size() * row_bytes;
    y_off[uz(i)] = base * row_bytes;
    base += pi.order.size();
  }
  UninitVector<std::uint8_t> y_packed(y.size() / uz(h) * row_bytes);
  pack(s.dtype, y.data(), y.size(), y_packed.data());
  UninitVector<std::uint8_t> y_all(base * row_bytes);
  g.ep->all_gather_v(y_packed.data(), y_packed.size(), y_all.data(), y_bytes, y_off);
  Dispatched d;
  d.rows = unpack_all(s.dtype, y_all, base * uz(h));
  const auto first_pair = uz(mine.first) * uz(k);
  d.pair_row.assign(pair_row_all.begin() + static_cast<std::ptrdiff_t>(first_pair),
                    pair_row_all.begin() + static_cast<std::ptrdiff_t>(first_pair + r.ids.size()));
  t.dispatch += since(be, t0);
  return d;
}

Dispatched a2av(Backend& be, const RankGroups& g, const LayerSpec& s, const RankWeights& w,
                std::span<const float> x, const Routing& r, PhaseTimes& t) {
  const int ep = g.ep->size();
  const int e_total = s.num_experts;
  const int n_local = e_total / ep;
  const int k = s.top_k;
  const int h = s.hidden;
  const std::size_t row_bytes = storage_bytes(s.dtype, uz(h));  // the way back
  auto t0 = stamp(be);
  const Payload pl = make_payload(s, x, static_cast<int>(x.size() / uz(h)));
  const std::size_t in_bytes = pl.row_bytes();
  t.dispatch_row_bytes = in_bytes;

  // Local pairs sorted by expert: contiguous per destination rank.
  const Permutation out_perm = be.permute(OpContext{}, r.ids, 0, e_total);
  // Count exchange: to rank j, this rank's counts for j's experts.
  std::vector<std::int64_t> send_counts(uz(e_total)), recv_counts(uz(e_total));
  for (int e = 0; e < e_total; ++e) {
    send_counts[uz(e)] = out_perm.offsets[uz(e) + 1] - out_perm.offsets[uz(e)];
  }
  g.ep->all_to_all(send_counts.data(), uz(n_local) * sizeof(std::int64_t), recv_counts.data());

  // Rows sent to and received from each peer (counts and offsets), then in bytes of the payload
  // (dispatch) and of the dtype (the way back).
  std::vector<std::size_t> sb(uz(ep)), so(uz(ep)), rb(uz(ep)), ro(uz(ep));
  std::size_t recv_rows = 0;
  for (int i = 0; i < ep; ++i) {
    const auto ii = uz(i);
    const int first_row = out_perm.offsets[ii * uz(n_local)];
    const int last_row = out_perm.offsets[(ii + 1) * uz(n_local)];
    so[ii] = uz(first_row);
    sb[ii] = uz(last_row - first_row);
    std::int64_t from_i = 0;
    for (int j = 0; j < n_local; ++j) from_i += recv_counts[ii * uz(n_local) + uz(j)];
    ro[ii] = recv_rows;
    rb[ii] = static_cast<std::size_t>(from_i);
    recv_rows += static_cast<std::size_t>(from_i);
  }
  const auto in_units = [](std::vector<std::size_t> rows, std::size_t unit) {
    for (auto& v : rows) v *= unit;
    return rows;
  };
  const std::size_t sent_rows = out_perm.order.size();
  UninitVector<std::uint8_t> send(sent_rows * in_bytes);
  for (std::size_t i = 0; i < sent_rows; ++i) {
    pl.write(x, out_perm.order[i] / k, send.data() + i * in_bytes);
  }
  UninitVector<std::uint8_t> recv(recv_rows * in_bytes);
  g.ep->all_to_all_v(send.data(), in_units(sb, in_bytes), in_units(so, in_bytes), recv.data(),
                     in_units(rb, in_bytes), in_units(ro, in_bytes));

  // recv is [source][local expert][rows]; regroup as [local expert][source][rows].
  std::vector<int> offsets(uz(n_local) + 1, 0);
  for (int j = 0; j < n_local; ++j) {
    std::int64_t n = 0;
    for (int i = 0; i < ep; ++i) n += recv_counts[uz(i) * uz(n_local) + uz(j)];
    offsets[uz(j) + 1] = offsets[uz(j)] + static_cast<int>(n);
  }
  // src_row[i][j]: first row from source i for expert j, in recv order and grouped order.
  std::vector<std::size_t> recv_at(uz(ep) * uz(n_local)), grouped_at(uz(ep) * uz(n_local));
  {
    std::size_t at = 0;
    for (int i = 0; i < ep; ++i) {
      for (int j = 0; j < n_local; ++j) {
        recv_at[uz(i) * uz(n_local) + uz(j)] = at;
        at += static_cast<std::size_t>(recv_counts[uz(i) * uz(n_local) + uz(j)]);
      }
    }
    std::vector<std::size_t> cursor(offsets.begin(), offsets.end() - 1);
    for (int i = 0; i < ep; ++i) {
      for (int j = 0; j < n_local; ++j) {
        grouped_at[uz(i) * uz(n_local) + uz(j)] = cursor[uz(j)];
        cursor[uz(j)] += static_cast<std::size_t>(recv_counts[uz(i) * uz(n_local) + uz(j)]);
      }
    }
  }
  UninitVector<float> rows(recv_rows * uz(h));
  for (std::size_t b = 0; b < recv_at.size(); ++b) {
    const auto n = static_cast<std::size_t>(recv_counts[b]);
    pl.read(recv.data() + recv_at[b] * in_bytes, n, rows.data() + grouped_at[b] * uz(h));
  }
  t.dispatch += since(be, t0);

  const UninitVector<float> y = run_experts(be, g, s, w, rows, offsets, t);

  t0 = stamp(be);
  UninitVector<std::uint8_t> out(recv_rows * row_bytes);
  for (std::size_t b = 0; b < recv_at.size(); ++b) {
    const auto n = static_cast<std::size_t>(recv_counts[b]);
    pack(s.dtype, y.data() + grouped_at[b] * uz(h), n * uz(h), out.data() + recv_at[b] * row_bytes);
  }
  UninitVector<std::uint8_t> back(sent_rows * row_bytes);
  g.ep->all_to_all_v(out.data(), in_units(rb, row_bytes), in_units(ro, row_bytes), back.data(),
                     in_units(sb, row_bytes), in_units(so, row_bytes));
  Dispatched d = returned_by_expert(s.dtype, back, out_perm, r.ids.size(), h);
  t.dispatch += since(be, t0);
  return d;
}

// The element counts of one all-to-all-v in `unit` bytes each: bytes and offsets per peer.
struct Exchange {
  std::vector<std::size_t> bytes, offsets;
  std::size_t total = 0;
};
Exchange exchange_of(std::span<const std::int64_t> counts, std::size_t unit) {
  Exchange x;
  x.bytes.resize(counts.size());
  x.offsets.resize(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    x.offsets[i] = x.total;
    x.bytes[i] = static_cast<std::size_t>(counts[i]) * unit;
    x.total += x.bytes[i];
  }
  return x;
}

// Sends `lists[i]` items (records of `unit` bytes, written by `write(item, dst)`) to peer i of
// `comm`; returns the received records (peer order) and the counts received from each peer.
template <typename Write>
UninitVector<std::uint8_t> send_records(Communicator& comm,
                                        const std::vector<std::vector<int>>& lists,
                                        std::size_t unit, const Write& write,
                                        std::vector<std::int64_t>& recv_counts) {
  const auto n = uz(comm.size());
  std::vector<std::int64_t> send_counts(n);
  for (std::size_t i = 0; i < n; ++i) send_counts[i] = static_cast<std::int64_t>(lists[i].size());
  recv_counts.assign(n, 0);
  comm.all_to_all(send_counts.data(), sizeof(std::int64_t), recv_counts.data());
  const Exchange out = exchange_of(send_counts, unit);
  const Exchange in = exchange_of(recv_counts, unit);
  UninitVector<std::uint8_t> send(out.total);
  std::size_t at = 0;
  for (const auto& list : lists) {
    for (const int item : list) {
      write(item, send.data() + at);
      at += unit;
    }
  }
  UninitVector<std::uint8_t> recv(in.total);
  comm.all_to_all_v(send.data(), out.bytes, out.offsets, recv.data(), in.bytes, in.offsets);
  return recv;
}

// The reverse of send_records: each peer returns one row of `row_bytes` per record it received,
// in the order it received them; the result is in this rank's send order.
UninitVector<std::uint8_t> return_rows(Communicator& comm, std::span<const std::uint8_t> rows,
                                       const std::vector<std::vector<int>>& lists,
                                       std::span<const std::int64_t> recv_counts,
                                       std::size_t row_bytes) {
  std::vector<std::int64_t> sent(lists.size());
  for (std::size_t i = 0; i < lists.size(); ++i)
    sent[i] = static_cast<std::int64_t>(lists[i].size());
  const Exchange out = exchange_of(recv_counts, row_bytes);
  const Exchange in = exchange_of(sent, row_bytes);
  UninitVector<std::uint8_t> back(in.total);
  comm.all_to_all_v(rows.data(), out.bytes, out.offsets, back.data(), in.bytes, in.offsets);
  return back;
}

// A token on the wire of deepep_normal's dispatch: its fp8 row and scales, then its k expert ids
// (int32) and k routing weights (fp32), which the forwarder and the expert rank need.
struct TokenRecord {
  std::size_t row_bytes = 0;  // fp8 values and scales
  int k = 0;
  std::size_t bytes() const { return row_bytes + uz(k) * (sizeof(int) + sizeof(float)); }
  // The record's ids into `out` (copied: a record need not be aligned for int).
  void ids(const std::uint8_t* rec, std::vector<int>& out) const {
    out.resize(uz(k));
    std::memcpy(out.data(), rec + row_bytes, uz(k) * sizeof(int));
  }
};

// Sums `per` rows per item (row_of[item·per + j], weight 1; −1: none) into one row per item,
// rounded to the storage dtype: the backend's combine with unit weights.
UninitVector<float> sum_rows(Backend& be, std::span<const float> rows, std::span<const int> row_of,
                             int items, int per, int hidden, DType dtype) {
  std::vector<int> pair_row(row_of.size(), 0);
  std::vector<float> weights(row_of.size(), 0.0F);
  for (std::size_t i = 0; i < row_of.size(); ++i) {
    if (row_of[i] >= 0) {
      pair_row[i] = row_of[i];
      weights[i] = 1.0F;
    }
  }
  UninitVector<float> out(uz(items) * uz(hidden));
  be.combine(OpContext{}, rows, pair_row, weights, {}, items, per, hidden, dtype, out);
  return out;
}

// DeepEP's normal mode: each token, quantized once to fp8 e4m3 with per-128 scales, goes once to
// every node that holds one of its experts, over the rail (to the rank with this rank's index
// there), and that forwarder sends it once to every rank of its node that holds one of its
// experts. The expert rank weights and sums its experts' outputs per token; the forwarder sums
// its node's ranks per token before the inter-node hop back; the source sums the nodes (and the
// shared expert) in the final combine. The way back carries the storage dtype.
Dispatched deepep_normal(Backend& be, const RankGroups& g, const LayerSpec& s, const RankWeights& w,
                         std::span<const float> x, const Routing& r, PhaseTimes& t) {
  MOEPLAN_ASSERT(g.node && g.rail, "deepep_normal needs the node and rail groups");
  const int ep = g.ep->size();
  const int n_local = s.num_experts / ep;
  const int k = s.top_k;
  const int h = s.hidden;
  const int per_node = g.node->size();
  const int nodes = g.rail->size();
  const int my_node = g.rail->rank();
  const int num_tokens = static_cast<int>(r.ids.size()) / k;
  const std::size_t row_bytes = storage_bytes(s.dtype, uz(h));
  const auto node_of = [&](int e) { return (e / n_local) / per_node; };
  const auto index_of = [&](int e) { return (e / n_local) % per_node; };
  auto t0 = stamp(be);

  const Fp8Rows fp8 = quantize_rows(x, num_tokens, h);
  t.dispatch_row_bytes = fp8.bytes();
  const TokenRecord rec{fp8.bytes(), k};
  // Hop 1 (rail): each token once to each destination node.
  std::vector<std::vector<int>> to_node(uz(nodes));
  std::vector<char> seen(uz(nodes));
  for (int tok = 0; tok < num_tokens; ++tok) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int j = 0; j < k; ++j) seen[uz(node_of(r.ids[uz(tok) * uz(k) + uz(j)]))] = 1;
    for (int n = 0; n < nodes; ++n) {
      if (seen[uz(n)] != 0) to_node[uz(n)].push_back(tok);
    }
  }
  std::vector<std::int64_t> from_rail;
  const UninitVector<std::uint8_t> fwd = send_records(
      *g.rail, to_node, rec.bytes(),
      [&](int tok, std::uint8_t* dst) {
        fp8.write(tok, dst);
        std::memcpy(dst + rec.row_bytes, r.ids.data() + uz(tok) * uz(k), uz(k) * sizeof(int));
        std::memcpy(dst + rec.row_bytes + uz(k) * sizeof(int), r.weights.data() + uz(tok) * uz(k),
                    uz(k) * sizeof(float));
      },
      from_rail);
  const int forwarded = static_cast<int>(fwd.size() / rec.bytes());

  // Hop 2 (node): each forwarded token once to each rank of this node that holds its experts.
  std::vector<std::vector<int>> to_rank(uz(per_node));
  std::vector<char> hit(uz(per_node));
  std::vector<int> ids_u;
  for (int u = 0; u < forwarded; ++u) {
    rec.ids(fwd.data() + uz(u) * rec.bytes(), ids_u);
    std::fill(hit.begin(), hit.end(), 0);
    for (int j = 0; j < k; ++j) {
      const int e = ids_u[uz(j)];
      if (node_of(e) == my_node) hit[uz(index_of(e))] = 1;
    }
    for (int l = 0; l < per_node; ++l) {
      if (hit[uz(l)] != 0) to_rank[uz(l)].push_back(u);
    }
  }
  std::vector<std::int64_t> from_node;
  const UninitVector<std::uint8_t> got = send_records(
      *g.node, to_rank, rec.bytes(),
      [&](int u, std::uint8_t* dst) {
        std::memcpy(dst, fwd.data() + uz(u) * rec.bytes(), rec.bytes());
      },
      from_node);
  const int received = static_cast<int>(got.size() / rec.bytes());

  // The expert rank: its pairs of the received tokens, grouped by local expert.
  std::vector<int> ids(uz(received) * uz(k));
  std::vector<float> weights(ids.size());
  UninitVector<float> xr(uz(received) * uz(h));
  std::vector<float> scale;
  for (int v = 0; v < received; ++v) {
    const std::uint8_t* src = got.data() + uz(v) * rec.bytes();
    dequantize_row(src, h, s.dtype, scale, xr.data() + uz(v) * uz(h));
    std::memcpy(ids.data() + uz(v) * uz(k), src + rec.row_bytes, uz(k) * sizeof(int));
    std::memcpy(weights.data() + uz(v) * uz(k), src + rec.row_bytes + uz(k) * sizeof(int),
                uz(k) * sizeof(float));
  }
  const LocalRows local = gather_local_rows(be, ids, xr, k, h, w.first_expert, n_local);
  const Permutation& perm = local.perm;
  t.dispatch += since(be, t0);

  const UninitVector<float> y = run_experts(be, g, s, w, local.rows, perm.offsets, t);

  // Combine, level 1 (expert rank): Σ over its experts of weight · output, per received token.
  t0 = stamp(be);
  std::vector<int> pair_row(ids.size(), 0);
  std::vector<float> local_weights(ids.size(), 0.0F);
  for (std::size_t i = 0; i < perm.order.size(); ++i) {
    const auto p = uz(perm.order[i]);
    pair_row[p] = static_cast<int>(i);
    local_weights[p] = weights[p];
  }
  UninitVector<float> per_rank(uz(received) * uz(h));
  be.combine(OpContext{}, y, pair_row, local_weights, {}, received, k, h, s.dtype, per_rank);
  UninitVector<std::uint8_t> packed(uz(received) * row_bytes);
  pack(s.dtype, per_rank.data(), per_rank.size(), packed.data());
  const UninitVector<std::uint8_t> from_ranks =
      return_rows(*g.node, packed, to_rank, from_node, row_bytes);

  // Level 2 (forwarder): Σ over its node's ranks, per forwarded token, before the rail hop back.
  std::vector<int> row_of(uz(forwarded) * uz(per_node), -1);
  {
    int at = 0;
    for (int l = 0; l < per_node; ++l) {
      for (const int u : to_rank[uz(l)]) row_of[uz(u) * uz(per_node) + uz(l)] = at++;
    }
  }
  const UninitVector<float> node_rows =
      unpack_all(s.dtype, from_ranks, from_ranks.size() / row_bytes * uz(h));
  const UninitVector<float> per_node_sum =
      sum_rows(be, node_rows, row_of, forwarded, per_node, h, s.dtype);
  packed.resize(uz(forwarded) * row_bytes);
  pack(s.dtype, per_node_sum.data(), per_node_sum.size(), packed.data());
  const UninitVector<std::uint8_t> from_nodes =
      return_rows(*g.rail, packed, to_node, from_rail, row_bytes);

  // The source: one row per (token, destination node), summed with weight 1 by the combine.
  Dispatched d;
  d.rows = unpack_all(s.dtype, from_nodes, from_nodes.size() / row_bytes * uz(h));
  d.per_token = nodes;
  d.pair_row.assign(uz(num_tokens) * uz(nodes), 0);
  d.weights.assign(d.pair_row.size(), 0.0F);
  int at = 0;
  for (int n = 0; n < nodes; ++n) {
    for (const int tok : to_node[uz(n)]) {
      d.pair_row[uz(tok) * uz(nodes) + uz(n)] = at++;
      d.weights[uz(tok) * uz(nodes) + uz(n)] = 1.0F;
    }
  }
  t.dispatch += since(be, t0);
  return d;
}

// DeepEP's low-latency mode: every (token, expert) pair sent directly to the expert's rank as
// fp8 e4m3 values with one fp32 scale per 128 (each token quantized once) — the counts first,
// then only the pairs (DeepEP writes them into a fixed receive buffer of `max_tokens` rows per
// local expert and source rank: a forward whose rank holds more tokens is refused before it
// starts, kernel_dispatch_violation); the outputs come back in the storage dtype and the source
// weights and sums them.
Dispatched deepep_ll(Backend& be, const RankGroups& g, const LayerSpec& s, const RankWeights& w,
                     std::span<const float> x, const Routing& r, int max_tokens, PhaseTimes& t) {
  const int ep = g.ep->size();
  const int e_total = s.num_experts;
  const int n_local = e_total / ep;
  const int k = s.top_k;
  const int h = s.hidden;
  const int num_tokens = static_cast<int>(r.ids.size()) / k;
  MOEPLAN_ASSERT(num_tokens <= max_tokens, "deepep_ll: more tokens than the buffer holds");
  auto t0 = stamp(be);

  const Fp8Rows fp8 = quantize_rows(x, num_tokens, h);
  t.dispatch_row_bytes = fp8.bytes();
  const std::size_t msg = fp8.bytes();
  // Pairs by expert (stable: token order within an expert), so contiguous per destination rank.
  const Permutation out_perm = be.permute(OpContext{}, r.ids, 0, e_total);
  std::vector<std::int64_t> send_counts(uz(e_total)), recv_counts(uz(e_total));
  for (int e = 0; e < e_total; ++e) {
    send_counts[uz(e)] = out_perm.offsets[uz(e) + 1] - out_perm.offsets[uz(e)];
  }
  g.ep->all_to_all(send_counts.data(), uz(n_local) * sizeof(std::int64_t), recv_counts.data());
  std::vector<std::int64_t> to_rank(uz(ep)), from_rank(uz(ep));
  for (int i = 0; i < ep; ++i) {
    for (int j = 0; j < n_local; ++j) {
      to_rank[uz(i)] += send_counts[uz(i) * uz(n_local) + uz(j)];
      from_rank[uz(i)] += recv_counts[uz(i) * uz(n_local) + uz(j)];
      MOEPLAN_ASSERT(recv_counts[uz(i) * uz(n_local) + uz(j)] <= max_tokens,
                     "deepep_ll: a source sent more rows than the buffer holds");
    }
  }
  const Exchange out = exchange_of(to_rank, msg);
  const Exchange in = exchange_of(from_rank, msg);
  UninitVector<std::uint8_t> send(out.total);
  for (std::size_t i = 0; i < out_perm.order.size(); ++i) {
    fp8.write(out_perm.order[i] / k, send.data() + i * msg);
  }
  UninitVector<std::uint8_t> recv(in.total);
  g.ep->all_to_all_v(send.data(), out.bytes, out.offsets, recv.data(), in.bytes, in.offsets);

  // recv is [source][local expert][rows]: dequantize into [local expert][source][rows].
  std::vector<int> offsets(uz(n_local) + 1, 0);
  for (int j = 0; j < n_local; ++j) {
    std::int64_t n = 0;
    for (int i = 0; i < ep; ++i) n += recv_counts[uz(i) * uz(n_local) + uz(j)];
    offsets[uz(j) + 1] = offsets[uz(j)] + static_cast<int>(n);
  }
  const std::size_t received = in.total / msg;
  UninitVector<float> rows(received * uz(h));
  std::vector<std::size_t> grouped_of(received);  // grouped row of each received row
  {
    std::vector<std::size_t> cursor(offsets.begin(), offsets.end() - 1);
    std::size_t at = 0;
    std::vector<float> scale;
    for (int i = 0; i < ep; ++i) {
      for (int j = 0; j < n_local; ++j) {
        for (std::int64_t c = 0; c < recv_counts[uz(i) * uz(n_local) + uz(j)]; ++c, ++at) {
          grouped_of[at] = cursor[uz(j)]++;
          dequantize_row(recv.data() + at * msg, h, s.dtype, scale,
                         rows.data() + grouped_of[at] * uz(h));
        }
      }
    }
  }
  t.dispatch += since(be, t0);

  const UninitVector<float> y = run_experts(be, g, s, w, rows, offsets, t);

  // Combine: each output back to its token's rank in the storage dtype, in the received order.
  t0 = stamp(be);
  const std::size_t row_bytes = storage_bytes(s.dtype, uz(h));
  UninitVector<std::uint8_t> outputs(received * row_bytes);
  for (std::size_t at = 0; at < received; ++at) {
    pack(s.dtype, y.data() + grouped_of[at] * uz(h), uz(h), outputs.data() + at * row_bytes);
  }
  const Exchange back_out = exchange_of(from_rank, row_bytes);
  const Exchange back_in = exchange_of(to_rank, row_bytes);
  UninitVector<std::uint8_t> back(back_in.total);
  g.ep->all_to_all_v(outputs.data(), back_out.bytes, back_out.offsets, back.data(), back_in.bytes,
                     back_in.offsets);
  Dispatched d = returned_by_expert(s.dtype, back, out_perm, r.ids.size(), h);
  t.dispatch += since(be, t0);
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

RankGroups make_groups(Communicator& world, const Layout& l, int ranks_per_node) {
  const int r = world.rank();
  RankGroups g;
  g.ep = world.split(l.tp_rank(r), l.ep_rank(r));
  g.tp = world.split(l.ep_rank(r), l.tp_rank(r));
  if (ranks_per_node > 0 && l.tp_size == 1 && l.ep_size % ranks_per_node == 0) {
    const int e = l.ep_rank(r);
    g.node = g.ep->split(e / ranks_per_node, e % ranks_per_node);
    g.rail = g.ep->split(e % ranks_per_node, e / ranks_per_node);
  }
  return g;
}

std::optional<std::string> kernel_dispatch_violation(const Layout& l, int num_tokens,
                                                     const DispatchOptions& o) {
  if (l.dispatcher == Dispatcher::kDeepEpNormal && l.tp_size == 1 && o.ranks_per_node == 0) {
    return std::string(
        "deepep_normal spans at least two nodes: expected ranks-per-node grouping the ranks "
        "into nodes (e.g. 2 for 4 ranks as 2 nodes)");
  }
  if (auto v = models::dispatcher_violation(l.dispatcher, l.ep_size, l.tp_size, o.ranks_per_node)) {
    return v;
  }
  if (l.dispatcher == Dispatcher::kDeepEpLl && o.ll_max_tokens > 0) {
    const int largest = (num_tokens + l.ep_size - 1) / l.ep_size;
    if (largest > o.ll_max_tokens) {
      return "deepep_ll's buffer holds " + std::to_string(o.ll_max_tokens) +
             " tokens per rank, but " + std::to_string(num_tokens) + " tokens over ep " +
             std::to_string(l.ep_size) + " put " + std::to_string(largest) +
             " on the largest EP rank; expected ll-max-tokens ≥ " + std::to_string(largest);
    }
  }
  return std::nullopt;
}

std::vector<float> moe_forward(Backend& be, const RankGroups& g, const LayerSpec& s,
                               const Layout& l, const RankWeights& w, std::span<const float> x,
                               int num_tokens, PhaseTimes* times, const DispatchOptions& o) {
  MOEPLAN_ASSERT(!kernel_dispatch_violation(l, num_tokens, o), "moe_forward: illegal dispatch");
  PhaseTimes t;
  const auto start = stamp(be);
  const TokenRange mine = token_range(num_tokens, l.ep_size, g.ep->rank());
  auto t0 = stamp(be);
  const Routing r = route(be, s, w, x, mine.count);
  t.router = since(be, t0);

  Dispatched d;
  switch (l.dispatcher) {
    case Dispatcher::kPaddedA2a: d = padded_a2a(be, g, s, w, x, r, t); break;
    case Dispatcher::kAllGather: d = allgather(be, g, s, w, x, r, num_tokens, t); break;
    case Dispatcher::kA2av: d = a2av(be, g, s, w, x, r, t); break;
    case Dispatcher::kDeepEpNormal: d = deepep_normal(be, g, s, w, x, r, t); break;
    case Dispatcher::kDeepEpLl: {
      const int largest = (num_tokens + l.ep_size - 1) / l.ep_size;
      d = deepep_ll(be, g, s, w, x, r, o.ll_max_tokens > 0 ? o.ll_max_tokens : largest, t);
      break;
    }
  }

  UninitVector<float> shared;
  if (s.shared_intermediate > 0) {
    t0 = stamp(be);
    shared.resize(uz(mine.count) * uz(s.hidden));  // shared_expert writes every row
    be.shared_expert(OpContext{}, x, mine.count, s.hidden, w.shared, w.shared_gate, s.dtype,
                     shared);
    t.shared = since(be, t0);
    t0 = stamp(be);
    tp_reduce(*g.tp, s.dtype, shared);
    t.tp += since(be, t0);
  }
  t0 = stamp(be);
  std::vector<float> out(uz(mine.count) * uz(s.hidden));
  if (d.per_token > 0) {
    be.combine(OpContext{}, d.rows, d.pair_row, d.weights, shared, mine.count, d.per_token,
               s.hidden, s.dtype, out);
  } else {
    be.combine(OpContext{}, d.rows, d.pair_row, r.weights, shared, mine.count, s.top_k, s.hidden,
               s.dtype, out);
  }
  t.combine = since(be, t0);
  t.total = since(be, start);
  if (times != nullptr) *times = t;
  return out;
}

UninitVector<std::uint8_t> pack_rows(DType dtype, std::span<const float> src, int hidden,
                                     std::span<const int> rows) {
  const std::size_t row_bytes = storage_bytes(dtype, uz(hidden));
  UninitVector<std::uint8_t> out(rows.size() * row_bytes);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    pack(dtype, src.data() + uz(rows[i]) * uz(hidden), uz(hidden), out.data() + i * row_bytes);
  }
  return out;
}

}  // namespace moeplan::kernels
