// moeplan: the headless CLI. Parses the command line and runs the chosen command.
#include <cstdio>

#include "app/cli/cli_common.hpp"
#include "kernels/host_memory.hpp"

namespace moeplan::cli {
int print_version();
}

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
  add_export_command(app, action);
  add_profile_command(app, action);
  add_validate_command(app, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  }
  if (version) return print_version();
  if (!action) {
    std::fputs(app.help().c_str(), stdout);
    return kExitBadInput;
  }
  return action();
}
