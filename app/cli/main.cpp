// moeplan: the headless CLI. Parses the command line and runs the chosen command.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "app/cli/cli_common.hpp"
#include "kernels/fault_inject.hpp"
#include "kernels/host_memory.hpp"
#include "kernels/mpi_communicator.hpp"

namespace moeplan::cli {
int print_version();
void add_costs_command(CLI::App& app, Action& action);  // app/cli/cmd_costs.cpp
}  // namespace moeplan::cli

int main(int argc, char** argv) {
  using namespace moeplan::cli;
  moeplan::kernels::configure_host_allocator();
  CLI::App app{"moeplan: plan Mixture-of-Experts parallel layouts on GPU clusters"};
  app.name("moeplan");
  bool version = false;
  app.add_flag("--version", version, "Print the version and the compiled and usable backends");

  Action action;
  add_models_command(app, action);
  add_verify_command(app, action);
  add_plan_command(app, action);
  add_clusters_command(app, action);
  add_place_command(app, action);
  add_rebalance_command(app, action);
  add_export_command(app, action);
  add_profile_command(app, action);
  add_validate_command(app, action);
  add_costs_command(app, action);

  set_command_line(std::vector<std::string>(argv + 1, argv + argc));
  if (auto plan = moeplan::kernels::fault_plan_from_env(); !plan) return report_error(plan.error());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints the help and succeeds; anything else is bad input: one line, exit 2.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    std::fprintf(stderr, "moeplan: error: %s (see moeplan --help)\n", what.c_str());
    return kExitBadInput;
  }
  if (version) return print_version();
  if (!action) {
    std::fputs(app.help().c_str(), stdout);
    return kExitBadInput;
  }
  try {
    return action();
  } catch (const std::exception& e) {
    // An internal failure (under MPI: a collective failed because a peer is gone). One line,
    // and under MPI every rank stops now rather than waiting on the lost one.
    std::fprintf(stderr, "moeplan: error: %s\n", e.what());
    std::fflush(stderr);
    moeplan::kernels::abort_world(kExitFailed);
    return kExitFailed;
  }
}
