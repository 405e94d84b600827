// The export table (one entry per format, each filled by its own file under planner/export/),
// format and framework-version choice, the nearest runnable layout, and the staged write.
#include "planner/export.hpp"

#include <functional>

#include "models/file_io.hpp"
#include "planner/export/writer.hpp"

namespace moeplan::planner {

namespace {

using exports::FormatWriter;
using exports::WeightsArgs;

const FormatWriter* const kWriters[] = {&exports::kSglangWriter, &exports::kVllmWriter,
                                        &exports::kTrtllmWriter, &exports::kMegatronWriter,
                                        &exports::kPaddleWriter, &exports::kLayoutFileWriter};

const FormatWriter& writer_of(ExportFormat format) {
  for (const FormatWriter* w : kWriters) {
    if (w->format == format) return *w;
  }
  MOEPLAN_ASSERT(false, "every export format has a writer");
  return *kWriters[0];
}

/// The release `requested` ("" = the default) among the writer's, or an error listing them.
Result<std::string> resolve_version(const FormatWriter& w, const std::string& requested) {
  if (requested.empty()) return std::string(w.versions.front().version);
  std::string known;
  for (const auto& v : w.versions) {
    if (requested == v.version) return requested;
    known += (known.empty() ? "" : ", ") + std::string(v.version);
  }
  return input_error("framework_version", " " + requested + ": the " + w.name + " export (" +
                                              w.framework + ") is written for " + known +
                                              " (default " + w.versions.front().version + ")");
}

/// "nearest expressible layout in the plan: rank 3: … ({layout} 3)", or that there is none.
/// Nearest means: the same shape and dispatcher (another mapping), else the same shape, else the
/// best-ranked layout of the same EP size (a placement still fits it), else the best-ranked
/// layout the framework can run (then without the placement, which is for another EP size).
std::string nearest_layout(const ExportSpec& spec, const FormatWriter& w,
                           std::string_view version) {
  const Layout& c = spec.chosen.layout;
  auto same_shape = [&c](const Layout& a) {
    return a.dp_size == c.dp_size && a.ep_size == c.ep_size && a.tp_size == c.tp_size;
  };
  const std::function<bool(const Layout&)> tiers[] = {
      [&](const Layout& a) { return same_shape(a) && a.dispatcher == c.dispatcher; }, same_shape,
      [&c](const Layout& a) { return a.ep_size == c.ep_size; }, [](const Layout&) { return true; }};
  for (const auto& tier : tiers) {
    for (const auto& alt : spec.alternatives) {
      if (tier(alt.layout) && w.cannot_run(spec, alt.layout, version).empty()) {
        const bool drop_placement = spec.placement && alt.layout.ep_size != c.ep_size;
        return "nearest expressible layout in the plan: " + alt.describe() + " ({layout} " +
               std::to_string(alt.rank) +
               (drop_placement ? ", without the {placement}: it is for " +
                                     std::to_string(c.ep_size) + " EP ranks"
                               : std::string()) +
               ")";
      }
    }
  }
  return "no layout of the plan can be expressed in " + std::string(w.name) + " " +
         std::string(version);
}

}  // namespace

std::string export_format_name(ExportFormat format) { return writer_of(format).name; }

Result<ExportFormat> parse_export_format(const std::string& name) {
  for (const FormatWriter* w : kWriters) {
    if (name == w->name) return w->format;
  }
  return input_error(
      "format", ": expected sglang, vllm, trtllm, megatron, paddle or json, got '" + name + "'");
}

std::vector<std::string> framework_versions(ExportFormat format) {
  std::vector<std::string> out;
  for (const auto& v : writer_of(format).versions) out.emplace_back(v.version);
  return out;
}

Result<ExportResult> export_layout(const ExportSpec& spec, ExportFormat format,
                                   const ExportOptions& options) {
  const FormatWriter& w = writer_of(format);
  auto version = resolve_version(w, options.framework_version);
  if (!version) return version.error();
  if (w.weights != nullptr) {
    if (const WeightsArgs q = w.weights(spec, *version); !q.error.empty()) {
      return Error{std::string(w.name) + " " + *version + ": weights " + spec.weights.name() +
                   ": " + q.error + " (no layout of the plan can be expressed in " + w.name + " " +
                   *version + " with these weights)"};
    }
  }
  const auto errors = w.cannot_run(spec, spec.chosen.layout, *version);
  if (!errors.empty()) {
    return Error{std::string(w.name) + " " + *version + ": layout " +
                 spec.chosen.layout.full_name() + ": " + errors.front() + "; " +
                 nearest_layout(spec, w, *version)};
  }
  ExportResult res = w.write(spec, *version, options);
  res.format = format;
  res.framework_version = *version;
  return res;
}

std::string export_to_text(const ExportResult& result) {
  if (result.files.size() == 1) return result.files.front().content;
  std::string out;
  for (std::size_t i = 0; i < result.files.size(); ++i) {
    out += (i ? "\n" : "") + std::string("# ==> ") + result.files[i].name + " <==\n" +
           result.files[i].content;
  }
  return out;
}

Status write_export(const ExportResult& result, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    return Error{dir.string() + ": cannot create the output folder" +
                 (ec ? ": " + ec.message() : std::string())};
  }
  std::vector<std::filesystem::path> staged;
  auto unstage = [&] {
    for (const auto& p : staged) std::filesystem::remove(p, ec);
  };
  for (const auto& f : result.files) {
    const auto tmp = dir / (".moeplan-staged-" + f.name);
    if (auto s = write_file_atomic(tmp, f.content); !s.ok()) {
      unstage();
      return s;
    }
    staged.push_back(tmp);
  }
  for (std::size_t i = 0; i < staged.size(); ++i) {
    std::filesystem::rename(staged[i], dir / result.files[i].name, ec);
    if (ec) {
      const std::string why = ec.message();
      for (std::size_t k = 0; k < i; ++k) std::filesystem::remove(dir / result.files[k].name, ec);
      unstage();
      return Error{(dir / result.files[i].name).string() + ": cannot be written: " + why};
    }
  }
  return Status::Ok();
}

}  // namespace moeplan::planner
