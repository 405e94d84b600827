// Text helpers shared by the export writers: header comments, shell commands, placement
// predicates.
#include "planner/export/writer.hpp"

#include "models/units.hpp"

namespace moeplan::planner::exports {

namespace {

std::string ms(double seconds) { return format_fixed(seconds * 1e3, 3) + " ms"; }

}  // namespace

bool mapping_matters(const Layout& l) { return l.ep_size > 1 && l.tp_size > 1; }

std::string replicas_text(const Layout& l) {
  return std::to_string(l.dp_size) + " independent MoE replicas (dp" + std::to_string(l.dp_size) +
         ")";
}

std::string comment_block(const ExportSpec& spec, std::string_view format, std::string_view version,
                          const std::vector<std::string>& warnings) {
  const auto& c = spec.chosen;
  std::vector<std::string> h;
  h.push_back("moeplan export (" + std::string(format) + " " + std::string(version) +
              "): " + spec.model + " on " + spec.cluster + ", " +
              std::to_string(c.layout.num_gpus) + " × " + spec.device);
  h.push_back("layout" + (c.rank > 0 ? " rank " + std::to_string(c.rank) : std::string()) + ": " +
              c.layout.full_name() + "; " + phase_name(spec.workload.phase) + ", " +
              std::to_string(spec.workload.tokens_per_gpu) + " tokens per GPU");
  h.push_back("predicted (" + spec.cost_source + ", placement " + spec.cost_placement +
              "): " + ms(c.step_seconds) + " per step of the whole model, " +
              format_fixed(c.tokens_per_s_per_gpu, 0) + " tokens/s/GPU, " +
              format_fixed(c.memory_gib, 2) + " GiB of " + format_fixed(c.capacity_gib, 2) +
              " GiB per GPU" + (c.feasible ? "" : " (does not fit)"));
  h.push_back(weights_line(spec));
  h.push_back("model " + spec.model_fingerprint + ", cluster " + spec.cluster_fingerprint);
  if (spec.placement) {
    h.push_back("placement: " + spec.placement->policy + ", " +
                std::to_string(spec.placement->num_slots) + " slots per MoE layer (" +
                std::to_string(redundant_slots(spec)) + " redundant)");
  }
  std::string out;
  for (const auto& line : h) out += "# " + line + "\n";
  for (const auto& w : warnings) out += "# warning: " + w + "\n";
  return out;
}

std::string shell_command(const std::string& program, const std::vector<std::string>& args) {
  std::string out = program;
  for (const auto& a : args) out += " \\\n  " + a;
  return out + "\n";
}

std::string shell_text(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    if (std::string_view("'\"`$\\{}\n").find(ch) == std::string_view::npos) out += ch;
  }
  return out;
}

std::string required_variable(const std::string& name, const std::string& what) {
  return name + "=\"${" + name + ":?set " + name + " to " + shell_text(what) + "}\"\n";
}

std::string model_path_line(const ExportSpec& spec) {
  return required_variable("MODEL_PATH", "the " + spec.model + " checkpoint");
}

std::string int_row(const std::vector<int>& row) {
  std::string s = "[";
  for (std::size_t i = 0; i < row.size(); ++i) s += (i ? ", " : "") + std::to_string(row[i]);
  return s + "]";
}

std::string fraction_text(double share) {
  std::string s = format_fixed(share, 6);
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

bool is_contiguous(const Placement& p) {
  if (p.num_slots != p.num_experts) return false;
  for (const auto& row : p.physical_to_logical) {
    for (int s = 0; s < p.num_slots; ++s) {
      if (row[static_cast<std::size_t>(s)] != s) return false;
    }
  }
  return true;
}

bool is_round_robin(const Placement& p) {
  if (p.num_slots != p.num_experts) return false;
  const int per = p.slots_per_rank();
  for (const auto& row : p.physical_to_logical) {
    for (int s = 0; s < p.num_slots; ++s) {
      if (row[static_cast<std::size_t>(s)] != s / per + (s % per) * p.ep_size) return false;
    }
  }
  return true;
}

int redundant_slots(const ExportSpec& spec) {
  return spec.placement ? spec.placement->num_slots - spec.num_experts : 0;
}

std::string same_shape_with(const ExportSpec& spec, Dispatcher d) {
  const Layout& c = spec.chosen.layout;
  for (const auto& alt : spec.alternatives) {
    const Layout& a = alt.layout;
    if (a.dp_size == c.dp_size && a.ep_size == c.ep_size && a.tp_size == c.tp_size &&
        a.mapping == c.mapping && a.tbo == c.tbo && a.dispatcher == d) {
      return "; the plan costs it as " + alt.describe() + " (--layout " + std::to_string(alt.rank) +
             ")";
    }
  }
  return "";
}

std::string attention_split_error(const ExportSpec& spec, const Layout& layout, int attn_tp,
                                  const std::string& framework, const std::string& where,
                                  KvHeads kv) {
  const int heads = spec.num_attention_heads;
  const int groups = spec.num_kv_heads;
  std::string why;
  if (heads > 0 && heads % attn_tp != 0) {
    why = "num_attention_heads " + std::to_string(heads) + " is not a multiple of " +
          std::to_string(attn_tp);
  } else if (groups > 0 && groups != heads && kv != KvHeads::kAny && groups % attn_tp != 0 &&
             (kv == KvHeads::kMultiple || attn_tp % groups != 0)) {
    why = "num_key_value_heads " + std::to_string(groups) + " is not a multiple " +
          (kv == KvHeads::kMultiple ? std::string() : "or a divisor ") + "of " +
          std::to_string(attn_tp);
  }
  if (why.empty()) return why;
  return framework + " splits the attention heads over " + std::to_string(attn_tp) +
         " tensor-parallel ranks (" + where + ") and " + spec.model + "'s " + why + ", so " +
         layout.shape_name() + " cannot run";
}

std::string placement_not_exported(const ExportSpec& spec, const std::string& framework) {
  return framework + " places experts contiguously (rank r owns experts [r·E/ep, (r+1)·E/ep)) " +
         "and has no redundant experts; placement '" + spec.placement->policy + "' (" +
         std::to_string(spec.placement->num_slots) +
         " slots) is not exported, nearest: the contiguous placement";
}

}  // namespace moeplan::planner::exports
