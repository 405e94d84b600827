// Ending a job of real processes (mpirun, srun) within seconds when a rank is lost. Open MPI 4.1
// (no ULFM) never returns an error to a rank blocked in a collective whose peer died, and under
// srun no process manager steps in, so each rank runs a watchdog thread: the ranks hold TCP
// connections in a star around rank 0, and a connection that closes before its rank said "bye"
// (the ranks agreed to end) means that rank died or left without finalizing. Also here: the
// SIGINT/SIGTERM handler every command shares, and the commit lock that keeps a point whole.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/communicator.hpp"
#include "models/result.hpp"

namespace moeplan::kernels {

/// Installs the SIGINT/SIGTERM handler (once per process): it sets the stop flag and wakes the
/// watchdog. Work that can stop between units (a profile's points) polls stop_requested().
void install_stop_handler();
/// True once SIGINT or SIGTERM arrived (or request_stop() was called).
bool stop_requested();
/// What the handler does, callable from anywhere (async-signal-safe).
void request_stop();
/// Clears the stop flag (tests).
void clear_stop_request();

/// Held while a completed unit of work is made durable (a profile point's transaction, the
/// run's row). The watchdog takes it (waiting at most a few seconds) before it ends the process,
/// so a point being committed is committed and the database is left as after any other point.
class CommitLock {
 public:
  CommitLock();
  ~CommitLock();
  CommitLock(const CommitLock&) = delete;
  CommitLock& operator=(const CommitLock&) = delete;
  /// The unit was committed: counted in the watchdog's "N points … are kept".
  void committed();
};

/// Units marked committed() in this process.
int commits_done();

/// A connection of the star: to `rank` over socket `fd` (owned by the watchdog).
struct WatchdogPeer {
  int fd = -1;
  int rank = 0;
};

struct WatchdogOptions {
  int rank = 0;
  int size = 1;
  /// Per rank, where it runs ("nodeB"): named in the lines printed.
  std::vector<std::string> places;
  /// After a stop signal, how long the job may take to stop by itself (between points) before
  /// the watchdog ends a rank still blocked; 0: at once.
  double stop_grace_s = 0.0;
  /// After bye(), how long MPI_Finalize and the exit may take.
  double finalize_bound_s = 10.0;
  /// How long the watchdog waits for a commit in progress before it ends the process anyway.
  double commit_wait_s = 5.0;
  /// Prints one error line (rank 0's; rank 1's when rank 0 is the one lost). May be empty.
  std::function<void(const Error&)> report;
  /// Ends the process with the code (default: flush what stdio allows without blocking, then
  /// _exit). Tests record the code instead; the watchdog then stops watching.
  std::function<void(int)> end;
};

class RankWatchdog {
 public:
  /// Connects the ranks of `world` in a star around rank 0 over TCP (collective; every rank
  /// calls it) and starts watching. Rank 0 listens on an ephemeral port of every IPv4 address;
  /// its addresses, the port and a random nonce reach every rank through one all-gather. An
  /// error (a rank could not connect within a few seconds, or rank 0 cannot hold a socket per
  /// rank) is the same on every rank: the job then runs without a watchdog.
  static Result<std::unique_ptr<RankWatchdog>> start(Communicator& world, WatchdogOptions options);

  /// Watches connected peers (the star's, or a test's socketpairs). Rank 0 has one peer per
  /// other rank; any other rank has rank 0 as its only peer.
  RankWatchdog(std::vector<WatchdogPeer> peers, WatchdogOptions options);
  /// Stops watching and closes the connections (a peer sees this rank leave without bye).
  ~RankWatchdog();
  RankWatchdog(const RankWatchdog&) = delete;
  RankWatchdog& operator=(const RankWatchdog&) = delete;

  /// The ranks agreed to end with `rc`: tells the peers so that this rank's exit is no alarm,
  /// and bounds what is left (MPI_Finalize) by finalize_bound_s, then ends with `rc`.
  void bye(int rc);
  /// Sets stop_grace_s (a job that stops between its units by itself).
  void set_stop_grace(double seconds);
  /// The code the watchdog ended the process with, or -1 while it watches (tests).
  int ended_with() const { return ended_with_.load(); }

 private:
  struct Peer {
    int fd = -1;
    int rank = 0;
    bool said_bye = false;
    std::string inbox;
  };
  void loop();
  void wake();
  /// Handles a message from `p`; returns false when the process ended.
  bool on_message(Peer& p, const std::string& line);
  /// `p` closed its connection; returns false when the process ended.
  bool on_closed(Peer& p);
  /// Takes the commit lock (bounded), prints `message` (when not empty), tells the peers `note`,
  /// ends the process with `code`.
  void finish(int code, const std::string& message, const std::string& note);
  std::string place(int rank) const;
  std::string kept_note() const;
  void send_all(const std::string& text);

  WatchdogOptions options_;
  std::vector<Peer> peers_;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> quit_{false};
  std::atomic<bool> bye_{false};
  std::atomic<int> bye_rc_{0};
  std::atomic<double> stop_grace_s_{0.0};
  std::atomic<int> ended_with_{-1};
  std::mutex send_mutex_;
  std::thread thread_;
};

}  // namespace moeplan::kernels
