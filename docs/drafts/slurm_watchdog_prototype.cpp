// Prototype of a rank watchdog for moeplan under srun and mpirun (issue 22, design (a)-(d)); not
// part of the build. Build: mpicxx -std=c++20 -O1 -pthread slurm_watchdog_prototype.cpp -o wd
// Run the cases: bash docs/drafts/slurm_watchdog_cases.sh ./wd (needs scripts/slurm-local.sh up).
//
// Each rank loops: an MPI_Allreduce (the "collective"), then rank 0 "commits a point" (appends
// a line to a file and fsyncs it, under the commit mutex). Fault injection as moeplan's
// MOEPLAN_FAULT_INJECT: FAULT=rank,after,kill|exit.
//
// WD=0: no watchdog (today's behaviour). WD=1: the watchdog thread
//   - TCP star: rank 0 listens, every other rank connects (addresses and a job nonce are
//     broadcast over MPI once at start); a connection that closes before its peer said 'B'
//     (bye) is a dead peer or one that left without finalizing -> this rank exits; rank 0's
//     exit closes every other connection, so the whole job ends in milliseconds;
//   - SIGTERM/SIGINT: the handler sets the stop flag and writes a byte to a self-pipe; the main
//     loop stops between points (the graceful path); if the main thread is still blocked in a
//     collective GRACE_MS later, the watchdog exits the process;
//   - before exiting it takes the commit mutex, so a point being committed is committed.
// WD_ABORT=1: the watchdog calls MPI_Abort instead of _exit (needs MPI_THREAD_MULTIPLE).
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};
int g_pipe[2] = {-1, -1};
std::mutex g_commit;  // held while rank 0 commits a point

extern "C" void on_signal(int) {
  g_stop.store(true);
  const char c = 'S';
  if (g_pipe[1] >= 0) (void)!write(g_pipe[1], &c, 1);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* env_or(const char* k, const char* d) {
  const char* v = std::getenv(k);
  return v ? v : d;
}

// ---- (a) the launcher check, before MPI_Init ------------------------------------------------
// Returns the number of processes the launcher started, or -1 after printing one line when MPI
// cannot be wired (srun without PMIx).
int launcher_check() {
  const auto num = [](const char* k) {
    const char* v = std::getenv(k);
    return v ? std::atoi(v) : 0;
  };
  if (num("OMPI_COMM_WORLD_SIZE") > 0)
    return num("OMPI_COMM_WORLD_SIZE");  // mpirun (also in sbatch)
  if (std::getenv("SLURM_STEP_ID") != nullptr && num("SLURM_STEP_NUM_TASKS") > 0) {  // srun step
    const int n = num("SLURM_STEP_NUM_TASKS");
    if (n > 1 && std::getenv("PMIX_RANK") == nullptr) {
      if (num("SLURM_PROCID") == 0) {
        std::fprintf(stderr,
                     "moeplan: error: srun started %d tasks without PMIx (--mpi=%s); this Open MPI "
                     "needs srun --mpi=pmix\n",
                     n, env_or("SLURM_MPI_TYPE", "none"));
      }
      return -1;
    }
    return n;
  }
  return 1;  // not under a launcher (SLURM_NTASKS of an sbatch script alone does not count)
}

// ---- (b) the watchdog -----------------------------------------------------------------------
struct Peer {
  int fd = -1;
  int rank = -1;
  bool bye = false;
};

class Watchdog {
 public:
  void start(int rank, int size, bool use_abort, int grace_ms) {
    rank_ = rank;
    use_abort_ = use_abort;
    grace_ms_ = grace_ms;
    // rank 0: listen on an ephemeral port; broadcast port, addresses and a nonce
    struct Hello {
      char addrs[8][16];
      int naddr;
      int port;
      std::uint64_t nonce;
    } h{};
    int lfd = -1;
    if (rank == 0) {
      lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      listen(lfd, 1024);
      socklen_t len = sizeof a;
      getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
      h.port = ntohs(a.sin_port);
      ifaddrs* ifs = nullptr;
      getifaddrs(&ifs);
      for (int pass = 0; pass < 2; ++pass) {  // non-loopback first, loopback last
        for (ifaddrs* i = ifs; i && h.naddr < 8; i = i->ifa_next) {
          if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
          const auto* s = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
          const bool lo = (ntohl(s->sin_addr.s_addr) >> 24) == 127;
          if (lo != (pass == 1)) continue;
          inet_ntop(AF_INET, &s->sin_addr, h.addrs[h.naddr++], 16);
        }
      }
      freeifaddrs(ifs);
      h.nonce =
          std::random_device{}() * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint64_t>(getpid());
    }
    MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      // accept size-1 peers; each sends its rank and the nonce
      while (static_cast<int>(peers_.size()) < size - 1) {
        const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        struct {
          int rank;
          std::uint64_t nonce;
        } m{};
        if (recv(fd, &m, sizeof m, MSG_WAITALL) != sizeof m || m.nonce != h.nonce) {
          close(fd);
          continue;
        }
        tune(fd);
        peers_.push_back({fd, m.rank, false});
      }
      close(lfd);
    } else {
      int fd = -1;
      for (int i = 0; i < h.naddr && fd < 0; ++i) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(h.port));
        inet_pton(AF_INET, h.addrs[i], &a.sin_addr);
        if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
          close(fd);
          fd = -1;
          continue;
        }
        struct {
          int rank;
          std::uint64_t nonce;
        } m{rank, h.nonce};
        send(fd, &m, sizeof m, MSG_NOSIGNAL);
      }
      if (fd < 0) {
        std::fprintf(stderr, "rank %d: cannot reach rank 0's watchdog\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
      tune(fd);
      peers_.push_back({fd, 0, false});
    }
    // The same barrier makes sure every connection exists before anyone can say bye.
    MPI_Barrier(MPI_COMM_WORLD);
    thread_ = std::thread([this] { loop(); });
  }

  /// The last collective is done: tell the peers this rank ends normally.
  void finish(int rc) {
    rc_.store(rc);
    finishing_.store(true);
    const char w = 'W';
    (void)!write(g_pipe[1], &w, 1);  // wake the loop so it re-arms its timer
    const char b = 'B';
    for (auto& p : peers_) send(p.fd, &b, 1, MSG_NOSIGNAL);
  }

 private:
  static void tune(int fd) {
    // A lost node sends no FIN: TCP keepalive notices it in about 5 + 5*1 s.
    int on = 1, idle = 5, intvl = 1, cnt = 5;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  }

  [[noreturn]] void die(int code, const std::string& why) {
    // Wait for a commit in progress (bounded), so every completed point is kept.
    const auto t0 = std::chrono::steady_clock::now();
    while (!g_commit.try_lock()) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::fprintf(stderr, "moeplan: error: rank %d: %s\n", rank_, why.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    if (use_abort_) MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
  }

  void loop() {
    std::vector<pollfd> fds;
    fds.push_back({g_pipe[0], POLLIN, 0});
    for (auto& p : peers_) fds.push_back({p.fd, POLLIN, 0});
    double stop_at = -1;
    while (true) {
      int timeout = -1;
      if (finishing_.load()) {
        // After the last collective: only MPI_Finalize is left; bound it (a peer lost now
        // would leave it waiting in PMIx's fence).
        if (finish_at_ < 0) finish_at_ = now_s() + 10.0;
        stop_at = -1;
        const double left = finish_at_ - now_s();
        if (left <= 0) die(rc_.load(), "MPI_Finalize did not return within 10 s");
        timeout = static_cast<int>(left * 1000) + 1;
      } else if (stop_at > 0) {
        const double left = stop_at - now_s();
        if (left <= 0)
          die(130,
              "stopped by a signal while waiting in a collective; every completed point is kept");
        timeout = static_cast<int>(left * 1000) + 1;
      }
      if (poll(fds.data(), fds.size(), timeout) < 0) continue;
      if (fds[0].revents & POLLIN) {
        char c;
        (void)!read(g_pipe[0], &c, 1);
        if (stop_at < 0 && !finishing_.load()) stop_at = now_s() + grace_ms_ / 1000.0;
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Peer& p = peers_[i - 1];
        char buf[64];
        const ssize_t n = recv(p.fd, buf, sizeof buf, 0);
        if (n > 0) {
          if (std::memchr(buf, 'B', static_cast<std::size_t>(n))) p.bye = true;
          continue;
        }
        close(p.fd);
        fds[i].fd = -1;
        if (!p.bye) {
          if (g_stop.load()) die(130, "stopped by a signal; every completed point is kept");
          die(1, "rank " + std::to_string(p.rank) +
                     " is gone (killed, or ended without MPI_Finalize); stopping this rank");
        }
      }
    }
  }

  int rank_ = 0;
  bool use_abort_ = false;
  int grace_ms_ = 1000;
  std::atomic<bool> finishing_{false};
  std::atomic<int> rc_{0};
  double finish_at_ = -1;
  std::vector<Peer> peers_;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  const int launched = launcher_check();
  if (launched < 0) return 2;
  const bool wd = std::atoi(env_or("WD", "1")) != 0;
  const bool use_abort = std::atoi(env_or("WD_ABORT", "0")) != 0;
  const int iters = argc > 1 ? std::atoi(argv[1]) : 200;
  pipe2(g_pipe, O_CLOEXEC);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, use_abort ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != launched) {
    if (rank == 0)
      std::fprintf(stderr,
                   "moeplan: error: the launcher started %d processes but MPI sees %d: use srun "
                   "--mpi=pmix\n",
                   launched, size);
    MPI_Finalize();
    return 2;
  }
  // ---- (d) where each rank runs -------------------------------------------------------------
  char node[64] = {};
  std::snprintf(node, sizeof node, "%s", env_or("SLURMD_NODENAME", ""));
  if (!node[0]) {
    int l = 0;
    char p[MPI_MAX_PROCESSOR_NAME];
    MPI_Get_processor_name(p, &l);
    std::snprintf(node, sizeof node, "%s", p);
  }
  MPI_Comm shm;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm);
  int shm_size = 0;
  MPI_Comm_size(shm, &shm_size);
  int shm_leader = rank;
  MPI_Bcast(&shm_leader, 1, MPI_INT, 0, shm);  // world rank of this node's first rank
  std::vector<char> nodes(static_cast<std::size_t>(size) * 64);
  MPI_Gather(node, 64, MPI_CHAR, nodes.data(), 64, MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<int> leaders(static_cast<std::size_t>(size));
  MPI_Gather(&shm_leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::fprintf(stderr, "topology:");
    for (int r = 0; r < size; ++r)
      std::fprintf(stderr, " r%d=%s/shm%d", r, &nodes[static_cast<std::size_t>(r) * 64],
                   leaders[static_cast<std::size_t>(r)]);
    std::fprintf(stderr, "\n");
  }

  Watchdog dog;
  if (wd) dog.start(rank, size, use_abort, std::atoi(env_or("GRACE_MS", "2000")));

  // fault plan
  int f_rank = -1, f_after = 0;
  char f_mode[16] = "";
  if (const char* f = std::getenv("FAULT")) std::sscanf(f, "%d,%d,%15s", &f_rank, &f_after, f_mode);
  const int block_fault =
      std::atoi(env_or("BLOCK", "0"));  // rank 1 sleeps in compute this long (s)

  FILE* db = rank == 0 ? std::fopen(env_or("DB", "/tmp/wdproto/points.txt"), "w") : nullptr;
  std::vector<float> buf(1 << 16, 1.0f);
  int done = 0;
  for (int i = 0; i < iters; ++i) {
    int stop = g_stop.load() ? 1 : 0;  // the graceful path: agree between points
    MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (stop) break;
    if (rank == f_rank && i == f_after) {
      std::fprintf(stderr, "fault: rank %d %s at %.3f\n", rank, f_mode, now_s());
      std::fflush(stderr);
      if (!std::strcmp(f_mode, "kill")) kill(getpid(), SIGKILL);
      if (!std::strcmp(f_mode, "exit")) std::_Exit(0);
    }
    if (rank == 1 && block_fault > 0 &&
        i == 3) {  // a long compute phase (not interrupted by signals)
      const double until = now_s() + block_fault;
      volatile double x = 0;
      while (now_s() < until) x = x + 1.0;
    }
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_FLOAT, MPI_MAX,
                  MPI_COMM_WORLD);
    if (rank == 0) {
      std::lock_guard<std::mutex> lock(g_commit);
      std::fprintf(db, "point %d\n", i);
      std::fflush(db);
      fsync(fileno(db));
    }
    ++done;
    usleep(20000);  // a point takes ~20 ms
  }
  int rc = g_stop.load() ? 130 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);  // agree_exit_code
  if (wd) dog.finish(rc);
  if (rank == 0) std::fprintf(stderr, "rank 0: %d points committed, exit %d\n", done, rc);
  MPI_Comm_free(&shm);
  MPI_Finalize();
  std::fflush(stderr);
  _exit(rc);  // the watchdog thread is not joined (prototype)
}
