// Progress reporting for long CLI work: a bar with points done, total and ETA on a terminal;
// plain lines otherwise (so logs stay readable). Written to stderr.
#pragma once

#include <chrono>
#include <string>

namespace moeplan::cli {

class Progress {
 public:
  Progress(std::string label, int total);
  /// Reports `done` of the total; `what` describes the last finished item.
  void update(int done, const std::string& what = "");
  /// Ends the bar's line on a terminal.
  void finish();

 private:
  std::string label_;
  int total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  bool open_ = false;
};

}  // namespace moeplan::cli
