// The rank watchdog on fake peers (socketpairs: the test plays the other ranks) and on a real TCP
// star between in-process ranks: a peer that closes without bye ends the rank, bye does not, a
// stop signal ends a blocked rank after its grace, a commit in progress delays the end, and the
// end after bye is bounded. The watchdog's `end` records the exit code instead of exiting.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/rank_watchdog.hpp"

namespace moeplan::kernels {
namespace test_rank_watchdog {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// What a watchdog reported and how it ended.
struct Record {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::atomic<int> code{-1};
  std::atomic<double> at{0.0};
  Clock::time_point t0 = Clock::now();

  WatchdogOptions options(int rank, int size) {
    WatchdogOptions o;
    o.rank = rank;
    o.size = size;
    for (int r = 0; r < size; ++r) o.places.push_back("node" + std::string(1, char('A' + r)));
    o.report = [this](const Error& e) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(e.message);
    };
    o.end = [this](int c) {
      at.store(seconds_since(t0));
      code.store(c);
    };
    return o;
  }
  bool wait_end(double limit_s = 3.0) {
    const auto t = Clock::now();
    while (code.load() == -1 && seconds_since(t) < limit_s) std::this_thread::sleep_for(5ms);
    return code.load() != -1;
  }
  std::string all_lines() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

/// A connected pair: `mine` for the watchdog, `theirs` for the test playing the peer.
struct Pair {
  int mine = -1;
  int theirs = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    mine = fds[0];
    theirs = fds[1];
  }
  void say(const std::string& s) const {
    ASSERT_EQ(write(theirs, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  void hang_up() {
    close(theirs);
    theirs = -1;
  }
  /// What the watchdog sent, waiting up to `ms`.
  std::string heard(int ms = 1000) const {
    std::string out;
    pollfd p{theirs, POLLIN, 0};
    while (poll(&p, 1, ms) == 1) {
      char buf[64];
      const ssize_t n = read(theirs, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      ms = 50;
    }
    return out;
  }
  ~Pair() {
    if (theirs >= 0) close(theirs);
  }
};

TEST(RankWatchdog, APeerClosingWithoutByeEndsRankZeroAndTellsTheOthers) {
  Record rec;
  Pair one;
  Pair two;
  RankWatchdog dog({{one.mine, 1}, {two.mine, 2}}, rec.options(0, 3));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(dog.ended_with(), -1);
  one.hang_up();  // rank 1 killed, or _exit without MPI_Finalize
  ASSERT_TRUE(rec.wait_end());
  EXPECT_EQ(rec.code.load(), 1);
  EXPECT_EQ(dog.ended_with(), 1);
  EXPECT_LT(rec.at.load(), 2.0);
  EXPECT_EQ(rec.all_lines(),
            "rank 1 (nodeB) is gone: killed, or ended without MPI_Finalize; the job stops\n");
  EXPECT_EQ(two.heard(), "G 1\n");  // rank 2 ends quietly on this
}

TEST(RankWatchdog, ByeThenCloseIsNoAlarm) {
  Record rec;
  Pair one;
  RankWatchdog dog({{one.mine, 1}}, rec.options(0, 2));
  one.say("B\n");
  one.hang_up();
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(rec.code.load(), -1);
  EXPECT_EQ(rec.all_lines(), "");
}

TEST(RankWatchdog, MessagesSplitAcrossReadsAreJoined) {
  Record rec;
  Pair one;
  RankWatchdog dog({{one.mine, 1}}, rec.options(0, 2));
  one.say("B");
  std::this_thread::sleep_for(50ms);
  one.say("\n");
  one.hang_up();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(rec.code.load(), -1);
}

TEST(RankWatchdog, OtherRanksEndQuietlyWhenRankZeroReportsALoss) {
  Record rec;
  Pair zero;
  RankWatchdog dog({{zero.mine, 0}}, rec.options(2, 3));
  zero.say("G 1\n");
  ASSERT_TRUE(rec.wait_end());
  EXPECT_EQ(rec.code.load(), 1);
  EXPECT_EQ(rec.all_lines(), "");  // rank 0 said it
}

TEST(RankWatchdog, RankOneReportsTheLossOfRankZero) {
  Record rec;
  Pair zero;
  RankWatchdog dog({{zero.mine, 0}}, rec.options(1, 3));
  zero.hang_up();
  ASSERT_TRUE(rec.wait_end());
  EXPECT_EQ(rec.code.load(), 1);
  EXPECT_EQ(rec.all_lines(),
            "rank 0 (nodeA) is gone: killed, or ended without MPI_Finalize; the job stops\n");
  // Rank 2 ends too, without a second line.
  Record rec2;
  Pair zero2;
  RankWatchdog dog2({{zero2.mine, 0}}, rec2.options(2, 3));
  zero2.hang_up();
  ASSERT_TRUE(rec2.wait_end());
  EXPECT_EQ(rec2.code.load(), 1);
  EXPECT_EQ(rec2.all_lines(), "");
}

TEST(RankWatchdog, AStopSignalEndsABlockedRankAfterItsGrace) {
  install_stop_handler();
  Record rec;
  Pair one;
  WatchdogOptions o = rec.options(0, 2);
  o.stop_grace_s = 0.3;
  RankWatchdog dog({{one.mine, 1}}, o);
  const auto t0 = Clock::now();
  rec.t0 = t0;
  request_stop();  // what SIGTERM does
  ASSERT_TRUE(rec.wait_end());
  clear_stop_request();
  EXPECT_EQ(rec.code.load(), 130);
  EXPECT_GE(rec.at.load(), 0.29);
  EXPECT_LT(rec.at.load(), 1.5);
  EXPECT_EQ(rec.all_lines(), "stopped by a signal\n");
  EXPECT_EQ(one.heard(), "S\n");  // the other ranks end with 130 too
}

TEST(RankWatchdog, ARealSignalReachesTheWatchdog) {
  install_stop_handler();
  Record rec;
  Pair one;
  RankWatchdog dog({{one.mine, 1}}, rec.options(0, 2));  // grace 0: at once
  ASSERT_EQ(raise(SIGTERM), 0);
  ASSERT_TRUE(rec.wait_end());
  EXPECT_TRUE(stop_requested());
  clear_stop_request();
  EXPECT_EQ(rec.code.load(), 130);
  EXPECT_LT(rec.at.load(), 1.0);
}

TEST(RankWatchdog, AJobThatStopsByItselfWithinTheGraceIsNotEnded) {
  install_stop_handler();
  Record rec;
  Pair one;
  WatchdogOptions o = rec.options(0, 2);
  o.stop_grace_s = 0.5;
  o.finalize_bound_s = 0.4;
  RankWatchdog dog({{one.mine, 1}}, o);
  request_stop();
  std::this_thread::sleep_for(100ms);
  dog.bye(130);  // the ranks agreed to stop between points
  EXPECT_EQ(one.heard(200), "B\n");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(rec.code.load(), -1);  // past nothing yet: finalize bound runs from the bye
  // MPI_Finalize "hangs": the bound ends the rank with the agreed code.
  ASSERT_TRUE(rec.wait_end());
  clear_stop_request();
  EXPECT_EQ(rec.code.load(), 130);
  EXPECT_NE(rec.all_lines().find("MPI_Finalize did not return within 0.4 s"), std::string::npos);
}

TEST(RankWatchdog, ACommitInProgressDelaysTheEndAndIsCounted) {
  Record rec;
  Pair one;
  RankWatchdog dog({{one.mine, 1}}, rec.options(0, 2));
  const int before = commits_done();
  {
    CommitLock lock;
    lock.committed();
  }
  std::thread committer;
  {
    auto lock = std::make_unique<CommitLock>();
    const auto t0 = Clock::now();
    rec.t0 = t0;
    one.hang_up();
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(rec.code.load(), -1);  // waits for the commit
    lock->committed();
    lock.reset();
  }
  ASSERT_TRUE(rec.wait_end());
  EXPECT_EQ(rec.code.load(), 1);
  EXPECT_GE(rec.at.load(), 0.29);
  EXPECT_EQ(commits_done(), before + 2);
  EXPECT_NE(rec.all_lines().find("; the " + std::to_string(before + 2) +
                                 " points completed in this run are kept, {resume} continues"),
            std::string::npos)
      << rec.all_lines();
}

TEST(RankWatchdog, AStuckCommitDelaysTheEndOnlyBoundedly) {
  Record rec;
  Pair one;
  WatchdogOptions o = rec.options(0, 2);
  o.commit_wait_s = 0.2;
  RankWatchdog dog({{one.mine, 1}}, o);
  auto lock = std::make_unique<CommitLock>();
  rec.t0 = Clock::now();
  one.hang_up();
  ASSERT_TRUE(rec.wait_end());
  EXPECT_EQ(rec.code.load(), 1);
  EXPECT_GE(rec.at.load(), 0.19);
  EXPECT_LT(rec.at.load(), 1.5);
  lock.reset();
}

TEST(RankWatchdog, StarOverTcpBetweenInProcessRanks) {
  // Three ranks as threads: the rendezvous runs over the in-process communicator and the
  // watchdogs talk TCP. Every rank says bye and leaves: no alarm. Then a new star, where rank 2
  // leaves without bye: rank 0 and rank 1 end with 1, rank 0 naming rank 2.
  for (const bool rank2_leaves : {false, true}) {
    Record rec[3];
    std::atomic<int> started{0};
    run_in_process(3, [&](Communicator& comm) {
      const int r = comm.rank();
      auto dog = RankWatchdog::start(comm, rec[r].options(r, 3));
      ASSERT_TRUE(dog.ok()) << dog.error().message;
      started.fetch_add(1);
      comm.barrier();
      if (!rank2_leaves) {
        comm.barrier();  // the ranks agree to end
        (*dog)->bye(0);
        comm.barrier();
        dog->reset();
        return;
      }
      if (r == 2) {
        dog->reset();  // closes its connection without bye
        return;
      }
      EXPECT_TRUE(rec[r].wait_end()) << "rank " << r;
    });
    EXPECT_EQ(started.load(), 3);
    std::this_thread::sleep_for(100ms);
    if (!rank2_leaves) {
      for (auto& x : rec) {
        EXPECT_EQ(x.code.load(), -1);
        EXPECT_EQ(x.all_lines(), "");
      }
    } else {
      EXPECT_EQ(rec[0].code.load(), 1);
      EXPECT_EQ(rec[1].code.load(), 1);
      // (with "; the N points … are kept" when other tests of this process committed some)
      EXPECT_EQ(
          rec[0].all_lines().rfind(
              "rank 2 (nodeC) is gone: killed, or ended without MPI_Finalize; the job stops", 0),
          0U)
          << rec[0].all_lines();
      EXPECT_EQ(rec[1].all_lines(), "");
    }
  }
}

}  // namespace
}  // namespace test_rank_watchdog
}  // namespace moeplan::kernels
