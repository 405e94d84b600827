// Checks of every collective with exact expected data, run on any Communicator: in-process
// threads (kernels_test) and MPI processes (mpi_test under mpirun).
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/communicator.hpp"

namespace moeplan::kernels::testing {

// Rank r's value i: distinct across ranks and positions, exact in fp32.
inline float value(int rank, std::size_t i) {
  return static_cast<float>(rank * 1000) + static_cast<float>(i);
}

inline void check_collectives(Communicator& c) {
  const int n = c.size();
  const int me = c.rank();
  const auto un = static_cast<std::size_t>(n);
  c.barrier();

  // all_reduce_sum: Σ_r (1000 r + i) = 1000·n(n−1)/2 + n·i.
  std::vector<float> sum(5);
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = value(me, i);
  c.all_reduce_sum(sum);
  for (std::size_t i = 0; i < sum.size(); ++i) {
    EXPECT_EQ(sum[i], 1000.0F * static_cast<float>(n * (n - 1) / 2) +
                          static_cast<float>(n) * static_cast<float>(i));
  }

  std::vector<std::int64_t> mx{me, -me, 7};
  c.all_reduce_max(mx);
  EXPECT_EQ(mx, (std::vector<std::int64_t>{n - 1, 0, 7}));

  // all_gather: block r = rank r's 3 values.
  std::vector<float> mine(3), all(3 * un);
  for (std::size_t i = 0; i < 3; ++i) mine[i] = value(me, i);
  c.all_gather(mine.data(), 3 * sizeof(float), all.data());
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_EQ(all[static_cast<std::size_t>(r) * 3 + i], value(r, i));
  }

  // all_gather_v: rank r sends r + 1 values.
  std::vector<std::size_t> bytes(un), offs(un);
  std::size_t total = 0;
  for (int r = 0; r < n; ++r) {
    bytes[static_cast<std::size_t>(r)] = static_cast<std::size_t>(r + 1) * sizeof(float);
    offs[static_cast<std::size_t>(r)] = total;
    total += bytes[static_cast<std::size_t>(r)];
  }
  std::vector<float> vsend(static_cast<std::size_t>(me + 1));
  for (std::size_t i = 0; i < vsend.size(); ++i) vsend[i] = value(me, i);
  std::vector<float> vrecv(total / sizeof(float));
  c.all_gather_v(vsend.data(), vsend.size() * sizeof(float), vrecv.data(), bytes, offs);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i <= r; ++i) {
      EXPECT_EQ(
          vrecv[offs[static_cast<std::size_t>(r)] / sizeof(float) + static_cast<std::size_t>(i)],
          value(r, static_cast<std::size_t>(i)));
    }
  }

  // all_to_all: block d of rank s holds value(s, d); receiver d gets value(s, d) in block s.
  std::vector<float> a2a_send(un * 2), a2a_recv(un * 2);
  for (std::size_t d = 0; d < un; ++d) {
    a2a_send[2 * d] = value(me, d);
    a2a_send[2 * d + 1] = -value(me, d);
  }
  c.all_to_all(a2a_send.data(), 2 * sizeof(float), a2a_recv.data());
  for (int s = 0; s < n; ++s) {
    EXPECT_EQ(a2a_recv[2 * static_cast<std::size_t>(s)], value(s, static_cast<std::size_t>(me)));
    EXPECT_EQ(a2a_recv[2 * static_cast<std::size_t>(s) + 1],
              -value(s, static_cast<std::size_t>(me)));
  }

  // all_to_all_v: rank s sends (s + d) % 3 values to d, each value(s, d).
  auto count = [](int s, int d) { return static_cast<std::size_t>((s + d) % 3); };
  std::vector<std::size_t> sb(un), so(un), rb(un), ro(un);
  std::size_t st = 0;
  std::size_t rt = 0;
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    sb[ur] = count(me, r) * sizeof(float);
    so[ur] = st;
    st += sb[ur];
    rb[ur] = count(r, me) * sizeof(float);
    ro[ur] = rt;
    rt += rb[ur];
  }
  std::vector<float> vs(st / sizeof(float)), vr(rt / sizeof(float), -1.0F);
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count(me, r); ++i)
      vs[so[static_cast<std::size_t>(r)] / sizeof(float) + i] =
          value(me, static_cast<std::size_t>(r));
  }
  c.all_to_all_v(vs.data(), sb, so, vr.data(), rb, ro);
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count(r, me); ++i) {
      EXPECT_EQ(vr[ro[static_cast<std::size_t>(r)] / sizeof(float) + i],
                value(r, static_cast<std::size_t>(me)));
    }
  }

  // reduce_scatter_sum: block b of every rank summed lands on rank b.
  std::vector<float> rs_send(un * 2), rs_recv(2);
  for (std::size_t i = 0; i < rs_send.size(); ++i) rs_send[i] = value(me, i);
  c.reduce_scatter_sum(rs_send, rs_recv);
  for (std::size_t i = 0; i < 2; ++i) {
    const std::size_t idx = static_cast<std::size_t>(me) * 2 + i;
    EXPECT_EQ(rs_recv[i], 1000.0F * static_cast<float>(n * (n - 1) / 2) +
                              static_cast<float>(n) * static_cast<float>(idx));
  }

  // split: even and odd ranks, ordered by descending rank.
  auto sub = c.split(me % 2, -me);
  const int expected_size = (n + (me % 2 == 0 ? 1 : 0)) / 2;
  EXPECT_EQ(sub->size(), expected_size);
  std::vector<std::int64_t> who{me};
  sub->all_reduce_max(who);
  const int top = (n - 1) % 2 == me % 2 ? n - 1 : n - 2;
  EXPECT_EQ(who[0], top);  // the largest rank of my parity
  EXPECT_EQ(sub->rank(), (top - me) / 2);
  std::vector<float> s{1.0F};
  sub->all_reduce_sum(s);
  EXPECT_EQ(s[0], static_cast<float>(expected_size));
}

}  // namespace moeplan::kernels::testing
