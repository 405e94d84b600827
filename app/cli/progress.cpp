// Progress reporting for long CLI work.
#include "app/cli/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace moeplan::cli {

Progress::Progress(std::string label, int total)
    : label_(std::move(label)),
      total_(total),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(int done, const std::string& what) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done > 0 ? elapsed * (total_ - done) / done : 0.0;
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? kWidth * done / total_ : kWidth;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %d/%d  %.0f s elapsed, ETA %.0f s  %-30.30s", label_.c_str(),
                 bar.c_str(), done, total_, elapsed, eta, what.c_str());
    open_ = true;
  } else {
    std::fprintf(stderr, "%s: %d/%d done (%.1f s elapsed, ETA %.0f s)%s%s\n", label_.c_str(), done,
                 total_, elapsed, eta, what.empty() ? "" : ": ", what.c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_ && open_) std::fputc('\n', stderr);
  open_ = false;
}

}  // namespace moeplan::cli
