// vLLM: vllm_serve.sh (vllm serve), one node or several (node-specific arguments from
// NODE_RANK).
#include "planner/export/writer.hpp"

namespace moeplan::planner::exports {

// Inside a namespace of its own: the writers share their helpers' names and may be compiled
// as one translation unit (MOEPLAN_UNITY_BUILD).
namespace {
namespace vllm {

constexpr FrameworkVersion kVersions[] = {
    {"0.34.0",
     "PyPI wheel: the serve parser, validate_parsed_serve_args, "
     "AsyncEngineArgs.create_engine_config on node 0 and the last node (tests/exports)"},
};

std::vector<std::string> cannot_run(const ExportSpec& spec, const Layout& l, std::string_view) {
  std::vector<std::string> out;
  if (auto e = attention_split_error(spec, l, l.tp_size, "vLLM",
                                     "ModelConfig.verify_with_parallel_config", KvHeads::kAny);
      !e.empty()) {
    out.push_back(e);
  }
  if (l.dp_size > 1) {
    out.push_back(
        "vLLM puts every data-parallel rank into one expert-parallel group "
        "(EP size = TP × DP), so " +
        replicas_text(l) + " cannot be expressed");
  }
  if (l.ep_size > 1 && l.tp_size > 1) {
    out.push_back(
        "vLLM shards experts either by TP (--tensor-parallel-size, no EP) or by EP "
        "over all TP × DP ranks (--enable-expert-parallel), never TP inside EP, so " +
        l.shape_name() + " cannot be expressed");
  }
  return out;
}

/// The lines that read a node's identity and the arguments that differ per node.
struct MultiNode {
  std::string env;                ///< variable lines before the command
  std::vector<std::string> args;  ///< arguments every node passes
};

/// EP over data-parallel ranks on several nodes: node 0 runs the API server and its local
/// ranks; the others run theirs headless from their first global rank (arg_utils.py
/// --data-parallel-size-local, --data-parallel-start-rank, --data-parallel-address,
/// --data-parallel-rpc-port; serve.py --headless).
MultiNode data_parallel_nodes(const ExportSpec& spec, int nodes) {
  const int ranks = spec.chosen.layout.ep_size;
  const int per_node = std::max(1, spec.gpus_per_node);
  MultiNode m;
  m.env = required_variable("NODE_RANK", "the index of this node, 0.." + std::to_string(nodes - 1));
  m.env += required_variable("DP_ADDRESS", "the IP address of node 0");
  m.env += "DP_RPC_PORT=\"${DP_RPC_PORT:-13345}\"\n";
  if (ranks % per_node == 0) {
    m.env += "DP_LOCAL=" + std::to_string(per_node) + "\n";
  } else {
    m.env += "DP_LOCAL=$(( NODE_RANK < " + std::to_string(nodes - 1) + " ? " +
             std::to_string(per_node) + " : " + std::to_string(ranks % per_node) + " ))\n";
  }
  m.env +=
      "# node 0 serves the API; the other nodes run their data-parallel ranks headless\n"
      "NODE_ARGS=()\n"
      "if [ \"$NODE_RANK\" -gt 0 ]; then\n"
      "  NODE_ARGS=(--headless --data-parallel-start-rank \"$(( NODE_RANK * " +
      std::to_string(per_node) +
      " ))\")\n"
      "fi\n";
  m.args = {"--data-parallel-size-local \"$DP_LOCAL\"", "--data-parallel-address \"$DP_ADDRESS\"",
            "--data-parallel-rpc-port \"$DP_RPC_PORT\"", "\"${NODE_ARGS[@]}\""};
  return m;
}

/// One tensor-parallel group across nodes (arg_utils.py --nnodes, --node-rank, --master-addr,
/// --master-port); the nodes other than 0 run headless.
MultiNode tensor_parallel_nodes(int nodes) {
  MultiNode m;
  m.env = required_variable("NODE_RANK", "the index of this node, 0.." + std::to_string(nodes - 1));
  m.env += required_variable("MASTER_ADDR", "the IP address of node 0");
  m.env += "MASTER_PORT=\"${MASTER_PORT:-29501}\"\n";
  m.env +=
      "# node 0 serves the API; the other nodes run their ranks headless\n"
      "NODE_ARGS=()\n"
      "if [ \"$NODE_RANK\" -gt 0 ]; then\n"
      "  NODE_ARGS=(--headless)\n"
      "fi\n";
  m.args = {"--nnodes " + std::to_string(nodes), "--node-rank \"$NODE_RANK\"",
            "--master-addr \"$MASTER_ADDR\"", "--master-port \"$MASTER_PORT\"",
            "\"${NODE_ARGS[@]}\""};
  return m;
}

ExportResult write(const ExportSpec& spec, std::string_view version, const ExportOptions&) {
  ExportResult res;
  const Layout& l = spec.chosen.layout;
  std::vector<std::string> args;
  if (l.ep_size == 1) {
    args.push_back("--tensor-parallel-size " + std::to_string(l.tp_size));
  } else {
    // tp == 1 here: EP over data-parallel ranks, each with its own tokens (attention TP 1).
    args.push_back("--tensor-parallel-size 1");
    args.push_back("--data-parallel-size " + std::to_string(l.ep_size));
    args.push_back("--enable-expert-parallel");
    std::string backend;
    switch (l.dispatcher) {
      case Dispatcher::kAllGather: backend = "allgather_reducescatter"; break;
      case Dispatcher::kA2av:
        backend =
            spec.workload.phase == Phase::kDecode ? "deepep_low_latency" : "deepep_high_throughput";
        break;
      case Dispatcher::kDeepEpNormal: backend = "deepep_high_throughput"; break;
      case Dispatcher::kDeepEpLl: backend = "deepep_low_latency"; break;
      case Dispatcher::kPaddedA2a:
        backend =
            spec.workload.phase == Phase::kDecode ? "deepep_low_latency" : "deepep_high_throughput";
        res.warnings.push_back(
            "vLLM has no padded equal-split all-to-all; exported as "
            "--all2all-backend " +
            backend + " (moeplan's a2av)" + same_shape_with(spec, Dispatcher::kA2av));
        break;
    }
    args.push_back("--all2all-backend " + backend);
    // vLLM's dual batch overlap: DP + EP only (docs/design/dbo.md).
    if (l.tbo) args.push_back("--enable-dbo");
  }
  if (l.tbo && l.ep_size == 1) {
    res.warnings.push_back(
        "vLLM's dual batch overlap needs data parallelism with expert parallelism; ep 1 is "
        "exported without --enable-dbo");
  }
  const WeightsArgs q = vllm_weights(spec, version);
  args.insert(args.end(), q.args.begin(), q.args.end());
  if (spec.workload.counts_kv()) {
    // The plan's context and memory share (vLLM's KV cache takes what the fraction leaves).
    args.push_back("--max-model-len " + std::to_string(spec.workload.isl + spec.workload.osl));
    args.push_back("--gpu-memory-utilization " + fraction_text(spec.workload.mem_fraction));
  }
  if (spec.placement) {
    const Placement& p = *spec.placement;
    const int redundant = redundant_slots(spec);
    if (is_contiguous(p)) {
      // vLLM's default linear placement.
    } else if (is_round_robin(p)) {
      args.push_back("--expert-placement-strategy round_robin");
    } else {
      res.warnings.push_back(
          "vLLM cannot load an explicit expert placement (only --expert-placement-strategy "
          "linear|round_robin); placement '" +
          p.policy + "' is not exported, " +
          (redundant > 0 ? std::string("its EPLB starts from linear and rebalances at run time")
                         : std::string("nearest: the linear (contiguous) placement")));
    }
    if (redundant > 0) {
      args.push_back("--enable-eplb");
      args.push_back(
          "--eplb-config '{\"window_size\":1000,\"step_interval\":3000,"
          "\"num_redundant_experts\":" +
          std::to_string(redundant) + "}'");
    }
  }
  const int nodes = spec.num_nodes();
  std::string env = model_path_line(spec);
  if (nodes > 1) {
    const MultiNode m =
        l.ep_size > 1 ? data_parallel_nodes(spec, nodes) : tensor_parallel_nodes(nodes);
    env += m.env;
    args.insert(args.end(), m.args.begin(), m.args.end());
  }
  std::string script = "#!/usr/bin/env bash\n" + comment_block(spec, "vllm", version, res.warnings);
  script += "set -euo pipefail\n" + env;
  script += shell_command("vllm serve \"$MODEL_PATH\"", args);
  res.files.push_back({"vllm_serve.sh", script});
  return res;
}

}  // namespace vllm
}  // namespace

const FormatWriter kVllmWriter = {ExportFormat::kVllm, "vllm",      "vLLM",      vllm::kVersions,
                                  vllm::cannot_run,    vllm::write, vllm_weights};

}  // namespace moeplan::planner::exports
