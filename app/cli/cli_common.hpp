// Shared plumbing of the CLI commands: one error reporter, exit codes, output to stdout or to a
// file written atomically.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/communicator.hpp"
#include "models/result.hpp"
#include "models/units.hpp"  // split_list
#include "planner/export.hpp"

namespace moeplan::cli {

/// Exit codes: 0 ok, 1 verification failed, 2 bad input.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;

/// The process's arguments after the program name (main stores them; launcher_world compares
/// them across ranks).
void set_command_line(std::vector<std::string> args);

/// The arguments set_command_line stored (kernels::JobWorld compares them across ranks).
const std::vector<std::string>& command_line_args();

/// The command-line flag of a library input name: "max_tokens" → "--max-tokens".
std::string flag_of(const std::string& input);

/// The help text of --weights (plan, models show, the GUI's choice): the format names.
std::string weights_flag_help();

/// Prints "moeplan: error: <message>" to stderr, the input it is about named by its flag
/// (nothing for an empty message: an error another rank reports), and returns kExitBadInput.
int report_error(const Error& error);

/// report_error, then flushes stderr: rank 0's report of an error every rank shares
/// (kernels::JobWorld), printed before any rank leaves.
void report_and_flush(const Error& error);

/// Writes `text` to `output` atomically (write_file_atomic), or to stdout when `output` is empty;
/// returns the exit code (a write error is reported).
int emit_text(const std::string& text, const std::string& output);

/// The action a parsed subcommand runs; it returns the process exit code.
using Action = std::function<int()>;

/// Registration of one top-level command: adds its subcommand to `app` and stores what to run
/// in `action` when that subcommand is chosen.
void add_models_command(CLI::App& app, Action& action);
void add_verify_command(CLI::App& app, Action& action);
void add_plan_command(CLI::App& app, Action& action);
void add_clusters_command(CLI::App& app, Action& action);
void add_profile_command(CLI::App& app, Action& action);
void add_validate_command(CLI::App& app, Action& action);
void add_place_command(CLI::App& app, Action& action);
void add_rebalance_command(CLI::App& app, Action& action);
void add_export_command(CLI::App& app, Action& action);

/// Writes `spec` in `format` for `framework_version` ("" = the current release) into `out_dir`
/// (or prints it when empty); warnings go to stderr. Shared by `moeplan export` and
/// `moeplan plan --export`.
int emit_export(const planner::ExportSpec& spec, planner::ExportFormat format,
                const std::string& framework_version, const std::string& out_dir);

}  // namespace moeplan::cli
