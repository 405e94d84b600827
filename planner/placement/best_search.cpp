// `best`: EPLB's map refined by local search — phase A lowers the fitted maximum GPU load over
// EPLB's map and maps with other replica counts; phase B balances sampled steps, and a refined map
// replaces EPLB's only when its gain on held-back samples is significant; an optional locality
// pass trades balance (down to EPLB's fitted maximum) for fewer split co-activated pairs.
#include "planner/placement/best_search.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <span>

#include "models/index.hpp"

namespace moeplan::planner {

namespace {

// Sampled steps, each a [num_experts] row of token counts.
using Rows = std::span<const std::vector<double>>;

// ---- best: local search ------------------------------------------------------------------

// rows [S][E] as out [E·S] (out[e·S + s] = rows[s][e]), in blocks of 8 samples so each expert's
// 8 values fill one cache line.
void transpose_rows(Rows rows, std::size_t num_experts, std::vector<double>& out) {
  const std::size_t S = rows.size();
  out.assign(num_experts * S, 0.0);
  constexpr std::size_t kBlock = 8;
  for (std::size_t s0 = 0; s0 < S; s0 += kBlock) {
    const std::size_t s1 = std::min(S, s0 + kBlock);
    for (std::size_t e = 0; e < num_experts; ++e) {
      for (std::size_t s = s0; s < s1; ++s) out[e * S + s] = rows[s][e];
    }
  }
}

// Per-sample GPU loads with the three largest, so a swap between two GPUs is scored in O(1)
// per sample. Stored sample-innermost ([G][S], [E][S]) so a swap's score reads contiguous rows.
struct SampleSet {
  int num_samples = 0;
  std::vector<double> rows;                 // [E·S]: rows[e·S + s] = tokens of expert e in s
  std::vector<double> frac;                 // [E·S]: rows / the expert's replica count
  std::vector<double> gpu;                  // [G·S]
  std::vector<double> mean;                 // [S] total / G
  std::array<std::vector<int>, 3> top;      // [3][S] GPU indices, descending (−1: none)
  std::array<std::vector<double>, 3> topv;  // [3][S] their loads

  int size() const { return num_samples; }
};

class LayerSearch {
 public:
  LayerSearch(const std::vector<double>& weight, std::vector<int> slot_expert, int num_gpus,
              int num_nodes, bool node_domains)
      : w_(&weight),
        slot_(std::move(slot_expert)),
        num_experts_(static_cast<int>(weight.size())),
        num_slots_(static_cast<int>(slot_.size())),
        num_gpus_(num_gpus),
        num_nodes_(num_nodes),
        spg_(num_slots_ / num_gpus),
        gpus_per_node_(num_gpus / num_nodes),
        gpus_per_domain_(node_domains ? num_gpus / num_nodes : num_gpus) {
    recount();
  }

  const std::vector<int>& slots() const { return slot_; }

  // The samples `from` last searched, transposed, for a search of the same rows (its own
  // replica counts are applied in init_samples).
  void take_rows(LayerSearch& from) {
    samples_.rows = std::move(from.samples_.rows);
    rows_data_ = from.rows_data_;
    from.rows_data_ = nullptr;
  }

  // Starts over from another map of the same layer (the storage kept).
  void assign(std::vector<int> slot_expert) {
    slot_ = std::move(slot_expert);
    recount();
  }

  // Phase A: lower the fitted maximum GPU load: swap a slot of the heaviest GPU with one of
  // another GPU in its domain, or turn a replica on the heaviest GPU into a replica of another
  // expert of the domain (new replica counts). Only strict improvements are taken.
  void reduce_fitted_max(int max_moves) {
    for (int move = 0; move < max_moves; ++move) {
      const int g = argmax(fit_);
      const double limit = fit_[uz(g)] * (1.0 - kMargin);
      if (!(limit > 0.0)) return;
      if (!improve_by_swap(g, limit) && !improve_by_replica(g, limit)) return;
    }
  }

  double fitted_max() const { return *std::max_element(fit_.begin(), fit_.end()); }

  // Phase B: raise Σ_s mean_s / max_s over the samples (the expected per-step balancedness),
  // while no GPU's fitted load rises above the fitted maximum (unless it falls).
  void optimise_samples(Rows rows, int max_evals) {
    fit_cap_ = fitted_max() * (1.0 - kMargin);
    init_samples(rows);
    int evals = 0;
    // Swaps that unload the GPUs most often at the maximum, best swap per GPU.
    bool improved = true;
    while (improved && evals < max_evals) {
      improved = false;
      for (const int g1 : hot_gpus()) {
        if (evals >= max_evals) break;
        if (sample_swap_from(g1, evals)) {
          improved = true;
          break;
        }
      }
    }
  }

  // Phase C (with a trace, global mode, several nodes): for slots in random order, the best
  // cross-node swap by balance gain − lambda · Δ(split co-activated pairs), while no GPU's
  // fitted load rises above `fit_cap` (EPLB's fitted maximum) unless it falls.
  void optimise_locality(Rows rows, const std::vector<double>& pairs, double lambda, int max_evals,
                         std::uint64_t seed, double fit_cap, int table_nodes) {
    if (num_nodes_ < 2 || gpus_per_domain_ != num_gpus_) return;
    fit_cap_ = fit_cap * (1.0 - kMargin);
    init_samples(rows);
    init_pairs(pairs, num_nodes_ <= std::min(table_nodes, kMaxLocalityTableNodes));
    std::mt19937_64 rng(seed);
    std::vector<int> order(uz(num_slots_));
    std::iota(order.begin(), order.end(), 0);
    int evals = 0;
    bool improved = true;
    while (improved && evals < max_evals) {
      improved = false;
      std::shuffle(order.begin(), order.end(), rng);
      for (const int i : order) {
        if (evals >= max_evals) break;
        int best_j = -1;
        double best_gain = kGainEps;
        const int g1 = gpu_of(i);
        const int n1 = g1 / gpus_per_node_;
        // Every slot j of another node, in slot order, GPU by GPU.
        for (int g2 = 0; g2 < num_gpus_; ++g2) {
          if (g2 / gpus_per_node_ == n1) {
            g2 = (n1 + 1) * gpus_per_node_ - 1;
            continue;
          }
          for (int j = g2 * spg_; j < (g2 + 1) * spg_; ++j) {
            ++evals;
            if (!swap_allowed(i, j, g1, g2)) continue;
            // A pair whose balance gain cannot pay for its change in split pairs is not scored
            // (the same choice: it could not beat best_gain).
            const double cut = lambda > 0.0 ? cut_delta(i, j) : 0.0;
            if (pair_bound(g1, g2) - lambda * cut + kBoundSlack <= best_gain) continue;
            const double gain = swap_gain(i, j) - lambda * cut;
            if (gain > best_gain) {
              best_gain = gain;
              best_j = j;
            }
          }
        }
        if (best_j >= 0) {
          apply_swap(i, best_j);
          improved = true;
        }
      }
    }
  }

 private:
  static constexpr double kMargin = 1e-9;
  static constexpr double kGainEps = 1e-12;
  // Rounding slack of balance_bound against swap_gain (gains are means of terms below 1).
  static constexpr double kBoundSlack = 1e-9;

  int gpu_of(int slot) const { return slot / spg_; }
  int node_of_slot(int slot) const { return gpu_of(slot) / gpus_per_node_; }
  int domain_of(int gpu) const { return gpu / gpus_per_domain_; }
  double fit_slot(int slot) const {
    const int e = slot_[uz(slot)];
    return (*w_)[uz(e)] / cnt_[uz(e)];
  }
  static int argmax(const std::vector<double>& v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
  }

  // Replica counts, each expert's slots and the fitted GPU loads, from scratch (reusing storage).
  void recount() {
    cnt_.assign(uz(num_experts_), 0);
    where_.resize(uz(num_experts_));
    for (auto& w : where_) w.clear();
    for (int s = 0; s < num_slots_; ++s) {
      ++cnt_[uz(slot_[uz(s)])];
      where_[uz(slot_[uz(s)])].push_back(s);
    }
    fit_.assign(uz(num_gpus_), 0.0);
    for (int s = 0; s < num_slots_; ++s) fit_[uz(gpu_of(s))] += fit_slot(s);
  }

  // One GPU's fitted load summed in slot order (what recount gives it).
  void refit_gpu(int g) {
    double sum = 0.0;
    for (int s = g * spg_; s < (g + 1) * spg_; ++s) sum += fit_slot(s);
    fit_[uz(g)] = sum;
  }

  // An expert's slots in slot order (what recount gives it).
  void relist(int e) {
    auto& list = where_[uz(e)];
    list.clear();
    for (int s = 0; s < num_slots_; ++s) {
      if (slot_[uz(s)] == e) list.push_back(s);
    }
  }

  // Swaps the experts of slots i and j: replica counts stay, two GPUs' loads change.
  void swap_slots(int i, int j) {
    const int a = slot_[uz(i)];
    const int b = slot_[uz(j)];
    std::swap(slot_[uz(i)], slot_[uz(j)]);
    relist(a);
    relist(b);
    refit_gpu(gpu_of(i));
    refit_gpu(gpu_of(j));
  }

  // slot_fit_ and slot_gpu_fit_ for the slots [first, last): each slot's fitted load and its
  // GPU's.
  void fit_slots(int first, int last) {
    slot_fit_.resize(uz(num_slots_));
    slot_gpu_fit_.resize(uz(num_slots_));
    for (int k = first; k < last; ++k) {
      slot_fit_[uz(k)] = fit_slot(k);
      slot_gpu_fit_[uz(k)] = fit_[uz(gpu_of(k))];
    }
  }

  // The swap of a slot of g with a slot of another GPU of its domain that most lowers the larger
  // of the two GPUs' loads below `limit`; the first such pair in slot order on ties. Two passes
  // the compiler can vectorise: the lowest peak over every pair, then the first pair giving it.
  // (A pair of two replicas of one expert has delta 0 and is never taken.)
  bool improve_by_swap(int g, double limit) {
    const int d = domain_of(g);
    const int first = d * gpus_per_domain_ * spg_;
    const int last = (d + 1) * gpus_per_domain_ * spg_;
    fit_slots(first, last);
    const double fg = fit_[uz(g)];
    const double* sf = slot_fit_.data();
    const double* gf = slot_gpu_fit_.data();
    constexpr double kInf = std::numeric_limits<double>::infinity();
    // The other GPUs' slots: [first, g·spg) and [(g+1)·spg, last).
    const std::array<std::pair<int, int>, 2> ranges{std::pair{first, g * spg_},
                                                    std::pair{(g + 1) * spg_, last}};
    const auto peak_of = [&](double li, int j) {
      const double delta = li - sf[j];
      return delta > 0.0 ? std::max(fg - delta, gf[j] + delta) : kInf;
    };
    double lowest = limit;
    for (int i = g * spg_; i < (g + 1) * spg_; ++i) {
      const double li = sf[i];
      // (Named, not bound: clang cannot use a structured binding inside an OpenMP region.)
      for (const auto& range : ranges) {
        const int lo = range.first;
        const int hi = range.second;
        double m = lowest;
#pragma omp simd reduction(min : m)
        for (int j = lo; j < hi; ++j) m = std::min(m, peak_of(li, j));
        lowest = m;
      }
    }
    if (!(lowest < limit)) return false;
    for (int i = g * spg_; i < (g + 1) * spg_; ++i) {
      const double li = sf[i];
      for (const auto& [lo, hi] : ranges) {
        for (int j = lo; j < hi; ++j) {
          if (peak_of(li, j) == lowest) {
            swap_slots(i, j);
            return true;
          }
        }
      }
    }
    return false;  // not reached: the lowest peak is some pair's
  }

  // Turns slot i (a replica of a, cnt[a] ≥ 2) into a replica of b: a's other replicas grow,
  // b's shrink. Accepted when every affected GPU ends below `limit`.
  bool improve_by_replica(int g, double limit) {
    const int d = domain_of(g);
    int best_i = -1, best_b = -1;
    double best_peak = limit;
    trial_ = fit_;
    std::vector<double>& trial = trial_;
    touched_.assign(uz(num_gpus_), 0);
    for (int i = g * spg_; i < (g + 1) * spg_; ++i) {
      const int a = slot_[uz(i)];
      if (cnt_[uz(a)] < 2) continue;
      const double a_old = (*w_)[uz(a)] / cnt_[uz(a)];
      const double a_new = (*w_)[uz(a)] / (cnt_[uz(a)] - 1);
      // A lower bound on the peak for every b with no replica on a GPU of a's: g's new load
      // (with b_new added, below) and the rise of a's other replicas' GPUs, which only a b
      // replica on them could offset. Such a b is skipped when the bound is no better.
      std::fill(trial.begin(), trial.end(), 0.0);
      for (const int s : where_[uz(a)]) {
        touched_[uz(gpu_of(s))] = 1;
        if (s != i) trial[uz(gpu_of(s))] += a_new - a_old;
      }
      double rise = 0.0;  // the largest load of a GPU of a's other replicas after the move
      for (const int s : where_[uz(a)]) {
        const int gs = gpu_of(s);
        if (gs != g) rise = std::max(rise, fit_[uz(gs)] + trial[uz(gs)]);
      }
      const double g_without = fit_[uz(g)] - a_old + trial[uz(g)];
      trial = fit_;
      for (int b = 0; b < num_experts_; ++b) {
        if (b == a || where_[uz(b)].empty() || domain_of(gpu_of(where_[uz(b)][0])) != d) continue;
        const double b_old = (*w_)[uz(b)] / cnt_[uz(b)];
        const double b_new = (*w_)[uz(b)] / (cnt_[uz(b)] + 1);
        bool shares = false;
        for (const int s : where_[uz(b)]) shares = shares || touched_[uz(gpu_of(s))] != 0;
        if (!shares && std::max(rise, g_without + b_new) >= best_peak) continue;
        for (const int s : where_[uz(a)]) trial[uz(gpu_of(s))] += (s == i ? b_new : a_new) - a_old;
        for (const int s : where_[uz(b)]) trial[uz(gpu_of(s))] += b_new - b_old;
        double peak = 0.0;
        for (const auto* list : {&where_[uz(a)], &where_[uz(b)]}) {
          for (const int s : *list) peak = std::max(peak, trial[uz(gpu_of(s))]);
        }
        for (const auto* list : {&where_[uz(a)], &where_[uz(b)]}) {
          for (const int s : *list) trial[uz(gpu_of(s))] = fit_[uz(gpu_of(s))];
        }
        if (peak < best_peak) {
          best_peak = peak;
          best_i = i;
          best_b = b;
        }
      }
      for (const int s : where_[uz(a)]) touched_[uz(gpu_of(s))] = 0;
    }
    if (best_i < 0) return false;
    slot_[uz(best_i)] = best_b;
    recount();
    return true;
  }

  void init_samples(Rows rows) {
    const int n = static_cast<int>(rows.size());
    const auto S = uz(n);
    samples_.num_samples = n;
    // Every cached value (pair_bound, prepare_weights, prepare_source, prepare_other) was for
    // other samples; prepare_source's rows are sized by the sample count.
    ++stamp_;
    src_at_.clear();
    // (Already transposed when taken from a search of the same rows, unchanged: take_rows.)
    if (rows_data_ != rows.data() || samples_.rows.size() != uz(num_experts_) * S) {
      transpose_rows(rows, uz(num_experts_), samples_.rows);
      rows_data_ = rows.data();
    }
    samples_.gpu.assign(uz(num_gpus_) * S, 0.0);
    samples_.mean.assign(S, 0.0);
    for (auto& t : samples_.top) t.assign(S, -1);
    for (auto& t : samples_.topv) t.assign(S, 0.0);
    // Each expert's tokens per replica in every sample (replica counts stay fixed while the
    // samples are searched: swaps only).
    samples_.frac.assign(uz(num_experts_) * S, 0.0);
    for (std::size_t e = 0; e < uz(num_experts_); ++e) {
      if (cnt_[e] == 0) continue;
      const double c = cnt_[e];
      for (std::size_t s = 0; s < S; ++s) samples_.frac[e * S + s] = samples_.rows[e * S + s] / c;
    }
    for (int g = 0; g < num_gpus_; ++g) refresh_gpu(g);
    refresh_stats();
  }

  // GPU g's load in every sample, its slots summed in slot order.
  void refresh_gpu(int g) {
    const auto S = uz(samples_.size());
    double* out = &samples_.gpu[uz(g) * S];
    std::fill(out, out + S, 0.0);
    for (int k = g * spg_; k < (g + 1) * spg_; ++k) {
      const double* frac = &samples_.frac[uz(slot_[uz(k)]) * S];
      for (std::size_t s = 0; s < S; ++s) out[s] += frac[s];
    }
  }

  // Every sample's mean and three largest GPU loads (ties: the lower GPU index first), one
  // pass per GPU over all samples so the compiler can vectorise it.
  void refresh_stats() {
    const auto S = uz(samples_.size());
    double* mean = samples_.mean.data();
    int* t0 = samples_.top[0].data();
    int* t1 = samples_.top[1].data();
    int* t2 = samples_.top[2].data();
    double* v0 = samples_.topv[0].data();
    double* v1 = samples_.topv[1].data();
    double* v2 = samples_.topv[2].data();
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    for (std::size_t s = 0; s < S; ++s) {
      mean[s] = 0.0;
      t0[s] = t1[s] = t2[s] = -1;
      v0[s] = v1[s] = v2[s] = kNone;
    }
    for (int g = 0; g < num_gpus_; ++g) {
      const double* x = &samples_.gpu[uz(g) * S];
#pragma omp simd
      for (std::size_t s = 0; s < S; ++s) {
        const double v = x[s];
        mean[s] += v;
        const bool c0 = v > v0[s];
        const bool c1 = v > v1[s];
        const bool c2 = v > v2[s];
        v2[s] = c1 ? v1[s] : (c2 ? v : v2[s]);
        t2[s] = c1 ? t1[s] : (c2 ? g : t2[s]);
        v1[s] = c0 ? v0[s] : (c1 ? v : v1[s]);
        t1[s] = c0 ? t0[s] : (c1 ? g : t1[s]);
        v0[s] = c0 ? v : v0[s];
        t0[s] = c0 ? g : t0[s];
      }
    }
    const double inv_gpus = 1.0 / num_gpus_;
    for (std::size_t s = 0; s < S; ++s) {
      mean[s] *= inv_gpus;
      if (t1[s] < 0) v1[s] = 0.0;
      if (t2[s] < 0) v2[s] = 0.0;
    }
  }

  // GPUs that are the maximum in at least one sample, most frequent first.
  std::vector<int> hot_gpus() const {
    std::vector<int> hits(uz(num_gpus_), 0);
    for (const int t : samples_.top[0]) ++hits[uz(t)];
    std::vector<int> order;
    for (int g = 0; g < num_gpus_; ++g) {
      if (hits[uz(g)] > 0) order.push_back(g);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return hits[uz(a)] > hits[uz(b)]; });
    return order;
  }

  bool fitted_allowed(int g, double new_load) const {
    return new_load <= fit_cap_ || new_load <= fit_[uz(g)] * (1.0 - kMargin);
  }

  // balance_bound(g1, g2), computed once between two swaps (it is symmetric in the GPUs: the
  // largest load off both is the same whichever is the source).
  double pair_bound(int g1, int g2) {
    const auto k = uz(std::min(g1, g2) * num_gpus_ + std::max(g1, g2));
    if (bound_at_.size() != uz(num_gpus_) * uz(num_gpus_)) {
      bound_at_.assign(uz(num_gpus_) * uz(num_gpus_), -1);
      bound_.assign(bound_at_.size(), 0.0);
    }
    if (bound_at_[k] != stamp_) {
      bound_[k] = balance_bound(g1, g2);
      bound_at_[k] = stamp_;
    }
    return bound_[k];
  }

  // weight_, each sample's mean (0 for a sample with no tokens: it scores 1 whatever the map),
  // and src_base_ = Σ_s weight_s / max_s, kept until the samples change.
  void prepare_weights() {
    if (weights_at_ == stamp_) return;
    const auto S = uz(samples_.size());
    weight_.resize(S);
    double base = 0.0;
    for (std::size_t s = 0; s < S; ++s) {
      const double v0 = samples_.topv[0][s];
      const bool busy = v0 > 0.0;
      weight_[s] = busy ? samples_.mean[s] : 0.0;
      if (busy) base += samples_.mean[s] / v0;
    }
    src_base_ = base;
    weights_at_ = stamp_;
  }

  // The samples seen from source GPU g1, kept per GPU until the samples change: ex1 / a1, the
  // largest load of a GPU other than g1 and that GPU; ex2, the largest of a GPU other than g1
  // and a1 ([G·S] each, g1's row); with prepare_weights.
  void prepare_source(int g1) {
    prepare_weights();
    src_gpu_ = g1;
    const auto S = uz(samples_.size());
    if (src_at_.size() != uz(num_gpus_)) {
      src_at_.assign(uz(num_gpus_), -1);
      ex1_.resize(uz(num_gpus_) * S);
      ex2_.resize(uz(num_gpus_) * S);
      a1_.resize(uz(num_gpus_) * S);
    }
    if (src_at_[uz(g1)] == stamp_) return;
    double* ex1 = &ex1_[uz(g1) * S];
    double* ex2 = &ex2_[uz(g1) * S];
    int* a1 = &a1_[uz(g1) * S];
    const int* top0 = samples_.top[0].data();
    const int* top1 = samples_.top[1].data();
    const double* val0 = samples_.topv[0].data();
    const double* val1 = samples_.topv[1].data();
    const double* val2 = samples_.topv[2].data();
    // Branch-free (selects), so the compiler can vectorise it.
#pragma omp simd
    for (std::size_t s = 0; s < S; ++s) {
      const bool first = top0[s] == g1;
      const bool second = top1[s] == g1;
      ex1[s] = first ? val1[s] : val0[s];
      a1[s] = first ? top1[s] : top0[s];
      ex2[s] = first || second ? val2[s] : val1[s];
    }
    src_at_[uz(g1)] = stamp_;
  }

  // other_[s]: the largest load of a GPU other than the source GPU (prepare_source's) and g2
  // (any positive value for a sample with no tokens).
  void prepare_other(int g2) {
    if (other_for_ == g2 && other_src_ == src_gpu_ && other_at_ == stamp_) return;
    const auto S = uz(samples_.size());
    other_.resize(S);
    const double* ex1 = &ex1_[uz(src_gpu_) * S];
    const double* ex2 = &ex2_[uz(src_gpu_) * S];
    const int* a1 = &a1_[uz(src_gpu_) * S];
    for (std::size_t s = 0; s < S; ++s) {
      other_[s] = weight_[s] > 0.0 ? (a1[s] == g2 ? ex2[s] : ex1[s]) : 1.0;
    }
    other_for_ = g2;
    other_src_ = src_gpu_;
    other_at_ = stamp_;
  }

  // An upper bound on swap_gain(i, j) for every slot i of g1 and j of g2: whatever is
  // swapped, the two GPUs' loads still sum to l1 + l2, so the larger is at least half of it.
  double balance_bound(int g1, int g2) {
    prepare_source(g1);
    prepare_other(g2);
    const auto S = uz(samples_.size());
    const double* l1 = &samples_.gpu[uz(g1) * S];
    const double* l2 = &samples_.gpu[uz(g2) * S];
    const double acc = balance_sum(S, [=](std::size_t s) { return 0.5 * (l1[s] + l2[s]); });
    return S > 0 ? (acc - src_base_) / static_cast<double>(S) : 0.0;
  }

  // Σ_s weight_s / max(peak(s), other_s): the sampled balance when the two GPUs of a swap peak
  // at peak(s) (inlined into the one pass over the samples the compiler can vectorise; the
  // maxima as selects).
  template <class Peak>
  double balance_sum(std::size_t S, Peak peak) const {
    const double* other = other_.data();
    const double* weight = weight_.data();
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (std::size_t s = 0; s < S; ++s) {
      const double m = peak(s);
      acc += weight[s] / (m < other[s] ? other[s] : m);
    }
    return acc;
  }

  // Whether slots i and j may swap: two experts on two GPUs, and the fitted cap allows it.
  bool swap_allowed(int i, int j, int g1, int g2) const {
    if (slot_[uz(i)] == slot_[uz(j)] || g1 == g2) return false;
    const double dfit = fit_slot(i) - fit_slot(j);
    return fitted_allowed(g1, fit_[uz(g1)] - dfit) && fitted_allowed(g2, fit_[uz(g2)] + dfit);
  }

  // Gain in Σ_s mean_s / max_s / S of swapping slots i and j (a pair swap_allowed admits).
  double swap_gain(int i, int j) {
    const int g1 = gpu_of(i);
    prepare_source(g1);
    prepare_other(gpu_of(j));
    const auto S = uz(samples_.size());
    return S > 0 ? (pair_sum(slot_[uz(i)], slot_[uz(j)], g1, gpu_of(j), S) - src_base_) /
                       static_cast<double>(S)
                 : 0.0;
  }

  // The swap of a slot on g1 with a slot of its domain that most raises the sampled balance:
  // swap_gain(i, j) for every allowed pair, computed in bulk. For each sample, the largest load of
  // a GPU other than g1 and g2 is the largest other than g1 (ex1, on GPU a1) unless a1 is g2, then
  // the next (ex2); with it a pair's gain is one branch-free pass over the samples.
  bool sample_swap_from(int g1, int& evals) {
    const int d = domain_of(g1);
    const int num_samples = samples_.size();
    const auto S = uz(num_samples);
    if (S == 0) return false;
    prepare_source(g1);
    const double base = src_base_;  // Σ_s mean_s / max_s over the samples with tokens
    const int first = d * gpus_per_domain_ * spg_;
    const int last = (d + 1) * gpus_per_domain_ * spg_;
    fit_slots(first, last);
    int best_i = -1, best_j = -1;
    double best_gain = kGainEps;
    std::vector<int>& allowed = allowed_;
    const double f1 = fit_[uz(g1)];
    const double f1_lower = f1 * (1.0 - kMargin);
    const double cap = fit_cap_;
    // The fitted cap rules out most pairs: which pairs it allows (fitted_allowed on both GPUs),
    // for each slot of g1 against every slot of the domain in one branch-free pass, before
    // touching samples. (ok_ row x: g1's slot x against the slots [first, last).)
    const auto row = uz(last - first);
    ok_.resize(uz(spg_) * row);
    const double* sf = slot_fit_.data();
    const double* gf = slot_gpu_fit_.data();
    const int* se = slot_.data();
    for (int x = 0; x < spg_; ++x) {
      const double sf1 = sf[g1 * spg_ + x];
      const int e1 = se[g1 * spg_ + x];
      char* ok = &ok_[uz(x) * row];
#pragma omp simd
      for (int k = first; k < last; ++k) {
        const double dfit = sf1 - sf[k];
        const double n1 = f1 - dfit;
        const double n2 = gf[k] + dfit;
        ok[k - first] = static_cast<char>((se[k] != e1) & ((n1 <= cap) | (n1 <= f1_lower)) &
                                          ((n2 <= cap) | (n2 <= gf[k] * (1.0 - kMargin))));
      }
    }
    for (int g2 = d * gpus_per_domain_; g2 < (d + 1) * gpus_per_domain_; ++g2) {
      if (g2 == g1) continue;
      const auto col = uz(g2 * spg_ - first);
      bool any = false;
      for (int x = 0; x < spg_ && !any; ++x) {
        const char* ok = &ok_[uz(x) * row + col];
        for (int y = 0; y < spg_; ++y) any = any || ok[y] != 0;
      }
      evals += spg_ * spg_;
      if (!any) continue;
      for (int i = g1 * spg_; i < (g1 + 1) * spg_; ++i) {
        const int a = slot_[uz(i)];
        allowed.clear();
        const char* ok = &ok_[uz(i - g1 * spg_) * row + col];
        for (int y = 0; y < spg_; ++y) {
          if (ok[y] != 0) allowed.push_back(g2 * spg_ + y);
        }
        if (allowed.empty()) continue;
        prepare_other(g2);
        // One pair is scored in one pass; several share the loads with a moved (move_out).
        const bool one = allowed.size() == 1;
        if (!one) move_out(a, g1, g2);
        for (const int j : allowed) {
          const int b = slot_[uz(j)];
          const double sum =
              one ? pair_sum(a, b, g1, g2, S) : swap_sum(&samples_.frac[uz(b) * S], S);
          const double gain = (sum - base) / num_samples;
          if (gain > best_gain) {
            best_gain = gain;
            best_i = i;
            best_j = j;
          }
        }
      }
    }
    if (best_i < 0) return false;
    apply_swap(best_i, best_j);
    return true;
  }

  // p1_, p2_: GPUs g1's and g2's loads in every sample with expert a's replica moved from g1 to
  // g2 (what swap_sum adds expert b's move back to).
  void move_out(int a, int g1, int g2) {
    const auto S = uz(samples_.size());
    p1_.resize(S);
    p2_.resize(S);
    const double* fa = &samples_.frac[uz(a) * S];
    const double* l1 = &samples_.gpu[uz(g1) * S];
    const double* l2 = &samples_.gpu[uz(g2) * S];
    for (std::size_t s = 0; s < S; ++s) {
      p1_[s] = l1[s] - fa[s];
      p2_[s] = l2[s] + fa[s];
    }
  }

  // swap_sum for one pair without move_out: Σ_s weight_s / max(l1_s − fa_s + fb_s,
  // l2_s + fa_s − fb_s, other_s), the same sums in the same order.
  double pair_sum(int a, int b, int g1, int g2, std::size_t S) const {
    const double* fa = &samples_.frac[uz(a) * S];
    const double* fb = &samples_.frac[uz(b) * S];
    const double* l1 = &samples_.gpu[uz(g1) * S];
    const double* l2 = &samples_.gpu[uz(g2) * S];
    return balance_sum(S, [=](std::size_t s) {
      const double p1 = l1[s] - fa[s];
      const double p2 = l2[s] + fa[s];
      const double u = p1 + fb[s];
      const double v = p2 - fb[s];
      return u < v ? v : u;
    });
  }

  // Σ_s weight_s / max(p1_s + fb_s, p2_s − fb_s, other_s): the sampled balance after moving
  // expert a (already in p1_, p2_) from g1 to g2 and expert b (fb) back.
  double swap_sum(const double* fb, std::size_t S) const {
    const double* p1 = p1_.data();
    const double* p2 = p2_.data();
    return balance_sum(S, [=](std::size_t s) {
      const double u = p1[s] + fb[s];
      const double v = p2[s] - fb[s];
      return u < v ? v : u;
    });
  }

  // Swaps slots i and j and updates what depends on them: the two GPUs' fitted and sampled
  // loads, each sample's mean and top three, the node counts of a locality search.
  void apply_swap(int i, int j) {
    if (!pairs_.empty()) {
      const int a = slot_[uz(i)];
      const int b = slot_[uz(j)];
      --node_cnt_[uz(a * num_nodes_ + node_of_slot(i))];
      ++node_cnt_[uz(a * num_nodes_ + node_of_slot(j))];
      --node_cnt_[uz(b * num_nodes_ + node_of_slot(j))];
      ++node_cnt_[uz(b * num_nodes_ + node_of_slot(i))];
      remask(a);
      remask(b);
    }
    swap_slots(i, j);
    refresh_gpu(gpu_of(i));
    refresh_gpu(gpu_of(j));
    refresh_stats();
    ++stamp_;
  }

  // The co-activation counts and every expert's node set; with `tables`, also the split tables
  // cut_delta reads.
  void init_pairs(const std::vector<double>& pairs, bool tables) {
    pairs_ = pairs;
    total_pairs_ = 0.0;
    for (const double p : pairs_) total_pairs_ += p;
    total_pairs_ /= 2.0;
    node_cnt_.assign(uz(num_experts_ * num_nodes_), 0);
    for (int s = 0; s < num_slots_; ++s)
      ++node_cnt_[uz(slot_[uz(s)] * num_nodes_ + node_of_slot(s))];
    words_ = (num_nodes_ + 63) / 64;
    node_mask_.assign(uz(num_experts_) * uz(words_), 0);
    tabled_ = false;  // remask keeps no table while it is built
    for (int e = 0; e < num_experts_; ++e) remask(e);
    tabled_ = tables;
    if (!tabled_) return;
    // split_[x·M + m] = Σ_{f ≠ x} pairs(x, f) · [m ∩ nodes(f) = ∅] for every node set m: the
    // pairs of x that node set m would leave split. Built per x from the weight of each node
    // set among x's partners.
    const int M = 1 << num_nodes_;
    split_.assign(uz(num_experts_) * uz(M), 0.0);
    std::vector<double> by_set(uz(M));
    for (int x = 0; x < num_experts_; ++x) {
      std::fill(by_set.begin(), by_set.end(), 0.0);
      for (int f = 0; f < num_experts_; ++f) {
        if (f != x) by_set[node_mask_[uz(f)]] += pairs_[uz(x * num_experts_ + f)];
      }
      // by_set's sums over subsets (each node bit folded in turn): by_set[u] becomes the
      // weight of the partners whose node set lies inside u; node set m leaves split exactly
      // those inside its complement. (Whole-number counts sum exactly in any order.)
      double* sums = by_set.data();
      for (int bit = 1; bit < M; bit <<= 1) {
        for (int base = 0; base < M; base += 2 * bit) {
#pragma omp simd
          for (int k = base; k < base + bit; ++k) sums[k + bit] += sums[k];
        }
      }
      // The complement of m is M − 1 − m.
      double* row = &split_[uz(x) * uz(M)];
      for (int m = 0; m < M; ++m) row[m] = sums[M - 1 - m];
    }
  }

  // Expert e's node set as bits (one word per 64 nodes), from its node counts; with few nodes,
  // the split table of every partner of e follows its new set.
  void remask(int e) {
    std::uint64_t* m = &node_mask_[uz(e) * uz(words_)];
    const std::uint64_t before = m[0];
    std::fill(m, m + words_, 0);
    for (int n = 0; n < num_nodes_; ++n) {
      if (node_cnt_[uz(e * num_nodes_ + n)] > 0) m[n / 64] |= std::uint64_t{1} << (n % 64);
    }
    if (!tabled_ || m[0] == before) return;
    const std::uint64_t after = m[0];
    const int M = 1 << num_nodes_;
    // Which node sets leave e split from a partner now and did not before (+1), or the reverse
    // (−1): the same for every partner.
    set_delta_.resize(uz(M));
    double* delta = set_delta_.data();
    for (int t = 0; t < M; ++t) {
      const auto mt = static_cast<std::uint64_t>(t);
      delta[t] = static_cast<double>((mt & after) == 0) - static_cast<double>((mt & before) == 0);
    }
    for (int x = 0; x < num_experts_; ++x) {
      const double c = pairs_[uz(x * num_experts_ + e)];
      if (x == e || c == 0.0) continue;
      double* row = &split_[uz(x) * uz(M)];
#pragma omp simd
      for (int t = 0; t < M; ++t) row[t] += c * delta[t];
    }
  }

  // Change in the fraction of co-activated pairs with no common node when slots i and j (on two
  // nodes) swap: only a's and b's node sets change, so each pair is one AND of node sets.
  double cut_delta(int i, int j) {
    if (!(total_pairs_ > 0.0)) return 0.0;
    const int a = slot_[uz(i)];
    const int b = slot_[uz(j)];
    const int ni = node_of_slot(i);
    const int nj = node_of_slot(j);
    if (tabled_) {
      // a and b after the swap: a leaves ni (if it was its last replica there) and reaches nj;
      // b the other way. Only a's and b's sets change, so the change is read off their split
      // tables.
      const auto M = uz(1 << num_nodes_);
      const std::uint64_t ma = node_mask_[uz(a)];
      const std::uint64_t mb = node_mask_[uz(b)];
      std::uint64_t na = ma | (std::uint64_t{1} << nj);
      if (node_cnt_[uz(a * num_nodes_ + ni)] == 1) na &= ~(std::uint64_t{1} << ni);
      std::uint64_t nb = mb | (std::uint64_t{1} << ni);
      if (node_cnt_[uz(b * num_nodes_ + nj)] == 1) nb &= ~(std::uint64_t{1} << nj);
      const double* sa = &split_[uz(a) * M];
      const double* sb = &split_[uz(b) * M];
      const double cab = pairs_[uz(a * num_experts_ + b)];
      const auto split = [](std::uint64_t x, std::uint64_t y) {
        return static_cast<double>((x & y) == 0);
      };
      // Σ_{f ≠ a, b} pairs(a, f) · ([na ∩ f = ∅] − [ma ∩ f = ∅]) is a's table at na less at ma,
      // each less the pair (a, b) at b's present set: at na that term is 0 (a arrives on nj,
      // where b is), at ma it is cab · [ma ∩ mb = ∅]; the same for b (b arrives on ni, where a
      // is). The pair (a, b) itself goes from [ma ∩ mb = ∅] to [na ∩ nb = ∅].
      const double delta =
          sa[na] - sa[ma] + sb[nb] - sb[mb] + cab * (split(ma, mb) + split(na, nb));
      return delta / total_pairs_;
    }
    const auto W = uz(words_);
    // a and b after the swap: a leaves ni (if it was its last replica there) and reaches nj; b
    // the other way.
    after_a_.assign(&node_mask_[uz(a) * W], &node_mask_[uz(a) * W] + W);
    after_b_.assign(&node_mask_[uz(b) * W], &node_mask_[uz(b) * W] + W);
    const auto bit = [](int n) { return std::uint64_t{1} << (n % 64); };
    if (node_cnt_[uz(a * num_nodes_ + ni)] == 1) after_a_[uz(ni / 64)] &= ~bit(ni);
    after_a_[uz(nj / 64)] |= bit(nj);
    if (node_cnt_[uz(b * num_nodes_ + nj)] == 1) after_b_[uz(nj / 64)] &= ~bit(nj);
    after_b_[uz(ni / 64)] |= bit(ni);
    const auto share = [W](const std::uint64_t* x, const std::uint64_t* y) {
      for (std::size_t w = 0; w < W; ++w) {
        if ((x[w] & y[w]) != 0) return true;
      }
      return false;
    };
    double delta = 0.0;
    for (const int x : {a, b}) {
      const std::uint64_t* before_x = &node_mask_[uz(x) * W];
      const std::uint64_t* after_x = x == a ? after_a_.data() : after_b_.data();
      for (int f = 0; f < num_experts_; ++f) {
        if (f == x || (x == b && f == a)) continue;
        const double c = pairs_[uz(x * num_experts_ + f)];
        if (c == 0.0) continue;
        const std::uint64_t* before_f = &node_mask_[uz(f) * W];
        const std::uint64_t* after_f = f == b ? after_b_.data() : before_f;  // f ≠ a here
        const bool before_split = !share(before_x, before_f);
        const bool after_split = !share(after_x, after_f);
        delta += c * (static_cast<double>(after_split) - static_cast<double>(before_split));
      }
    }
    return delta / total_pairs_;
  }

  const std::vector<double>* w_;
  std::vector<int> slot_;
  int num_experts_;
  int num_slots_;
  int num_gpus_;
  int num_nodes_;
  int spg_;
  int gpus_per_node_;
  int gpus_per_domain_;
  std::vector<int> cnt_;
  std::vector<std::vector<int>> where_;  // slots of each expert
  std::vector<double> fit_;
  double fit_cap_ = 0.0;
  SampleSet samples_;
  std::vector<double> pairs_;
  double total_pairs_ = 0.0;
  std::vector<int> node_cnt_;             // [E·nodes]
  int words_ = 0;                         // 64-bit words per node set
  std::vector<std::uint64_t> node_mask_;  // [E·words]: each expert's nodes as bits
  // With few nodes, cut_delta reads [E·2^nodes] split tables (init_pairs).
  bool tabled_ = false;
  std::vector<double> split_;
  std::vector<double> set_delta_;  // remask: each node set's change in e's split indicator
  std::vector<std::uint64_t> after_a_, after_b_;  // cut_delta: a's and b's node sets after
  std::vector<double> bound_;                     // [G·G] pair_bound's values (lower GPU first)
  std::vector<long> bound_at_;  // [G·G] the stamp_ each was computed at (−1: never)
  std::vector<double> trial_;   // improve_by_replica's scratch loads
  std::vector<char> touched_;   // improve_by_replica: GPUs holding the replaced expert
  // sample_swap_from's per-sample scratch ([S] each).
  std::vector<double> ex1_, ex2_, other_, weight_, p1_, p2_, slot_fit_;
  std::vector<double> slot_gpu_fit_;  // improve_by_swap, sample_swap_from: each slot's GPU's fit
  std::vector<int> a1_, allowed_;
  long stamp_ = 0;            // the samples' state: new samples or a swap change it
  long weights_at_ = -1;      // the stamp_ weight_ and src_base_ are for
  double src_base_ = 0.0;     // Σ_s weight_s / max_s
  int src_gpu_ = -1;          // the last prepare_source's GPU
  std::vector<long> src_at_;  // [G] the stamp_ each GPU's ex1_, ex2_, a1_ rows are for
  int other_for_ = -1;        // prepare_other's GPU, source GPU and stamp_
  int other_src_ = -1;
  long other_at_ = -1;
  std::vector<char> ok_;  // sample_swap_from: the fitted cap's verdict on each slot pair
  const std::vector<double>* rows_data_ = nullptr;  // the rows samples_.rows transposes
};

// Samples laid out for scoring maps: [E·S] (expert-major) and each sample's total tokens.
struct CheckRows {
  std::size_t num_samples = 0;
  std::vector<double> rows;
  std::vector<double> total;
};

CheckRows check_rows(Rows rows, int num_experts) {
  CheckRows c;
  const std::size_t S = rows.size();
  c.num_samples = S;
  transpose_rows(rows, uz(num_experts), c.rows);
  // Each sample's experts summed in expert order.
  c.total.assign(S, 0.0);
  for (std::size_t e = 0; e < uz(num_experts); ++e) {
    const double* r = &c.rows[e * S];
#pragma omp simd
    for (std::size_t s = 0; s < S; ++s) c.total[s] += r[s];
  }
  return c;
}

// Each sample's mean GPU load / max GPU load (1 for samples with no tokens): a GPU's load is
// its slots' tokens per replica summed in slot order, all samples at once.
std::vector<double> sampled_balance(const std::vector<int>& map, const CheckRows& c, int num_gpus) {
  const std::size_t S = c.num_samples;
  std::vector<double> out;
  if (S == 0) return out;
  const std::size_t num_experts = c.rows.size() / S;
  std::vector<double> inv(num_experts, 0.0);
  for (const int e : map) inv[uz(e)] += 1.0;
  for (double& x : inv) x = x > 0.0 ? 1.0 / x : 0.0;
  const std::size_t per_gpu = map.size() / uz(num_gpus);
  std::vector<double> peak(S, 0.0);
  std::vector<double> sum(S);
  for (std::size_t g = 0; g < uz(num_gpus); ++g) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (std::size_t k = g * per_gpu; k < (g + 1) * per_gpu; ++k) {
      const auto e = uz(map[k]);
      const double* r = &c.rows[e * S];
      const double f = inv[e];
      double* acc = sum.data();
#pragma omp simd
      for (std::size_t s = 0; s < S; ++s) acc[s] += r[s] * f;
    }
    for (std::size_t s = 0; s < S; ++s) peak[s] = std::max(peak[s], sum[s]);
  }
  out.resize(S);
  for (std::size_t s = 0; s < S; ++s) {
    out[s] = peak[s] > 0.0 ? c.total[s] / num_gpus / peak[s] : 1.0;
  }
  return out;
}

// Mean of the paired per-sample gain of `candidate` over `base` when it is significant
// (mean > 3 standard errors), else −inf.
double significant_gain(const std::vector<double>& candidate, const std::vector<double>& base) {
  const auto n = static_cast<double>(candidate.size());
  if (candidate.size() < 2) return -std::numeric_limits<double>::infinity();
  double mean = 0.0;
  for (std::size_t s = 0; s < candidate.size(); ++s) mean += candidate[s] - base[s];
  mean /= n;
  double var = 0.0;
  for (std::size_t s = 0; s < candidate.size(); ++s) {
    const double d = candidate[s] - base[s] - mean;
    var += d * d;
  }
  var /= n - 1.0;
  return mean > 3.0 * std::sqrt(var / n) ? mean : -std::numeric_limits<double>::infinity();
}

// Candidate maps with other replica counts: for a slot-size target θ (a fraction of the mean
// GPU load), expert e gets max(1, ⌈w_e / θ⌉) replicas, the slots left over replicate the
// lightest items, and each domain (a node in hierarchical mode, else the machine) is packed
// greedily with its slot count per GPU. Greedy replication minimises the largest replica, but with
// a fixed number of slots per GPU many mid-sized replicas may not pack evenly; bigger, fewer
// replicas of the hot experts and small fillers can. EPLB's own map is always a candidate too.
std::vector<std::vector<int>> count_candidates(const std::vector<double>& w,
                                               const std::vector<int>& eplb_map, int num_gpus,
                                               int num_domains) {
  const int num_slots = static_cast<int>(eplb_map.size());
  const int slots_per_domain = num_slots / num_domains;
  const int gpus_per_domain = num_gpus / num_domains;
  const int spg = num_slots / num_gpus;
  std::vector<std::vector<int>> out;
  static constexpr std::array<double, 12> kRatios{2.0, 1.5, 1.25, 1.1, 1.0, 0.9,
                                                  0.8, 0.7, 0.6,  0.5, 0.4, 0.3};
  // Each domain's experts, as EPLB placed them (ascending), and their total load: the same for
  // every ratio.
  std::vector<std::vector<int>> experts(uz(num_domains));
  std::vector<double> totals(uz(num_domains), 0.0);
  for (int d = 0; d < num_domains; ++d) {
    auto& list = experts[uz(d)];
    list.assign(eplb_map.begin() + d * slots_per_domain,
                eplb_map.begin() + (d + 1) * slots_per_domain);
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    for (const int e : list) totals[uz(d)] += w[uz(e)];
  }
  std::vector<std::vector<int>> seen;  // every domain's replica counts, one candidate each
  std::vector<int> counts_key;
  std::vector<std::pair<double, std::size_t>> light;  // (replica size, index) heap
  std::vector<std::pair<double, int>> open;           // (load, GPU) heap
  std::vector<std::pair<double, int>> items;
  std::vector<int> fill;
  for (const double ratio : kRatios) {
    // Every domain's replica counts first: a ratio giving counts already seen is skipped before
    // any packing.
    counts_key.clear();
    bool ok = true;
    for (int d = 0; d < num_domains && ok; ++d) {
      const auto& list = experts[uz(d)];
      const double theta = ratio * totals[uz(d)] / gpus_per_domain;
      if (!(theta > 0.0)) {
        ok = false;
        break;
      }
      const std::size_t first = counts_key.size();
      int used = 0;
      for (const int e : list) {
        counts_key.push_back(std::max(1, static_cast<int>(std::ceil(w[uz(e)] / theta))));
        used += counts_key.back();
      }
      if (used > slots_per_domain) {
        ok = false;
        break;
      }
      // Leftover slots hold extra replicas of the lightest items: small fillers that let
      // every GPU reach its slot count without adding a mid-sized item. (A heap of (replica
      // size, index): the lightest, the lowest index on ties.)
      if (used < slots_per_domain) {
        int* cnt = &counts_key[first];
        light.clear();
        for (std::size_t i = 0; i < list.size(); ++i)
          light.emplace_back(w[uz(list[i])] / cnt[i], i);
        std::make_heap(light.begin(), light.end(), std::greater<>{});
        for (; used < slots_per_domain; ++used) {
          std::pop_heap(light.begin(), light.end(), std::greater<>{});
          const std::size_t pick = light.back().second;
          ++cnt[pick];
          light.back().first = w[uz(list[pick])] / cnt[pick];
          std::push_heap(light.begin(), light.end(), std::greater<>{});
        }
      }
    }
    if (!ok || std::find(seen.begin(), seen.end(), counts_key) != seen.end()) continue;
    seen.push_back(counts_key);
    std::vector<int> map(eplb_map.size(), -1);
    std::size_t key = 0;
    for (int d = 0; d < num_domains; ++d) {
      const auto& list = experts[uz(d)];
      const int* cnt = &counts_key[key];
      key += list.size();
      // Greedy packing with exactly spg items per GPU: the largest item first (the domain's
      // expert order, then replica order, on ties).
      items.clear();
      for (std::size_t i = 0; i < list.size(); ++i) {
        for (int k = 0; k < cnt[i]; ++k) items.emplace_back(w[uz(list[i])] / cnt[i], list[i]);
      }
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      // Each item to the least loaded GPU with a free slot (the lowest index on ties): a heap
      // of (load, GPU) holding the GPUs not yet full.
      fill.assign(uz(gpus_per_domain), 0);
      open.clear();
      for (int k = 0; k < gpus_per_domain; ++k) open.emplace_back(0.0, k);
      for (const auto& [size, e] : items) {
        std::pop_heap(open.begin(), open.end(), std::greater<>{});
        auto& [load, g] = open.back();
        const int gpu = d * gpus_per_domain + g;
        map[uz(gpu * spg + fill[uz(g)])] = e;
        load += size;
        if (++fill[uz(g)] < spg) {
          std::push_heap(open.begin(), open.end(), std::greater<>{});
        } else {
          open.pop_back();
        }
      }
    }
    out.push_back(std::move(map));
  }
  return out;
}

}  // namespace

std::vector<int> best_layer_map(const std::vector<double>& counts, const std::vector<int>& map,
                                const PlacementConfig& config, int num_slots,
                                const BestOptions& best, int l) {
  const bool node_domains = config.hierarchical() && config.num_nodes > 1;
  // Phase A on EPLB's map and on maps with other replica counts; the lowest fitted
  // maximum wins (EPLB's map on ties).
  LayerSearch search(counts, map, config.num_gpus, config.num_nodes, node_domains);
  const double eplb_max = search.fitted_max();
  search.reduce_fitted_max(4 * num_slots);
  auto candidates =
      count_candidates(counts, map, config.num_gpus, node_domains ? config.num_nodes : 1);
  if (!candidates.empty()) {
    // One search object for every candidate (its storage reused), swapped in when it wins.
    LayerSearch other(counts, std::move(candidates[0]), config.num_gpus, config.num_nodes,
                      node_domains);
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      if (c > 0) other.assign(std::move(candidates[c]));
      other.reduce_fitted_max(4 * num_slots);
      if (other.fitted_max() < search.fitted_max() * (1.0 - 1e-9)) std::swap(search, other);
    }
  }
  const std::vector<int> fitted = search.slots();
  const bool has_pairs = !best.coactivation.pairs.empty();
  const auto& all = best.samples.empty() ? std::vector<std::vector<double>>{} : best.samples[uz(l)];
  // The first half of the samples drives the search; the second half checks the result
  // against EPLB's map, so noise the search fitted does not decide.
  const std::size_t half = all.size() / 2;
  const Rows train(all.data(), half);
  const Rows check(all.data() + half, all.size() - half);
  if (!train.empty()) search.optimise_samples(train, best.max_evaluations_per_layer);
  std::vector<int> chosen = search.slots();
  if (!check.empty()) {
    // A refinement replaces EPLB's map only when its gain on the check half is
    // significant; otherwise the map stays EPLB's (equal, never worse, on every score).
    // A map equal to EPLB's gains nothing (−inf, as significant_gain gives it), and a map equal
    // to the fitted one gains what it gains: neither is scored again.
    const CheckRows rows = check_rows(check, static_cast<int>(counts.size()));
    const auto base = sampled_balance(map, rows, config.num_gpus);
    const auto gain_of = [&](const std::vector<int>& m) {
      return m == map ? -std::numeric_limits<double>::infinity()
                      : significant_gain(sampled_balance(m, rows, config.num_gpus), base);
    };
    const double gain_fitted = gain_of(fitted);
    const double gain_search = search.slots() == fitted ? gain_fitted : gain_of(search.slots());
    if (gain_search > 0.0 && gain_search >= gain_fitted) {
      chosen = search.slots();
    } else if (gain_fitted > 0.0) {
      chosen = fitted;
    } else {
      chosen = map;
    }
  }
  if (has_pairs && best.locality_weight > 0.0) {
    // Locality is a trade: it may give back balance down to EPLB's fitted maximum.
    const std::vector<std::vector<double>> fitted_only{counts};
    LayerSearch local(counts, chosen, config.num_gpus, config.num_nodes, node_domains);
    if (!train.empty()) local.take_rows(search);
    local.optimise_locality(train.empty() ? Rows(fitted_only) : train,
                            best.coactivation.pairs[uz(l)], best.locality_weight,
                            best.max_evaluations_per_layer, static_cast<std::uint64_t>(l) + 1U,
                            eplb_max, best.locality_table_nodes);
    chosen = local.slots();
  }
  return chosen;
}

}  // namespace moeplan::planner
