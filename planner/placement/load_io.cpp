// Readers of expert loads and traces, and synthetic loads.
#include "planner/placement/load_io.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string_view>

#include "models/file_io.hpp"
#include "models/index.hpp"
#include "models/json_reader.hpp"

namespace moeplan::planner {

namespace {

// The largest expert count a load may have (no MoE model comes near it).
constexpr std::int64_t kMaxExperts = 1 << 20;
using Rows = std::vector<std::vector<double>>;

std::string ext_of(const std::filesystem::path& p) {
  std::string e = p.extension().string();
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

std::string fmt_number(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

// Checks every value is finite and ≥ 0; `where(i, j)` names a position.
Status check_values(const Rows& rows, const std::string& source, const std::string& row_word) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      const double v = rows[i][j];
      if (!std::isfinite(v) || v < 0.0) {
        return Error{source + ": " + row_word + " " + std::to_string(i) + ", expert " +
                     std::to_string(j) + ": expected a finite count ≥ 0, got " + fmt_number(v)};
      }
    }
  }
  return Status::Ok();
}

// Maps file rows to MoE layers. Without a model: empty rows are dense layers and are dropped;
// the others must agree on the expert count. With a model: one row per MoE layer, or one per
// hidden layer with dense rows empty or zero; every MoE row has the model's expert count.
struct Aligned {
  int num_experts = 0;
  std::vector<int> layer_ids;  // row index of each kept row
  std::vector<int> hidden_ids;
};

Result<Aligned> align_rows(const Rows& rows, const std::string& source,
                           const models::MoeModel* model) {
  if (rows.empty()) return Error{source + ": expected at least one layer row, got none"};
  Aligned a;
  if (model == nullptr) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].empty()) continue;
      if (a.num_experts == 0) a.num_experts = static_cast<int>(rows[r].size());
      if (static_cast<int>(rows[r].size()) != a.num_experts) {
        return Error{source + ": row " + std::to_string(r) + " has " +
                     std::to_string(rows[r].size()) + " values, expected " +
                     std::to_string(a.num_experts) + " like the rows before it"};
      }
      a.layer_ids.push_back(static_cast<int>(r));
      a.hidden_ids.push_back(static_cast<int>(r));
    }
    if (a.layer_ids.empty()) return Error{source + ": every row is empty, expected expert counts"};
    return a;
  }
  a.num_experts = model->num_experts;
  const int rows_n = static_cast<int>(rows.size());
  const int moe = model->num_moe_layers();
  std::vector<int> moe_hidden;
  for (int i = 0; i < model->num_hidden_layers; ++i) {
    if (model->moe_layers[uz(i)]) moe_hidden.push_back(i);
  }
  auto check_row = [&](int r) -> Status {
    if (static_cast<int>(rows[uz(r)].size()) != a.num_experts) {
      return Error{source + ": row " + std::to_string(r) + " has " +
                   std::to_string(rows[uz(r)].size()) + " values, expected " +
                   std::to_string(a.num_experts) + " (the experts of " + model->name + ")"};
    }
    return Status::Ok();
  };
  if (rows_n == moe) {
    for (int r = 0; r < rows_n; ++r) {
      MOEPLAN_TRY_STATUS(check_row(r));
      a.layer_ids.push_back(r);
      a.hidden_ids.push_back(moe_hidden[uz(r)]);
    }
    return a;
  }
  if (rows_n == model->num_hidden_layers) {
    for (int r = 0; r < rows_n; ++r) {
      const auto& row = rows[uz(r)];
      if (!model->moe_layers[uz(r)]) {
        if (std::any_of(row.begin(), row.end(), [](double v) { return v != 0.0; })) {
          return Error{source + ": row " + std::to_string(r) + " is a dense layer of " +
                       model->name + ", expected it empty or zero"};
        }
        continue;
      }
      MOEPLAN_TRY_STATUS(check_row(r));
      a.layer_ids.push_back(r);
      a.hidden_ids.push_back(r);
    }
    return a;
  }
  return Error{source + ": has " + std::to_string(rows_n) + " layer rows, expected " +
               std::to_string(moe) + " (MoE layers of " + model->name + ") or " +
               std::to_string(model->num_hidden_layers) + " (hidden layers)"};
}

// Builds LoadData from steps [S][R][E] of raw rows.
Result<LoadData> from_steps(const std::vector<Rows>& steps, const std::string& source,
                            const models::MoeModel* model, const std::string& format) {
  if (steps.empty()) return Error{source + ": expected at least one step, got none"};
  for (std::size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].size() != steps[0].size()) {
      return Error{source + ": step " + std::to_string(s) + " has " +
                   std::to_string(steps[s].size()) + " layer rows, expected " +
                   std::to_string(steps[0].size()) + " like step 0"};
    }
    MOEPLAN_TRY_STATUS(check_values(steps[s], source, steps.size() > 1 ? "layer row" : "row"));
  }
  // Sum first so a row empty in one step and full in another is caught as ragged.
  Rows sum = steps[0];
  for (std::size_t s = 1; s < steps.size(); ++s) {
    for (std::size_t r = 0; r < sum.size(); ++r) {
      if (steps[s][r].size() != sum[r].size()) {
        return Error{source + ": step " + std::to_string(s) + ", row " + std::to_string(r) +
                     " has " + std::to_string(steps[s][r].size()) + " values, expected " +
                     std::to_string(sum[r].size()) + " like step 0"};
      }
      for (std::size_t e = 0; e < sum[r].size(); ++e) sum[r][e] += steps[s][r][e];
    }
  }
  for (std::size_t r = 0; r < sum.size(); ++r) {
    double total = 0.0;
    for (const double v : sum[r]) total += v;
    if (!std::isfinite(total)) {
      return Error{source + ": row " + std::to_string(r) +
                   ": counts too large, expected a finite total"};
    }
    if (static_cast<std::int64_t>(sum[r].size()) > kMaxExperts) {
      return Error{source + ": row " + std::to_string(r) + " has " + std::to_string(sum[r].size()) +
                   " values, expected at most " + std::to_string(kMaxExperts) + " experts"};
    }
  }
  auto a = align_rows(sum, source, model);
  if (!a) return a.error();
  LoadData d;
  d.format = format;
  d.load.source = source;
  d.load.num_experts = a->num_experts;
  d.layer_ids = a->hidden_ids;
  for (const int r : a->layer_ids) d.load.counts.push_back(sum[uz(r)]);
  if (steps.size() > 1) {
    for (const auto& step : steps) {
      Rows kept;
      for (const int r : a->layer_ids) kept.push_back(step[uz(r)]);
      d.steps.push_back(std::move(kept));
    }
  }
  return d;
}

// ---- JSON ---------------------------------------------------------------------------------

Result<Rows> json_rows(const nlohmann::json& v, const std::string& source, const std::string& key,
                       const std::string& where) {
  if (!v.is_array()) {
    return Error{source + ": key '" + key + "': " + where + " expected an array of rows, got " +
                 describe_json(v)};
  }
  Rows rows;
  for (std::size_t r = 0; r < v.size(); ++r) {
    const auto& row = v[r];
    if (!row.is_array()) {
      return Error{source + ": key '" + key + "': " + where + "row " + std::to_string(r) +
                   " expected an array of counts, got " + describe_json(row)};
    }
    std::vector<double> out;
    out.reserve(row.size());
    for (std::size_t e = 0; e < row.size(); ++e) {
      if (!row[e].is_number()) {
        return Error{source + ": key '" + key + "': " + where + "row " + std::to_string(r) +
                     ", expert " + std::to_string(e) + " expected a number, got " +
                     describe_json(row[e])};
      }
      out.push_back(row[e].get<double>());
    }
    rows.push_back(std::move(out));
  }
  return rows;
}

Result<LoadData> trace_from_json(const nlohmann::json& j, const std::string& source,
                                 const models::MoeModel* model);

Result<LoadData> trace_from_ids(std::vector<std::vector<std::vector<std::int64_t>>> ids,
                                int declared_experts, const std::string& source,
                                const models::MoeModel* model, const std::string& format);

}  // namespace

Result<LoadData> parse_load_json(const std::string& text, const std::string& source,
                                 const models::MoeModel* model) {
  auto j = parse_json(text, source);
  if (!j) return j.error();
  if (!j->is_object()) {
    return Error{source + ": expected a JSON object with 'logical_count' or 'topk_ids', got " +
                 describe_json(*j)};
  }
  if (j->contains("topk_ids")) return trace_from_json(*j, source, model);
  if (!j->contains("logical_count")) {
    return Error{source +
                 ": key 'logical_count': missing, expected [layers][experts] or "
                 "[steps][layers][experts] counts (or 'topk_ids' for a trace)"};
  }
  const auto& lc = j->at("logical_count");
  if (!lc.is_array() || lc.empty()) {
    return Error{source + ": key 'logical_count': expected a non-empty array, got " +
                 describe_json(lc)};
  }
  // [S][L][E] when the first row's first element is itself an array.
  bool three_d = false;
  for (const auto& row : lc) {
    if (row.is_array() && !row.empty()) {
      three_d = row[0].is_array();
      break;
    }
  }
  std::vector<Rows> steps;
  if (three_d) {
    for (std::size_t s = 0; s < lc.size(); ++s) {
      auto rows = json_rows(lc[s], source, "logical_count", "step " + std::to_string(s) + ", ");
      if (!rows) return rows.error();
      steps.push_back(std::move(*rows));
    }
  } else {
    auto rows = json_rows(lc, source, "logical_count", "");
    if (!rows) return rows.error();
    steps.push_back(std::move(*rows));
  }
  return from_steps(steps, source, model, "json");
}

// ---- CSV ----------------------------------------------------------------------------------

Result<LoadData> parse_load_csv(const std::string& text, const std::string& source,
                                const models::MoeModel* model) {
  Rows rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::vector<double> row;
    std::size_t pos = 0;
    while (true) {
      const std::size_t comma = line.find(',', pos);
      std::string cell =
          line.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      const auto b = cell.find_first_not_of(" \t");
      const auto e = cell.find_last_not_of(" \t");
      cell = b == std::string::npos ? "" : cell.substr(b, e - b + 1);
      double v = 0.0;
      std::size_t used = 0;
      bool ok = !cell.empty();
      if (ok) {
        try {
          v = std::stod(cell, &used);
        } catch (const std::exception&) {
          ok = false;
        }
      }
      if (!ok || used != cell.size()) {
        return Error{source + ": line " + std::to_string(line_no) + ", column " +
                     std::to_string(row.size() + 1) + ": expected a number, got '" + cell + "'"};
      }
      row.push_back(v);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return Error{source + ": empty file, expected a row of counts per layer"};
  return from_steps({rows}, source, model, "csv");
}

// ---- NPY ----------------------------------------------------------------------------------

Result<LoadData> parse_load_npy(const std::string& bytes, const std::string& source,
                                const models::MoeModel* model) {
  auto arr = parse_npy(bytes, source);
  if (!arr) return arr.error();
  const auto& s = arr->shape;
  if (s.size() != 2 && s.size() != 3) {
    return Error{source +
                 ": expected a 2-D [layers, experts] or 3-D [steps, layers, experts] "
                 "array, got " +
                 std::to_string(s.size()) + " dimensions"};
  }
  if (arr->values.empty()) return Error{source + ": empty array, expected expert counts"};
  const auto num_steps = s.size() == 3 ? static_cast<std::size_t>(s[0]) : 1U;
  const auto num_rows = static_cast<std::size_t>(s[s.size() - 2]);
  const auto num_experts = static_cast<std::size_t>(s[s.size() - 1]);
  std::vector<Rows> steps(num_steps, Rows(num_rows, std::vector<double>(num_experts)));
  std::size_t k = 0;
  for (auto& step : steps) {
    for (auto& row : step) {
      for (auto& v : row) v = arr->values[k++];
    }
  }
  return from_steps(steps, source, model, "npy");
}

// ---- traces -------------------------------------------------------------------------------

namespace {

Result<LoadData> trace_from_ids(std::vector<std::vector<std::vector<std::int64_t>>> ids,
                                int declared_experts, const std::string& source,
                                const models::MoeModel* model, const std::string& format) {
  if (ids.empty()) return Error{source + ": expected at least one layer of top-k ids, got none"};
  int top_k = 0;
  std::int64_t max_id = -1;
  for (std::size_t l = 0; l < ids.size(); ++l) {
    for (std::size_t t = 0; t < ids[l].size(); ++t) {
      const auto& tok = ids[l][t];
      if (top_k == 0) top_k = static_cast<int>(tok.size());
      if (tok.empty() || static_cast<int>(tok.size()) != top_k) {
        return Error{source + ": layer " + std::to_string(l) + ", token " + std::to_string(t) +
                     " has " + std::to_string(tok.size()) + " expert ids, expected " +
                     std::to_string(std::max(top_k, 1)) + " (top-k) like the tokens before it"};
      }
      for (std::size_t a = 0; a < tok.size(); ++a) {
        if (tok[a] < 0) {
          return Error{source + ": layer " + std::to_string(l) + ", token " + std::to_string(t) +
                       ": expected expert ids ≥ 0, got " + std::to_string(tok[a])};
        }
        for (std::size_t b = 0; b < a; ++b) {
          if (tok[a] == tok[b]) {
            return Error{source + ": layer " + std::to_string(l) + ", token " + std::to_string(t) +
                         " names expert " + std::to_string(tok[a]) +
                         " twice, expected distinct top-k ids"};
          }
        }
        max_id = std::max(max_id, tok[a]);
      }
    }
  }
  if (top_k == 0) return Error{source + ": every layer is empty, expected top-k ids"};
  if (max_id >= kMaxExperts) {
    return Error{source + ": expert id " + std::to_string(max_id) + " out of range, expected < " +
                 std::to_string(kMaxExperts)};
  }
  int num_experts = model != nullptr ? model->num_experts : declared_experts;
  if (num_experts <= 0) num_experts = static_cast<int>(max_id + 1);
  if (max_id >= num_experts) {
    return Error{source + ": expert id " + std::to_string(max_id) + " out of range, expected [0, " +
                 std::to_string(num_experts - 1) + "]"};
  }
  // Align layers like count rows: empty layers are dense.
  Rows rows;
  for (const auto& layer : ids) {
    std::vector<double> row;
    if (!layer.empty()) {
      row.assign(uz(num_experts), 0.0);
      for (const auto& tok : layer) {
        for (const std::int64_t e : tok) row[static_cast<std::size_t>(e)] += 1.0;
      }
    }
    rows.push_back(std::move(row));
  }
  auto d = from_steps({rows}, source, model, format);
  if (!d) return d.error();
  // Keep the trace rows of the layers that were kept.
  TokenTrace trace;
  trace.num_experts = num_experts;
  trace.top_k = top_k;
  std::vector<int> kept;
  if (model != nullptr && static_cast<int>(ids.size()) == model->num_hidden_layers &&
      model->num_hidden_layers != model->num_moe_layers()) {
    kept = d->layer_ids;
  } else {
    for (std::size_t l = 0; l < ids.size(); ++l) {
      if (!ids[l].empty()) kept.push_back(static_cast<int>(l));
    }
  }
  for (const int l : kept) {
    std::vector<int> flat;
    flat.reserve(ids[uz(l)].size() * uz(top_k));
    for (const auto& tok : ids[uz(l)]) {
      for (const std::int64_t e : tok) flat.push_back(static_cast<int>(e));
    }
    trace.topk_ids.push_back(std::move(flat));
  }
  if (trace.num_layers() != d->load.num_layers()) {
    return Error{source + ": expected every MoE layer to hold tokens"};
  }
  d->trace = std::move(trace);
  return d;
}

Result<LoadData> trace_from_json(const nlohmann::json& j, const std::string& source,
                                 const models::MoeModel* model) {
  JsonReader r(j, source);
  auto declared = r.integer_or("num_experts", 0, 1, 1 << 20);
  if (!declared) return declared.error();
  const auto& t = j.at("topk_ids");
  if (!t.is_array()) {
    return r.error("topk_ids", "expected [layers][tokens][top-k] ids, got " + describe_json(t));
  }
  std::vector<std::vector<std::vector<std::int64_t>>> ids(t.size());
  for (std::size_t l = 0; l < t.size(); ++l) {
    if (!t[l].is_array()) {
      return r.error("topk_ids", "layer " + std::to_string(l) +
                                     " expected an array of tokens, got " + describe_json(t[l]));
    }
    for (std::size_t k = 0; k < t[l].size(); ++k) {
      const auto& tok = t[l][k];
      if (!tok.is_array()) {
        return r.error("topk_ids", "layer " + std::to_string(l) + ", token " + std::to_string(k) +
                                       " expected an array of expert ids, got " +
                                       describe_json(tok));
      }
      std::vector<std::int64_t> row;
      for (const auto& v : tok) {
        if (!v.is_number_integer()) {
          return r.error("topk_ids", "layer " + std::to_string(l) + ", token " + std::to_string(k) +
                                         " expected integer ids, got " + describe_json(v));
        }
        row.push_back(v.get<std::int64_t>());
      }
      ids[l].push_back(std::move(row));
    }
  }
  return trace_from_ids(std::move(ids), static_cast<int>(*declared), source, model, "trace-json");
}

Result<std::string> read_bytes(const std::filesystem::path& path) { return read_text_file(path); }

}  // namespace

Result<LoadData> read_load_file(const std::filesystem::path& path, const models::MoeModel* model) {
  auto bytes = read_bytes(path);
  if (!bytes) return bytes.error();
  const std::string source = path.string();
  const std::string ext = ext_of(path);
  if (ext == ".npy" || bytes->rfind("\x93NUMPY", 0) == 0)
    return parse_load_npy(*bytes, source, model);
  if (ext == ".csv") return parse_load_csv(*bytes, source, model);
  if (ext == ".json") return parse_load_json(*bytes, source, model);
  const auto first = bytes->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (*bytes)[first] == '{') {
    return parse_load_json(*bytes, source, model);
  }
  return parse_load_csv(*bytes, source, model);
}

Result<LoadData> parse_trace_npy(const std::string& bytes, const std::string& source,
                                 const models::MoeModel* model) {
  auto arr = parse_npy(bytes, source);
  if (!arr) return arr.error();
  if (arr->shape.size() != 3) {
    return Error{source + ": expected a 3-D [layers, tokens, top-k] array of expert ids, got " +
                 std::to_string(arr->shape.size()) + " dimensions"};
  }
  if (!arr->integer) return Error{source + ": expected integer expert ids (<i4 or <i8)"};
  const auto layers = static_cast<std::size_t>(arr->shape[0]);
  const auto tokens = static_cast<std::size_t>(arr->shape[1]);
  const auto k = static_cast<std::size_t>(arr->shape[2]);
  if (arr->values.empty()) return Error{source + ": empty array, expected top-k ids"};
  std::vector<std::vector<std::vector<std::int64_t>>> ids(
      layers, std::vector<std::vector<std::int64_t>>(tokens, std::vector<std::int64_t>(k)));
  std::size_t i = 0;
  for (auto& l : ids) {
    for (auto& t : l) {
      for (auto& e : t) {
        // The values arrive as doubles: an int64 near 2^63 rounds up past the int64 range.
        const double v = arr->values[i];
        if (!(v >= -2147483648.0 && v < 2147483648.0)) {
          return Error{source + ": element " + std::to_string(i) + ": expected an expert id, got " +
                       std::to_string(v)};
        }
        e = static_cast<std::int64_t>(v);
        ++i;
      }
    }
  }
  return trace_from_ids(std::move(ids), 0, source, model, "trace-npy");
}

Result<LoadData> parse_trace_json(const std::string& text, const std::string& source,
                                  const models::MoeModel* model) {
  auto j = parse_json(text, source);
  if (!j) return j.error();
  if (!j->is_object() || !j->contains("topk_ids")) {
    return Error{source + ": key 'topk_ids': missing, expected [layers][tokens][top-k] ids"};
  }
  return trace_from_json(*j, source, model);
}

Result<LoadData> read_trace_file(const std::filesystem::path& path, const models::MoeModel* model) {
  auto bytes = read_bytes(path);
  if (!bytes) return bytes.error();
  const std::string source = path.string();
  if (ext_of(path) == ".npy" || bytes->rfind("\x93NUMPY", 0) == 0) {
    return parse_trace_npy(*bytes, source, model);
  }
  return parse_trace_json(*bytes, source, model);
}

// ---- synthetic ----------------------------------------------------------------------------

namespace {

// The kinds of synthetic_load, and the kernels' routed loads (profiler/routed_load.hpp).
constexpr std::array<std::string_view, 4> kSyntheticKinds{"uniform", "powerlaw", "hot", "routed"};

}  // namespace

Result<SyntheticSpec> parse_synthetic_spec(const std::string& spec) {
  const std::string what = "synthetic load '" + spec + "': ";
  const auto colon = spec.find(':');
  SyntheticSpec out;
  out.kind = spec.substr(0, colon);
  if (colon != std::string::npos) {
    std::string rest = spec.substr(colon + 1);
    std::size_t pos = 0;
    while (pos <= rest.size()) {
      const auto comma = rest.find(',', pos);
      const std::string item =
          rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      const auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        return Error{what + "expected key=value, got '" + item + "'"};
      }
      if (!out.keys.emplace(item.substr(0, eq), item.substr(eq + 1)).second) {
        return Error{what + "key '" + item.substr(0, eq) + "' given twice"};
      }
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  return out;
}

Result<LoadData> synthetic_load(const std::string& spec, const models::MoeModel* model) {
  const std::string what = "synthetic load '" + spec + "': ";
  auto parsed = parse_synthetic_spec(spec);
  if (!parsed) return parsed.error();
  const std::string& kind = parsed->kind;
  const std::map<std::string, std::string>& kv = parsed->keys;
  if (kind == "routed") {
    return Error{what +
                 "routed loads run the model's router; they come from the kernels "
                 "(moeplan place/plan handle them), not from the planner alone"};
  }
  std::vector<std::string> allowed{"layers", "experts", "tokens", "seed"};
  if (kind == "powerlaw") {
    allowed.insert(allowed.end(), {"alpha", "shuffle"});
  } else if (kind == "hot") {
    allowed.insert(allowed.end(), {"n", "share", "shuffle"});
  } else if (kind != "uniform") {
    return Error{what + "unknown kind '" + kind + "', expected uniform, powerlaw, hot or routed"};
  }
  for (const auto& [k, v] : kv) {
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Error{what + "unknown key '" + k + "' for " + kind + ", expected one of " + list};
    }
  }
  auto number = [&](const std::string& key, double fallback, double lo, double hi,
                    bool required) -> Result<double> {
    const auto it = kv.find(key);
    if (it == kv.end()) {
      if (required) return Error{what + "key '" + key + "' missing"};
      return fallback;
    }
    double v = 0.0;
    std::size_t used = 0;
    try {
      v = std::stod(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != it->second.size() || !std::isfinite(v) || v < lo || v > hi) {
      return Error{what + "key '" + key + "': expected a number in [" + fmt_number(lo) + ", " +
                   fmt_number(hi) + "], got '" + it->second + "'"};
    }
    return v;
  };
  auto integer = [&](const std::string& key, double fallback, double lo, double hi,
                     bool required) -> Result<std::int64_t> {
    auto v = number(key, fallback, lo, hi, required);
    if (!v) return v.error();
    if (std::floor(*v) != *v) {
      return Error{what + "key '" + key + "': expected an integer, got '" + kv.at(key) + "'"};
    }
    return static_cast<std::int64_t>(*v);
  };
  const double default_layers = model != nullptr ? model->num_moe_layers() : 1;
  auto layers = integer("layers", default_layers, 1, 4096, false);
  if (!layers) return layers.error();
  auto experts =
      integer("experts", model != nullptr ? model->num_experts : 0, 1, 65536, model == nullptr);
  if (!experts) return experts.error();
  if (model != nullptr && *experts != model->num_experts) {
    return Error{what + "key 'experts': " + model->name + " has " +
                 std::to_string(model->num_experts) + " experts, got " + std::to_string(*experts)};
  }
  auto tokens = number("tokens", 65536, 1, 1e15, false);
  if (!tokens) return tokens.error();
  auto seed = integer("seed", 0, 0, 9.0e15, false);
  if (!seed) return seed.error();
  auto shuffle = integer("shuffle", 0, 0, 1, false);
  if (!shuffle) return shuffle.error();

  const auto num_experts = static_cast<int>(*experts);
  std::vector<double> base(uz(num_experts), 1.0);
  if (kind == "powerlaw") {
    auto alpha = number("alpha", 0, 0, 10, true);
    if (!alpha) return alpha.error();
    for (int r = 0; r < num_experts; ++r) base[uz(r)] = std::pow(r + 1.0, -*alpha);
  } else if (kind == "hot") {
    auto n = integer("n", 0, 1, num_experts, true);
    if (!n) return n.error();
    auto share = number("share", 0, 0, 1, true);
    if (!share) return share.error();
    const auto hot = static_cast<int>(*n);
    if (hot == num_experts && *share < 1.0) {
      return Error{what + "key 'share': with every expert hot the share must be 1"};
    }
    for (int e = 0; e < num_experts; ++e) {
      base[uz(e)] = e < hot ? *share / hot : (1.0 - *share) / (num_experts - hot);
    }
  }
  const double sum = std::accumulate(base.begin(), base.end(), 0.0);
  LoadData d;
  d.format = "synthetic";
  d.load.source = spec;
  d.load.num_experts = num_experts;
  std::mt19937_64 rng(static_cast<std::uint64_t>(*seed));
  std::vector<int> hidden;
  if (model != nullptr && *layers == model->num_moe_layers()) {
    for (int i = 0; i < model->num_hidden_layers; ++i) {
      if (model->moe_layers[uz(i)]) hidden.push_back(i);
    }
  }
  for (int l = 0; l < static_cast<int>(*layers); ++l) {
    std::vector<int> order(uz(num_experts));
    std::iota(order.begin(), order.end(), 0);
    if (*shuffle == 1) std::shuffle(order.begin(), order.end(), rng);
    std::vector<double> row(uz(num_experts));
    for (int r = 0; r < num_experts; ++r) row[uz(order[uz(r)])] = *tokens * base[uz(r)] / sum;
    d.load.counts.push_back(std::move(row));
    d.layer_ids.push_back(hidden.empty() ? l : hidden[uz(l)]);
  }
  return d;
}

Result<LoadData> load_file_or_spec(const std::string& file_or_spec, const models::MoeModel* model) {
  const auto ends_with = [&](const std::string& suffix) {
    return file_or_spec.size() >= suffix.size() &&
           file_or_spec.compare(file_or_spec.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (file_or_spec.find('/') != std::string::npos || ends_with(".json") || ends_with(".csv") ||
      ends_with(".npy")) {
    return read_load_file(file_or_spec, model);
  }
  // A bare name that is no synthetic kind but names something here is read as a file (which
  // says what is wrong with it: a directory, an unreadable file), not taken for a misspelt kind.
  const std::string kind =
      file_or_spec.substr(0, file_or_spec.find(':'));  // as parse_synthetic_spec
  std::error_code ec;
  if (std::find(kSyntheticKinds.begin(), kSyntheticKinds.end(), kind) == kSyntheticKinds.end() &&
      std::filesystem::exists(file_or_spec, ec)) {
    return read_load_file(file_or_spec, model);
  }
  return synthetic_load(file_or_spec, model);
}

}  // namespace moeplan::planner
