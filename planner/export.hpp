// Exports: one chosen layout of a plan (shape, dispatcher, rank mapping, placement, predicted
// costs, model and cluster fingerprints) written as the launch configuration of SGLang, vLLM,
// TensorRT-LLM, Megatron-Core or PaddleNLP at a release of that framework, or as moeplan's own
// layout file (docs/EXPORT.md). Each format has one file under planner/export/ that fills one
// entry of the table in planner/export/export.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "planner/export/layout_file.hpp"
#include "planner/export/spec.hpp"
#include "planner/plan.hpp"

namespace moeplan::planner {

enum class ExportFormat : std::uint8_t { kSglang, kVllm, kTrtllm, kMegatron, kPaddle, kJson };

inline constexpr ExportFormat kAllExportFormats[] = {ExportFormat::kSglang, ExportFormat::kVllm,
                                                     ExportFormat::kTrtllm, ExportFormat::kMegatron,
                                                     ExportFormat::kPaddle, ExportFormat::kJson};

/// "sglang", "vllm", "trtllm", "megatron", "paddle", "json".
std::string export_format_name(ExportFormat format);
/// The format of that name; the error (input "format") lists the six.
Result<ExportFormat> parse_export_format(const std::string& name);

/// The framework releases a format is written for, the default (its current release) first.
std::vector<std::string> framework_versions(ExportFormat format);

/// How to export, beyond the spec and the format.
struct ExportOptions {
  /// The framework release to write for; "" is the format's default (its current release).
  /// One the format does not support is an error (input "framework_version") listing those it
  /// does.
  std::string framework_version;
  /// The folder the files will be written to, when known: a format whose framework opens its
  /// other files relative to its own working directory then names them by absolute path.
  std::string out_dir;
};

/// One output file.
struct ExportFile {
  std::string name;  ///< file name inside the output folder
  std::string content;
};

/// A format's files and what it could not express exactly (each warning names the nearest
/// expressible choice).
struct ExportResult {
  ExportFormat format = ExportFormat::kJson;
  std::string framework_version;  ///< the release the files are written for
  std::vector<ExportFile> files;
  std::vector<std::string> warnings;
};

/// Writes `spec` in `format`. Errors: an unsupported framework version; the layout's structure
/// cannot be run by that framework (release); the message names the nearest layout of the plan
/// that can be.
Result<ExportResult> export_layout(const ExportSpec& spec, ExportFormat format,
                                   const ExportOptions& options = {});

/// All files as one text for stdout: each preceded by "# ==> NAME <==".
std::string export_to_text(const ExportResult& result);

/// Writes every file into `dir` (created if missing): all are staged first, then renamed, so
/// an error leaves none of them behind.
Status write_export(const ExportResult& result, const std::filesystem::path& dir);

}  // namespace moeplan::planner
