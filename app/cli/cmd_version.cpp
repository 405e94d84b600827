// `moeplan --version`: the version and which backends are compiled in and usable.
#include <cstdio>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "kernels/backends.hpp"
#include "kernels/host_memory.hpp"

namespace moeplan::cli {

int print_version() {
  std::printf("moeplan %s\n", MOEPLAN_VERSION);
  Table t;
  t.add_column("backend");
  t.add_column("compiled");
  t.add_column("usable");
  t.add_column("detail");
  for (const auto& b : kernels::backend_inventory()) {
    t.add_row({b.name, b.compiled ? "yes" : "no", b.usable ? "yes" : "no", b.detail});
  }
  std::fputs(t.render().c_str(), stdout);
  std::printf("host allocator: %s\n", kernels::host_allocator().description.c_str());
  return kExitOk;
}

}  // namespace moeplan::cli
