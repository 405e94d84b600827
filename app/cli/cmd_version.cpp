// `moeplan --version`: the version, which backends are compiled in and usable, and whether MPI
// starts under this launcher (under mpirun/srun it is initialised on every rank and rank 0 says
// how many ranks on which nodes).
#include <cstdio>
#include <optional>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "kernels/backends.hpp"
#include "kernels/host_memory.hpp"
#include "kernels/job_world.hpp"
#include "kernels/mpi_info.hpp"
#include "planner/costs/cost_db.hpp"

namespace moeplan::cli {

int print_version() {
  const kernels::Launcher launcher = kernels::detect_launcher();
  std::string mpi_state;
  bool mpi_usable = true;
  std::optional<kernels::JobWorld> world;
  if (!launcher.launched()) {
    mpi_state = "not under a launcher (MPI not initialised)";
  } else if (!launcher.wired) {
    mpi_state = "MPI cannot start: " + launcher.hint;
    mpi_usable = false;
    if (launcher.rank != 0) return kExitOk;  // the launcher's rank 0 prints
  } else {
    auto opened = kernels::JobWorld::open({-1, 1, 1}, command_line_args(), report_and_flush);
    if (!opened) return report_error(opened.error());
    world.emplace(std::move(*opened));
    std::vector<planner::RunRank> ranks;
    for (int r = 0; r < world->size(); ++r) {
      const auto& p = world->places()[static_cast<std::size_t>(r)];
      ranks.push_back({r, p.host, p.node, p.shm_domain});
    }
    mpi_state = "MPI initialised under " + launcher.name + ": " + planner::describe_ranks(ranks);
  }
  if (!world || world->is_root()) {
    std::printf("moeplan %s\n", MOEPLAN_VERSION);
    Table t;
    t.add_column("backend");
    t.add_column("compiled");
    t.add_column("usable");
    t.add_column("detail");
    for (auto b : kernels::backend_inventory()) {
      if (b.name == "mpi" && b.compiled) {
        const std::string library = kernels::mpi_library_version();
        b.usable = b.usable && mpi_usable;
        b.detail =
            (library.empty() ? std::string("library not loadable") : library) + "; " + mpi_state;
      }
      t.add_row({b.name, b.compiled ? "yes" : "no", b.usable ? "yes" : "no", b.detail});
    }
    std::fputs(t.render().c_str(), stdout);
    std::printf("host allocator: %s\n", kernels::host_allocator().description.c_str());
    std::fflush(stdout);
  }
  return world ? world->agree_exit_code(kExitOk) : kExitOk;
}

}  // namespace moeplan::cli
