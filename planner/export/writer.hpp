// Inside planner/export: the table entry each format's file fills (name, the framework releases
// it writes for, the layouts that framework cannot run, its writer), as nccl-tests gives each
// collective one file that fills a table, and the text helpers the launch files share.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/export.hpp"
#include "planner/export/quantization.hpp"

namespace moeplan::planner::exports {

/// A release of a framework that a format is written for.
struct FrameworkVersion {
  const char* version;  ///< as --framework-version takes it ("0.5.23")
  const char* checked;  ///< how moeplan's output was checked against it (docs/EXPORT.md)
};

/// One export format.
struct FormatWriter {
  ExportFormat format;
  const char* name;       ///< the --format value
  const char* framework;  ///< "SGLang"
  /// The releases written for; the first is the default (the framework's current release).
  std::span<const FrameworkVersion> versions;
  /// Why the framework at `version` cannot run `layout` with `spec`'s model (empty: it can).
  std::vector<std::string> (*cannot_run)(const ExportSpec& spec, const Layout& layout,
                                         std::string_view version);
  /// The files of `spec` (whose layout it can run) for `version`, with what it could not express.
  ExportResult (*write)(const ExportSpec& spec, std::string_view version,
                        const ExportOptions& options);
  /// The framework's arguments for the plan's weight format, or why it cannot run it
  /// (planner/export/quantization.hpp); null: the format records the weights itself.
  WeightsArgs (*weights)(const ExportSpec& spec, std::string_view version) = nullptr;
};

extern const FormatWriter kSglangWriter;      // planner/export/sglang.cpp
extern const FormatWriter kVllmWriter;        // planner/export/vllm.cpp
extern const FormatWriter kTrtllmWriter;      // planner/export/trtllm.cpp
extern const FormatWriter kMegatronWriter;    // planner/export/megatron.cpp
extern const FormatWriter kPaddleWriter;      // planner/export/paddle.cpp
extern const FormatWriter kLayoutFileWriter;  // planner/export/layout_file.cpp

// ---- shared by the writers (planner/export/writer.cpp) ------------------------------------

/// Whether the two rank mappings are different GPU assignments (ep and tp both > 1).
bool mapping_matters(const Layout& l);
/// "2 independent MoE replicas (dp2)".
std::string replicas_text(const Layout& l);
/// The `#` comment block that opens a launch file: what was exported for which release, the
/// predicted costs and fingerprints, then one `# warning:` line per warning.
std::string comment_block(const ExportSpec& spec, std::string_view format, std::string_view version,
                          const std::vector<std::string>& warnings);
/// `program` followed by one argument per line, continued with backslashes.
std::string shell_command(const std::string& program, const std::vector<std::string>& args);
/// Text for a bash `${VAR:?text}` message or a double-quoted string: quotes, braces, `$`,
/// backquotes and backslashes dropped.
std::string shell_text(std::string_view text);
/// `NAME="${NAME:?set NAME to <what>}"`: a variable the user must set.
std::string required_variable(const std::string& name, const std::string& what);
/// The MODEL_PATH line every launch script starts with.
std::string model_path_line(const ExportSpec& spec);
/// "[0, 1, 2]".
std::string int_row(const std::vector<int>& row);
/// A share in (0, 1] as a framework flag's value, exact to 1e-6 without trailing zeros: "0.85",
/// "0.855", "1.0".
std::string fraction_text(double share);
/// The placement is the contiguous one (E slots, rank r holds [r·E/ep, (r+1)·E/ep)).
bool is_contiguous(const Placement& p);
/// vLLM's round_robin: local slot i of rank r holds expert r + i·ep.
bool is_round_robin(const Placement& p);
/// Redundant slots per MoE layer (0 without a placement).
int redundant_slots(const ExportSpec& spec);
/// "; the plan costs it as rank N: … (--layout N)": a plan layout of the same shape and mapping
/// with dispatcher `d`, or "" when the plan has none. (Warnings are written into the exported
/// files too, so they name moeplan's command-line flag, not a front end's input.)
std::string same_shape_with(const ExportSpec& spec, Dispatcher d);
/// How a framework splits the key/value heads over its attention TP ranks.
enum class KvHeads : std::uint8_t {
  kAny,                ///< no rule (replicated when fewer than the ranks)
  kMultipleOrDivisor,  ///< the ranks are a multiple or a divisor of the kv heads
  kMultiple,           ///< the kv heads are a multiple of the ranks
};
/// Why `framework` (its rule `where`) cannot split `spec`'s attention heads over `attn_tp` ranks
/// in `layout`, or "" when it can (or the model's heads are unknown).
std::string attention_split_error(const ExportSpec& spec, const Layout& layout, int attn_tp,
                                  const std::string& framework, const std::string& where,
                                  KvHeads kv);

/// The warning for a framework that places experts contiguously only.
std::string placement_not_exported(const ExportSpec& spec, const std::string& framework);

}  // namespace moeplan::planner::exports
