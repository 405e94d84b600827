// The rank watchdog, the stop signals and the commit lock.
#include "kernels/rank_watchdog.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

namespace moeplan::kernels {

namespace {

using Clock = std::chrono::steady_clock;

// ---- stop signals ------------------------------------------------------------------------------

// Set by SIGINT/SIGTERM, read by every in-process rank's thread: a lock-free atomic (safe in a
// signal handler, and no data race with the threads, which volatile sig_atomic_t would be).
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);
std::atomic<int> g_stop_write{-1};  // the self-pipe the handler writes to
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<int> g_stop_read{-1};
std::once_flag g_install_once;

extern "C" void on_stop_signal(int) { request_stop(); }

// ---- commit lock -------------------------------------------------------------------------------

std::mutex& commit_mutex() {
  static std::mutex m;
  return m;
}
std::atomic<int> g_commits{0};

// ---- process exit ------------------------------------------------------------------------------

[[noreturn]] void end_process(int code) {
  // NOTE: the main thread may hold a stdio lock while it blocks; flush only what is free.
  for (FILE* f : {stdout, stderr}) {
    if (ftrylockfile(f) == 0) {
      fflush_unlocked(f);
      funlockfile(f);
    }
  }
  _exit(code);
}

// ---- sockets -----------------------------------------------------------------------------------

void tune(int fd) {
  // A node lost without a FIN (power, network): TCP keepalive notices it in about 5 + 5 × 1 s.
  int on = 1;
  int idle = 5;
  int interval = 1;
  int count = 5;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int ms_until(Clock::time_point t) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left + 1, 1 << 30));
}

/// Rank 0's rendezvous, all-gathered: where to connect and the job's nonce.
struct Hello {
  std::uint64_t nonce = 0;
  std::uint32_t port = 0;  ///< 0: rank 0 could not listen
  std::uint32_t num_addrs = 0;
  char addrs[8][INET_ADDRSTRLEN] = {};
};

/// What a rank sends first on its connection.
struct Greeting {
  std::uint64_t nonce = 0;
  std::uint32_t rank = 0;
  std::uint32_t pad = 0;
};

/// Rank 0's IPv4 addresses, the non-loopback ones first (another node reaches those).
void fill_addresses(Hello& h) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (int pass = 0; pass < 2; ++pass) {
      for (ifaddrs* i = ifs; i != nullptr && h.num_addrs < 8; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        const bool loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
        if (loopback != (pass == 1)) continue;
        inet_ntop(AF_INET, &a->sin_addr, h.addrs[h.num_addrs], INET_ADDRSTRLEN);
        ++h.num_addrs;
      }
    }
    freeifaddrs(ifs);
  }
  if (h.num_addrs == 0) {
    std::snprintf(h.addrs[0], INET_ADDRSTRLEN, "127.0.0.1");
    h.num_addrs = 1;
  }
}

/// Rank 0: a listening socket on an ephemeral port of every address; -1 on failure.
int listen_any(int backlog, std::uint32_t& port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  port = ntohs(a.sin_port);
  return fd;
}

/// Connects to `addr`:`port` within `timeout_ms`; the socket, or -1.
int connect_within(const char* addr, std::uint32_t port, int timeout_ms) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS) {
      close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
        err != 0) {
      close(fd);
      return -1;
    }
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

/// Sends all of `data` (blocking socket, bounded by SO_SNDTIMEO); false on failure.
bool send_all_bytes(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

/// Receives exactly `n` bytes within `timeout_ms`; false otherwise.
bool recv_exact(int fd, void* data, std::size_t n, int timeout_ms) {
  char* p = static_cast<char*>(data);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, ms_until(deadline)) != 1) return false;
    const ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

void close_all(std::vector<WatchdogPeer>& peers) {
  for (auto& p : peers) {
    if (p.fd >= 0) close(p.fd);
  }
  peers.clear();
}

}  // namespace

// ---- stop signals ------------------------------------------------------------------------------

void request_stop() {
  g_stop.store(true);
  const int fd = g_stop_write.load();
  if (fd >= 0) {
    const char c = 'S';
    [[maybe_unused]] const ssize_t n = write(fd, &c, 1);  // a full pipe already wakes the reader
  }
}

bool stop_requested() { return g_stop.load(); }

void clear_stop_request() { g_stop.store(false); }

void install_stop_handler() {
  std::call_once(g_install_once, [] {
    int fds[2] = {-1, -1};
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      g_stop_read.store(fds[0]);
      g_stop_write.store(fds[1]);
    }
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  });
}

// ---- commit lock -------------------------------------------------------------------------------

CommitLock::CommitLock() { commit_mutex().lock(); }
CommitLock::~CommitLock() { commit_mutex().unlock(); }
void CommitLock::committed() { g_commits.fetch_add(1); }
int commits_done() { return g_commits.load(); }

// ---- the watchdog ------------------------------------------------------------------------------

Result<std::unique_ptr<RankWatchdog>> RankWatchdog::start(Communicator& world,
                                                          WatchdogOptions options) {
  const int rank = world.rank();
  const int size = world.size();
  Hello mine;
  int listener = -1;
  if (rank == 0) {
    listener = listen_any(std::min(size, 4096), mine.port);
    fill_addresses(mine);
    std::random_device rd;
    mine.nonce = (static_cast<std::uint64_t>(rd()) << 32 | rd()) ^
                 static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
                 static_cast<std::uint64_t>(getpid());
  }
  std::vector<Hello> hellos(static_cast<std::size_t>(size));
  world.all_gather(&mine, sizeof(Hello), hellos.data());
  const Hello& hello = hellos[0];
  std::vector<WatchdogPeer> peers;
  bool ok = hello.port != 0;
  // NOTE: each connect tries for 2 s per address; rank 0 accepts for 5 s in all, then every
  // rank learns whether all connections exist (the same verdict on every rank).
  if (ok && rank != 0) {
    int fd = -1;
    for (std::uint32_t i = 0; i < hello.num_addrs && i < 8 && fd < 0; ++i) {
      char addr[INET_ADDRSTRLEN] = {};
      std::memcpy(addr, hello.addrs[i], INET_ADDRSTRLEN - 1);
      fd = connect_within(addr, hello.port, 2000);
    }
    const Greeting g{hello.nonce, static_cast<std::uint32_t>(rank), 0};
    if (fd >= 0 && !send_all_bytes(fd, &g, sizeof g)) {
      close(fd);
      fd = -1;
    }
    if (fd >= 0) peers.push_back({fd, 0});
    ok = fd >= 0;
  } else if (ok && rank == 0) {
    std::vector<bool> seen(static_cast<std::size_t>(size), false);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (static_cast<int>(peers.size()) < size - 1) {
      pollfd p{listener, POLLIN, 0};
      if (poll(&p, 1, ms_until(deadline)) != 1) break;
      const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
        break;  // EMFILE and the like: no socket per rank
      }
      Greeting g;
      if (!recv_exact(fd, &g, sizeof g, 1000) || g.nonce != hello.nonce || g.rank == 0 ||
          static_cast<int>(g.rank) >= size || seen[g.rank]) {
        close(fd);
        continue;
      }
      seen[g.rank] = true;
      peers.push_back({fd, static_cast<int>(g.rank)});
    }
    ok = static_cast<int>(peers.size()) == size - 1;
  }
  if (listener >= 0) close(listener);
  // Every connection exists on every rank before any rank can say bye.
  const char mine_ok = ok ? 1 : 0;
  std::vector<char> all_ok(static_cast<std::size_t>(size));
  world.all_gather(&mine_ok, 1, all_ok.data());
  for (int r = 0; r < size; ++r) {
    if (all_ok[static_cast<std::size_t>(r)] != 0) continue;
    close_all(peers);
    if (hello.port == 0) return Error{"rank 0 could not listen on a TCP port"};
    return Error{"rank " + std::to_string(r) + " could not connect to rank 0 over TCP (" +
                 std::string(hello.addrs[0]) + " port " + std::to_string(hello.port) + ")"};
  }
  for (auto& p : peers) tune(p.fd);
  options.rank = rank;
  options.size = size;
  return std::make_unique<RankWatchdog>(std::move(peers), std::move(options));
}

RankWatchdog::RankWatchdog(std::vector<WatchdogPeer> peers, WatchdogOptions options)
    : options_(std::move(options)) {
  if (!options_.end) options_.end = end_process;
  stop_grace_s_.store(options_.stop_grace_s);
  for (const auto& p : peers) peers_.push_back({p.fd, p.rank, false, {}});
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) wake_pipe_[0] = wake_pipe_[1] = -1;
  thread_ = std::thread([this] { loop(); });
}

RankWatchdog::~RankWatchdog() {
  quit_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
  for (auto& p : peers_) {
    if (p.fd >= 0) close(p.fd);
  }
  for (const int fd : wake_pipe_) {
    if (fd >= 0) close(fd);
  }
}

void RankWatchdog::wake() {
  if (wake_pipe_[1] < 0) return;
  const char c = 'W';
  [[maybe_unused]] const ssize_t n = write(wake_pipe_[1], &c, 1);
}

void RankWatchdog::send_all(const std::string& text) {
  std::lock_guard<std::mutex> lock(send_mutex_);
  for (auto& p : peers_) {
    if (p.fd >= 0) (void)send(p.fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void RankWatchdog::bye(int rc) {
  bye_rc_.store(rc);
  bye_.store(true);
  send_all("B\n");
  wake();
}

void RankWatchdog::set_stop_grace(double seconds) {
  stop_grace_s_.store(seconds);
  wake();
}

std::string RankWatchdog::place(int rank) const {
  std::string s = "rank " + std::to_string(rank);
  if (rank >= 0 && rank < static_cast<int>(options_.places.size()) &&
      !options_.places[static_cast<std::size_t>(rank)].empty()) {
    s += " (" + options_.places[static_cast<std::size_t>(rank)] + ")";
  }
  return s;
}

std::string RankWatchdog::kept_note() const {
  const int n = commits_done();
  if (n == 0) return "";
  return "; the " + std::to_string(n) + (n == 1 ? " point" : " points") +
         " completed in this run are kept, {resume} continues";
}

void RankWatchdog::finish(int code, const std::string& message, const std::string& note) {
  int expected = -1;
  if (!ended_with_.compare_exchange_strong(expected, code)) return;
  // Wait for a commit in progress (bounded), so every completed point is kept. NOTE: polled
  // try_lock rather than a timed mutex, whose clock-based wait ThreadSanitizer cannot follow.
  std::unique_lock<std::mutex> lock(commit_mutex(), std::defer_lock);
  const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(options_.commit_wait_s));
  while (!lock.try_lock() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!note.empty()) send_all(note);
  if (!message.empty() && options_.report) options_.report(Error{message + kept_note()});
  options_.end(code);
  quit_.store(true);  // only a test's `end` returns
}

bool RankWatchdog::on_message(Peer& p, const std::string& line) {
  if (line == "B") {
    p.said_bye = true;
  } else if (options_.rank != 0 && p.rank == 0 && line.rfind("G ", 0) == 0) {
    finish(1, "", "");  // rank 0 reported the lost rank
    return false;
  } else if (options_.rank != 0 && p.rank == 0 && line == "S") {
    finish(130, "", "");  // rank 0 stopped on a signal
    return false;
  }
  return true;
}

bool RankWatchdog::on_closed(Peer& p) {
  {
    std::lock_guard<std::mutex> lock(send_mutex_);  // bye() may be sending on it
    close(p.fd);
    p.fd = -1;
  }
  if (p.said_bye) return true;
  const bool stopping = stop_requested();
  if (options_.rank == 0) {
    if (stopping) {
      finish(130, "stopped by a signal (" + place(p.rank) + " ended first)", "S\n");
    } else {
      finish(1, place(p.rank) + " is gone: killed, or ended without MPI_Finalize; the job stops",
             "G " + std::to_string(p.rank) + "\n");
    }
  } else if (stopping) {
    finish(130, "", "");
  } else {
    // Rank 0 itself is lost: rank 1 says so (one line), every rank ends.
    finish(1,
           options_.rank == 1
               ? place(0) + " is gone: killed, or ended without MPI_Finalize; the job stops"
               : "",
           "");
  }
  return false;
}

void RankWatchdog::loop() {
  bool stop_seen = false;
  Clock::time_point stop_deadline{};
  bool finalize_armed = false;
  Clock::time_point finalize_deadline{};
  std::vector<pollfd> fds;
  std::vector<Peer*> owners;
  while (!quit_.load()) {
    // NOTE: a quarter-second tick besides the wake-ups: a stop flag set before the pipe existed
    // or drained by another watchdog of the process (tests) is still seen.
    int timeout = 250;
    if (bye_.load()) {
      if (!finalize_armed) {
        finalize_armed = true;
        finalize_deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options_.finalize_bound_s));
      }
      timeout = std::min(timeout, ms_until(finalize_deadline));
    } else if (stop_seen) {
      timeout = std::min(timeout, ms_until(stop_deadline));
    }
    fds.clear();
    owners.clear();
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    owners.push_back(nullptr);
    if (const int s = g_stop_read.load(); s >= 0) {
      fds.push_back({s, POLLIN, 0});
      owners.push_back(nullptr);
    }
    for (auto& p : peers_) {
      if (p.fd < 0) continue;
      fds.push_back({p.fd, POLLIN, 0});
      owners.push_back(&p);
    }
    const int n = poll(fds.data(), fds.size(), timeout);
    if (quit_.load()) break;
    if (n < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      if (owners[i] == nullptr) {
        char buf[64];
        while (read(fds[i].fd, buf, sizeof buf) > 0) {
        }
        continue;
      }
      Peer& p = *owners[i];
      char buf[256];
      const ssize_t k = recv(p.fd, buf, sizeof buf, 0);
      if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (k <= 0) {
        if (!on_closed(p)) return;
        continue;
      }
      p.inbox.append(buf, static_cast<std::size_t>(k));
      for (auto nl = p.inbox.find('\n'); nl != std::string::npos; nl = p.inbox.find('\n')) {
        const std::string line = p.inbox.substr(0, nl);
        p.inbox.erase(0, nl + 1);
        if (!on_message(p, line)) return;
      }
    }
    const auto now = Clock::now();
    if (!bye_.load() && !stop_seen && stop_requested()) {
      stop_seen = true;
      stop_deadline = now + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(stop_grace_s_.load()));
    }
    if (finalize_armed && now >= finalize_deadline) {
      char s[32];
      std::snprintf(s, sizeof s, "%g", options_.finalize_bound_s);
      finish(bye_rc_.load(),
             "rank " + std::to_string(options_.rank) + ": MPI_Finalize did not return within " + s +
                 " s after the job ended",
             "");
      return;
    }
    if (stop_seen && !bye_.load() && now >= stop_deadline) {
      finish(130, options_.rank == 0 ? "stopped by a signal" : "", options_.rank == 0 ? "S\n" : "");
      return;
    }
  }
}

}  // namespace moeplan::kernels
